"""ncclwatch-report html: the page's content checked against the other reports' JSON (the figures
must be theirs), its structure through Python's html.parser, and what a browser draws of it
through a headless Chromium screenshot decoded here (a small PNG reader, zlib only)."""
import collections
import html.parser
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_harness import REAL, REPORT, check, job, run_case, tempdir  # noqa: E402
from report_harness import report as harness_report  # noqa: E402

SKIP = 77  # meson's "skipped"

# The hostile communicator name of gen_job's html_demo scenario.
HOSTILE = "tp<script>alert(\"x&y\")</script>'\u00fc"


def report(*args):
    return harness_report(*args)


def report_json(*args):
    p = report(*args, "--json")
    return json.loads(p.stdout)


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# Inside inline SVG, elements without content may close themselves.
SVG_LEAVES = {"rect", "line", "circle", "polyline", "path", "text", "title", "g"}


class Page(html.parser.HTMLParser):
    """Checks nesting (every element closed in order) and collects what the tests look at."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.tags = [], [], collections.Counter()
        self.attrs_seen = []          # (tag, attrs) of every element
        self.text = []                # all text content, unescaped
        self.comm = None              # data-comm of the latest communicator heading
        self.polylines = []           # (comm, attrs)
        self.heatmaps = []            # {"attrs", "cells": [attrs]}
        self.labels = []              # (class, text) of heatmap row labels
        self.cards = collections.defaultdict(str)  # card id -> its text
        self.card = None
        self.card_depth = 0
        self.in_label = None
        self.feed(text)
        self.close()
        check(not self.stack, f"unclosed elements: {self.stack}")

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags[tag] += 1
        self.attrs_seen.append((tag, a))
        if tag == "h3" and "data-comm" in a:
            self.comm = a["data-comm"]
        if tag == "polyline":
            self.polylines.append((self.comm, a))
        if tag == "svg" and "heatmap" in a.get("class", "").split():
            self.heatmaps.append({"attrs": a, "cells": []})
        if tag == "rect" and a.get("class") == "cell":
            check(self.heatmaps and "svg" in self.stack, "a heatmap cell outside a heatmap")
            self.heatmaps[-1]["cells"].append(a)
        if tag == "text" and "rowlabel" in a.get("class", "").split():
            self.in_label = [a["class"], ""]
        if tag == "div" and "card" in a.get("class", "").split():
            self.card, self.card_depth = a.get("id"), len(self.stack)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        check(tag in VOID or tag in SVG_LEAVES, f"self-closed <{tag}/> is not valid HTML")
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        check(self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-3:]}")
        self.stack.pop()
        if tag == "text" and self.in_label:
            self.labels.append(tuple(self.in_label))
            self.in_label = None
        if tag == "div" and self.card and len(self.stack) == self.card_depth:
            self.card = None

    def handle_data(self, data):
        self.text.append(data)
        if self.in_label:
            self.in_label[1] += data
        if self.card:
            self.cards[self.card] += data


def render(d, *extra):
    out = os.path.join(tempdir(), "report.html")
    p = report("html", d, "-o", out, *extra)
    check(p.returncode in (0, 1) and os.path.exists(out), (p.returncode, p.stderr))
    with open(out, encoding="utf-8") as f:
        text = f.read()
    return p, out, text, Page(text)


def check_self_contained(text, page):
    # Nothing to load: no scripts, stylesheets, frames, images or fonts from anywhere.
    check("http://" not in text and "https://" not in text, "a network reference")
    for tag in ("script", "link", "iframe", "img", "object", "embed", "base"):
        check(page.tags[tag] == 0, f"<{tag}> in a self-contained page")
    for tag, a in page.attrs_seen:
        for name in ("src", "href", "xlink:href", "srcset", "action"):
            check(name not in a, f"<{tag} {name}=...>")
    check("@import" not in text and "url(" not in text, "CSS that loads")


def busbw_points(latency):
    """(comm, op) -> number of GPU-timed sizes with a bandwidth, from latency --json."""
    want = collections.Counter()
    for r in latency["rows"]:
        if r["busbw_gbps"] is not None:
            check(r["timing"] == "gpu", r)
            want[(r["comm"], r["op"])] += 1
    return want


def test_verdict_plots_heatmap_escaping():
    d = job("html_demo")
    p, out, text, page = render(d)
    check(p.returncode == 1, (p.returncode, p.stdout, p.stderr))  # a leak is a finding
    check_self_contained(text, page)

    # The verdict: the leak the leaks report finds, the straggler the hang report finds.
    leaks = report_json("leaks", d)
    leaked = sorted({l["comm"] for l in leaks["leaks"] if l["kind"] == "communicator"})
    check(leaked == ["a11ce00000000001"], leaked)
    check("1 communicator(s) never destroyed" in page.cards["leaks"], page.cards["leaks"])
    body = "".join(page.text)
    check("a11ce00000000001" in body and "leaked (alive at exit)" in body and "6 of 8" in body, "leak table")
    hang = report_json("hang", d)
    flagged = [r["rank"] for c in hang["comms"] for r in c["stragglers"]["ranks"] if r["finding"]]
    check(flagged == [5], flagged)
    check("rank 5 started last on the GPU" in page.cards["stragglers"], page.cards["stragglers"])
    check("None" in page.cards["mismatches"] and "No rank stopped short" in page.cards["hang"], page.cards)

    # One busbw series per (comm, op), a point per GPU-timed size with a bandwidth.
    latency = report_json("latency", d)
    want = busbw_points(latency)
    got = collections.Counter()
    for comm, a in page.polylines:
        if a.get("class") != "busbw":
            continue
        points = a["points"].split()
        check(len(points) == int(a["data-points"]), a)
        check((comm, a["data-series"]) not in got, f"two series for {comm} {a['data-series']}")
        got[(comm, a["data-series"])] = len(points)
    check(got == want, (got, want))
    # Beside it, p50 latency versus size: one series per (comm, op, timing), a point per size
    # with a steady state, whose values are latency's p50s (log10 of µs on the y axis).
    want_latency = collections.Counter((r["comm"], f'{r["op"]} ({r["timing"]})') for r in latency["rows"] if r["p50_us"])
    got_latency = collections.Counter()
    for comm, a in page.polylines:
        if a.get("class") == "latency":
            got_latency[(comm, a["data-series"])] = int(a["data-points"])
    check(got_latency == want_latency, (got_latency, want_latency))
    # The page names its job first: when it started, the command, the hosts and the versions.
    header = re.search(r'<table class="job">(.*?)</table>', text).group(1)
    check(all(f"<th>{k}</th>" in header for k in ("job", "started", "command", "hosts", "versions")), header)
    check(re.search(r"<th>started</th><td>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</td>", header) and "ncclwatch 0." in header,
          header)
    check(want[("a11ce00000000001", "ncclAllReduce")] == 8 and want[("a11ce00000000001", "ncclAllGather")] == 3, want)

    # The heatmap of the busiest communicator: every rank, one column per seq (41 seqs), rank 5
    # the darkest row.
    world = [h for h in page.heatmaps if h["attrs"]["data-comm"] == "a11ce00000000001"]
    check(len(world) == 1, [h["attrs"] for h in page.heatmaps])
    h = world[0]
    ranks, bins = int(h["attrs"]["data-ranks"]), int(h["attrs"]["data-bins"])
    check((ranks, bins) == (8, 41) and len(h["cells"]) == ranks * bins, (ranks, bins, len(h["cells"])))
    rows = [h["cells"][r * bins:(r + 1) * bins] for r in range(ranks)]
    check(all(c["fill"] == "#b10026" for c in rows[5]), "rank 5's row is the latest")
    check(all(c["fill"] == "#ffffcc" for r in (0, 1, 2, 3, 4, 6, 7) for c in rows[r]), "the others arrive together")
    check(("rowlabel straggler", "rank 5 \u25c0") in page.labels, page.labels)
    check("GPU start times" in body, "says what lateness is measured on")

    # The hostile name is text on the page, never markup.
    check(HOSTILE in body, "the name shown as it is")
    check("<script" not in text.lower(), "markup from a trace reached the page")
    check("tp&lt;script&gt;alert(&quot;x&amp;y&quot;)&lt;/script&gt;&#39;\u00fc" in text, "escaped")

    # Live communicators: one step line, ending with the leaked instance still counted.
    live = [a for _, a in page.polylines if a.get("class") == "live"]
    check(len(live) == 1, live)
    check("1 instance(s) were never released" in body, "live note")
    check("None: every process ran the same NCCL version" in body, "environment")


def test_bins_and_rows_bounded():
    # 70 ranks, 250 seqs: 64 rows (the straggler, rank 67, kept), 200 bins, each its worst.
    d = job("wide_straggler")
    p, out, text, page = render(d)
    check(p.returncode == 0, (p.returncode, p.stderr))
    check(len(page.heatmaps) == 1, len(page.heatmaps))
    h = page.heatmaps[0]
    ranks, bins = int(h["attrs"]["data-ranks"]), int(h["attrs"]["data-bins"])
    check((ranks, bins) == (64, 200) and len(h["cells"]) == 64 * 200, (ranks, bins, len(h["cells"])))
    body = "".join(page.text)
    check("Showing 64 of 70 ranks" in body and "Seqs 1\u2013250 in 200 bins" in body, "says what was cut")
    check(("rowlabel straggler", "rank 67 \u25c0") in page.labels, [l for l in page.labels if "straggler" in l[0]])
    # Rows are ranks in order: 0..62, then 67.
    last = h["cells"][63 * bins:]
    check(all(c["fill"] == "#b10026" for c in last), "rank 67's bins")
    check(os.path.getsize(out) < 4 << 20, os.path.getsize(out))


def test_host_timing_environment_and_real_traces():
    # Host timing only: no bandwidth to plot, lateness from host enqueue times, said so.
    d = job("host_timing")
    p, out, text, page = render(d)
    check(p.returncode == 0, p.stderr)
    body = "".join(page.text)
    check(not [a for _, a in page.polylines if a.get("class") == "busbw"], "no busbw series without GPU timing")
    check("No GPU-timed sizes here" in body and "host enqueue times" in body and "host (enqueue time)" in body, body[:2000])

    # Environment differences: the same table the hang report computes.
    d = job("env_diff")
    p, out, text, page = render(d)
    env = report_json("hang", d)["environment"]
    body = "".join(page.text)
    check({e["key"] for e in env} == {"NCCL_ALGO", "nccl_version"}, env)
    for e in env:
        for v in e["values"]:
            check(e["key"] in body and v["value"] in body, (e, v))

    # Real PyTorch traces (two H200s): rank 1 slept 20 ms before each all-reduce.
    p, out, text, page = render(os.path.join(REAL, "straggler"))
    check(("rowlabel straggler", "rank 1 \u25c0") in page.labels, page.labels)
    check("GPU start times" in "".join(page.text), "real traces are GPU-timed")
    check(all(len(h["cells"]) == int(h["attrs"]["data-ranks"]) * int(h["attrs"]["data-bins"]) for h in page.heatmaps),
          "cells")
    want = busbw_points(report_json("latency", os.path.join(REAL, "straggler")))
    got = collections.Counter({(c, a["data-series"]): int(a["data-points"]) for c, a in page.polylines
                               if a.get("class") == "busbw"})
    check(got == want and want, (got, want))
    # A skipped all-reduce: the hang report's finding, exit 1.
    p, out, text, page = render(os.path.join(REAL, "skip"))
    check(p.returncode == 1 and "rank 1 departed" in "".join(page.text), p.returncode)


def test_exit_codes_and_bad_inputs():
    check(report("html", job("clean"), "-o", os.path.join(tempdir(), "r.html")).returncode == 0, "clean: 0")
    # -o is required
    p = report("html", job("clean"))
    check(p.returncode == 2 and "--output" in p.stderr, (p.returncode, p.stderr))
    # Only bad inputs: exit 2, named, nothing written.
    d = tempdir()
    garbage = os.path.join(d, "garbage.nwt")
    with open(garbage, "wb") as f:
        f.write(os.urandom(5000))
    out = os.path.join(tempdir(), "r.html")
    p = report("html", d, "-o", out)
    check(p.returncode == 2 and "garbage.nwt" in p.stderr and not os.path.exists(out), (p.returncode, p.stderr))
    # Beside a usable job: named on stderr, the rest still used.
    d = job("html_demo")
    shutil.copy(garbage, os.path.join(d, "garbage.nwt"))
    p = report("html", d, "-o", out)
    check(p.returncode == 1 and "garbage.nwt" in p.stderr and os.path.exists(out), (p.returncode, p.stderr))
    Page(open(out, encoding="utf-8").read())
    # An output that cannot be written: exit 2.
    p = report("html", d, "-o", os.path.join(d, "no", "such", "dir", "r.html"))
    check(p.returncode == 2 and "cannot write" in p.stderr, (p.returncode, p.stderr))


# ---------------------------------------------------------------------------------------------
# A real browser: Chromium renders the page headless; the screenshot is decoded here.

def read_png(path):
    """(width, height, bytes per pixel, pixel rows) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat.append(chunk)
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = header
    check(depth == 8 and colour in (2, 6) and interlace == 0, header)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:  # Sub
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind == 2:  # Up
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif kind == 3:  # Average
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif kind == 4:  # Paeth
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        else:
            check(kind == 0, f"filter {kind}")
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def colour_counts(png):
    width, height, bpp, rows = png
    counts = collections.Counter()
    for row in rows:
        counts.update(zip(row[0::bpp], row[1::bpp], row[2::bpp]))
    return counts


