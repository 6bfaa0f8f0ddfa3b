"""Copies a trace without the unused, zero-filled tail of its last chunk (traces grow in 4 MiB
chunks): trim_trace.py IN OUT. It walks the committed records (trace_format.h: each starts with
its size and a commit mark) and cuts after the last one; the reader stops at the end of the file."""
import struct
import sys

COMMIT_MARK = 0xC0DE
data = open(sys.argv[1], "rb").read()
(header_bytes,) = struct.unpack_from("<I", data, 16)  # FileHeader: magic[8], version, min_reader_version, header_bytes
end = offset = header_bytes
while offset + 8 <= len(data):
    size, _type, commit = struct.unpack_from("<IHH", data, offset)
    if size == 0:
        offset += 8  # a record being written when the process died, or the unused tail
        continue
    if commit != COMMIT_MARK or size % 8 or offset + size > len(data):
        offset += 8
        continue
    offset += size
    end = offset
open(sys.argv[2], "wb").write(data[:end])
