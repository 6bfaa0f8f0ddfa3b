#!/usr/bin/env bash
# Runs a command on another NCCL, built from its source:
#     with_nccl.sh SOURCE_ARCHIVE [COMMAND...]
# SOURCE_ARCHIVE is a `git archive` of NVIDIA/nccl at a tag (.tar or .tar.gz). It is built once,
# for this machine's GPU only, into $NCCL_BUILDS (default /tmp/nccl-builds)/<archive name>. For the
# command's run, PyTorch's own libnccl.so.2 is replaced by the built one and put back afterwards:
# PyTorch loads the copy in its wheel by its own path, so LD_LIBRARY_PATH does not switch it. (Its
# torch.cuda.nccl.version() keeps saying the version it was built with; the summary's NCCL line
# says the one loaded.) Without a COMMAND, it only builds. Status: the command's.
source "$(dirname "$0")/common.sh"
archive="$1"; shift
name="$(basename "$archive")"; name="${name%.gz}"; name="${name%.tar}"
src="${NCCL_BUILDS:-/tmp/nccl-builds}/$name"
built="$src/build/lib/libnccl.so.2"
if [ ! -f "$built" ]; then
  mkdir -p "$src"
  tar xf "$archive" -C "$src" --strip-components="${ARCHIVE_DEPTH:-0}" || exit 1
  cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)"
  echo "building $name for sm_$cap"
  make -C "$src" -j"$(nproc)" src.build NVCC_GENCODE="-gencode=arch=compute_$cap,code=sm_$cap" >"$src/build.log" 2>&1 ||
    { tail -20 "$src/build.log"; exit 1; }
fi
[ "$#" -eq 0 ] && exit 0
bundled="$(real_nccl_dir)/libnccl.so.2"
[ -f "$bundled" ] || { echo "no libnccl.so.2 of PyTorch's to replace"; exit 1; }
bundled="$(readlink -f "$bundled")"
cp -a "$bundled" "$bundled.bundled"
trap 'mv -f "$bundled.bundled" "$bundled"' EXIT
cp "$(readlink -f "$built")" "$bundled"
echo "NCCL for this run: $name (in place of $(basename "$bundled"))"
"$@"