def rgb(hex_colour):
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(browser, page_path, png_path, width=1400, height=2400):
    args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--force-color-profile=srgb",
            "--force-device-scale-factor=1", f"--window-size={width},{height}", f"--screenshot={png_path}",
            "file://" + os.path.abspath(page_path)]
    # Chromium's first start in a fresh profile can be slow; a stuck one must not hang the suite.
    p = subprocess.run(args, capture_output=True, text=True, timeout=90,
                       env={**os.environ, "HOME": tempdir()})
    check(p.returncode == 0 and os.path.exists(png_path), (p.returncode, p.stderr[-2000:]))


def test_drawn_in_headless_chromium():
    browser = chromium()
    if not browser:
        print("skipped: chromium is not installed (scripts/bootstrap installs it)")
        sys.exit(SKIP)
    d = job("html_demo")
    p, out, text, page = render(d)
    png = os.path.join(tempdir(), "shot.png")
    screenshot(browser, out, png, 1400, 5200)
    image = read_png(png)
    check(image[0] == 1400 and image[1] == 5200, image[:3])
    counts = colour_counts(image)
    # Every plotted series: its line and markers are drawn in its colour (markers alone: ~60 px each).
    series = collections.defaultdict(int)
    for _, a in page.polylines:
        series[a["stroke"]] += int(a["data-points"])
    for colour, points in series.items():
        check(counts[rgb(colour)] >= 60 * points, (colour, points, counts[rgb(colour)]))
    # Heatmap cells: the pixels of each fill are at least the area its cells cover (at scale 1).
    area = collections.Counter()
    for h in page.heatmaps:
        for c in h["cells"]:
            area[c["fill"]] += float(c["width"]) * float(c["height"])
    check(area["#b10026"] > 0 and area["#ffffcc"] > 0, area)
    for fill, pixels in area.items():
        check(counts[rgb(fill)] >= 0.9 * pixels, (fill, pixels, counts[rgb(fill)]))
    # The page's background is white and most of it (a blank screenshot fails above, a broken one here).
    check(counts[(255, 255, 255)] > 0.3 * 1400 * 5200, counts.most_common(3))


if __name__ == "__main__":
    run_case(globals())
