"""First load of each page of a built book in Chromium: time to the last chart drawn, and bytes moved.

Run on demand after ``make book``: ``python benchmarks/bench_pages.py [--html _build/html] [--repeats 5]``.

Serves the built book from localhost and loads every chapter page, the introduction and an empty page of
the same book (``genindex.html``: the theme's scripts and styles, no content) in headless Chromium (Debian's
``/usr/bin/chromium`` driven by playwright-core from ``make vendor``), each in a fresh browser context, the
pages interleaved. Per page it prints the median time from navigation start to the last chart drawn (to the
load event on pages without charts), that time as a ratio against the empty page measured in the same run
(the machine is shared and noisy: only ratios and medians measured together mean anything), and the bytes
moved, gzip-compressed as a static host serves text, and records both per page against the empty page
(``benchmarks/results/bench_pages.json``; without a built book, node modules or Chromium the record says it
does not apply). Targets (issue 25): under 3 s to the last chart at 1280 px on a quiet machine, under 1.2 MB
(the book tier's browser test fails a page over it).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import shutil
import statistics
import subprocess
import threading
from pathlib import Path

from records import Record, not_applicable

ROOT = Path(__file__).resolve().parents[1]
NPM_ROOT = ROOT / ".cache" / "npm" / "node_modules"
EMPTY = "genindex.html"
TARGET_MS = 3000  # to the last chart drawn, at 1280 px
TARGET_BYTES = 1_200_000  # first load, gzip-compressed (tests/book/test_book.py's PAGE_BUDGET)


def _serve(html: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(html))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--html", type=Path, default=ROOT / "_build" / "html", help="a built book (default _build/html)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not (args.html / "index.html").is_file() or not Path(chromium).exists() or not NPM_ROOT.is_dir():
        why = f"needs a built book in {args.html} (make book), node modules (make vendor) and chromium"
        not_applicable(__file__, why)
        return 0
    rec = Record(__file__, settings=vars(args))
    pages = [EMPTY, "book/intro.html", *sorted(f"notebooks/{p.name}" for p in (args.html / "notebooks").glob("*.html"))]
    httpd, base = _serve(args.html)
    try:
        proc = subprocess.run(
            ["node", str(Path(__file__).with_suffix(".mjs")), base, str(args.repeats), *pages],
            capture_output=True,
            text=True,
            timeout=1800,
            env={**os.environ, "NPM_ROOT": str(NPM_ROOT), "CHROMIUM": chromium},
        )
    finally:
        httpd.shutdown()
    if proc.returncode:
        print(proc.stderr[-3000:])
        return 1
    runs = json.loads(proc.stdout)
    med = {p: statistics.median(r["ms"] for r in runs if r["page"] == p) for p in pages}
    print(f"{args.html}: median of {args.repeats} first loads per page, {os.cpu_count()} cores\n")
    print(f"{'page':<38}{'charts':>7}{'to last chart':>15}{'/ empty page':>14}{'gzip MB':>9}{'requests':>10}")
    for p in pages:
        r = next(r for r in runs if r["page"] == p)
        flag = "  over budget" if med[p] > TARGET_MS or r["bytes"] > TARGET_BYTES else ""
        print(
            f"{p:<38}{r['charts']:>7}{med[p] / 1000:>13.2f} s{med[p] / med[EMPTY]:>13.1f}x"
            f"{r['bytes'] / 1e6:>9.2f}{r['requests']:>10}{flag}"
        )
        rec.figure(f"to last chart, {p}", med[p], "ms", baseline=None if p == EMPTY else f"to last chart, {EMPTY}")
        rec.figure(f"gzip bytes, {p}", r["bytes"], "bytes", baseline=None if p == EMPTY else f"gzip bytes, {EMPTY}")
    rec.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
