"""The README's two commands timed from fresh clones, as a new user and CI run them (on demand, not a test):

    python benchmarks/bench_commands.py [--commands test book] [--ref HEAD]

For each command, a fresh ``git clone`` of this checkout at ``--ref`` into a temporary folder, then the command
there, its install included (a new venv, the locked packages, the page scripts from npm; chromium is checked,
not installed, when it is already on the machine). Recorded (``benchmarks/results/bench_commands.json``):

- each command's wall time, and for ``make test`` the share of it that pytest took (the rest is the install and
  the lint), with the suite's summary line;
- the peak resident memory of the largest process each command started (``ru_maxrss`` of its children);
- the disk each clone holds afterwards (the venv, the build, the data folder's caches);
- the machine's float32 matrix-product rate on one and on all threads, measured in the same run, so that a
  slower machine can be told apart from a slower command.

It then writes the README's block of these figures (between its ``bench_commands`` markers) from the record;
``--readme`` alone rewrites that block from the committed record without running anything.

Run it alone, on a quiet machine: it takes the time of both commands (several minutes each) and every other
process on the machine shows in its figures. The clones are removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from records import ROOT, Record

COMMANDS = {"test": ["make", "test"], "book": ["make", "book"]}
README = ROOT / "README.md"
RECORD = ROOT / "benchmarks" / "results" / "bench_commands.json"
BEGIN = (
    "<!-- bench_commands: generated from benchmarks/results/bench_commands.json by benchmarks/bench_commands.py; "
    "do not edit -->"
)
END = "<!-- /bench_commands -->"


def readme_block(doc: dict | None) -> str:
    """The README's lines between its markers, from the record ``doc`` (None: there is no record yet)."""
    if doc is None:
        return "*No record yet: run `python benchmarks/bench_commands.py` on a quiet machine.*"
    figures = {f["name"]: f["value"] for f in doc["figures"]}
    details = doc.get("details", {})

    def minutes(name: str) -> str:
        return f"{figures[name] / 60:.1f} min" if name in figures else "–"

    def memory(name: str) -> str:
        key = f"make {name}: peak memory of one process"
        return f"{figures[key]:.1f} GiB" if key in figures else "–"

    def disk(name: str) -> str:
        parts = details.get(f"make {name}: disk after (GiB)")
        return f"{sum(parts.values()):.1f} GiB" if parts else "–"

    rows = [
        ("| | `make test` | `make book` |", "|---|---|---|"),
        (f"| wall time from a fresh clone, install included | {minutes('make test')} | {minutes('make book')} |",),
        (f"| of which pytest | {minutes('pytest')} | |",),
        (f"| peak memory of one process | {memory('test')} | {memory('book')} |",),
        (f"| disk of the clone afterwards (venv, build, data, npm) | {disk('test')} | {disk('book')} |",),
    ]
    m, rate = doc["machine"], details.get("matmul_gflops", {})
    failed = [k for k in details if k.endswith("failed")]
    note = (
        f"*{m['cpu']}, {m['logical_cores']} cores (float32 matrix products at {rate.get('1 thread')} GFLOP/s on "
        f"one thread, {rate.get('all threads')} on all); commit {(doc['commit']['sha'] or '?')[:7]}, "
        f"{doc['date'][:10]}.*" + (f" *Failed: {', '.join(failed)}.*" if failed else "")
    )
    return "\n".join(line for row in rows for line in row) + "\n\n" + note


def write_readme(doc: dict | None, readme: Path = README) -> None:
    """Put :func:`readme_block` of ``doc`` between the README's markers (refused if they are missing)."""
    text = readme.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{readme} lacks the bench_commands markers: put them back where the figures belong")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    readme.write_text(f"{head}{BEGIN}\n{readme_block(doc)}\n{END}{tail}", encoding="utf-8")


def _matmul_gflops(threads: int, n: int = 1024, repeats: int = 20) -> float:
    """float32 n x n matrix products per second on ``threads`` threads, in GFLOP/s (the best of ``repeats``)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(n, n), torch.randn(n, n)
        a @ b  # warm-up: the first product pays for the library's set-up
        best = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t)
    finally:
        torch.set_num_threads(before)
    return 2 * n**3 / best / 1e9


def _disk(folder: Path) -> int:
    """Bytes below ``folder`` (files only, links not followed)."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _run(command: list[str], clone: Path) -> tuple[float, int, str]:
    """(wall seconds, exit status, the output's last 4,000 characters) of ``command`` run in ``clone``."""
    t = time.perf_counter()
    # one stream, in the order written: a failure's summary is at its end, not before the installer's warnings
    done = subprocess.run(command, cwd=clone, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = done.stdout[-4000:]
    return time.perf_counter() - t, done.returncode, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commands", nargs="+", choices=sorted(COMMANDS), default=["test", "book"])
    ap.add_argument("--ref", default="HEAD", help="the commit to clone (default: this checkout's HEAD)")
    ap.add_argument("--readme", action="store_true", help="only rewrite the README's block from the record")
    ap.add_argument("--keep-book", type=Path, help="copy the built book (make book's _build/html) here to look at")
    args = ap.parse_args()
    if args.readme:
        write_readme(json.loads(RECORD.read_text(encoding="utf-8")) if RECORD.exists() else None)
        return
    rec = Record(__file__, settings=vars(args))
    rec.details["matmul_gflops"] = {
        "1 thread": round(_matmul_gflops(1), 1),
        "all threads": round(_matmul_gflops(os.cpu_count() or 1), 1),
    }
    for name in args.commands:
        with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
            clone = Path(tmp) / "checkout"
            subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
            subprocess.run(["git", "checkout", "-q", args.ref], cwd=clone, check=True)
            peak_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            seconds, status, out = _run(COMMANDS[name], clone)
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
            print(f"make {name}: {seconds:.0f} s, exit status {status}")
            if status != 0:
                rec.details[f"make {name} failed"] = out
                continue
            rec.figure(f"make {name}", seconds, "s")
            summary = re.findall(r"=+ (.*(?:passed|failed).*) in ([\d.]+)s", out)
            if name == "test" and summary:
                rec.figure("pytest", float(summary[-1][1]), "s", baseline="make test")
                rec.details["pytest summary"] = summary[-1][0]
            if peak > peak_before:  # the largest child so far; a smaller one leaves the maximum unchanged
                rec.figure(f"make {name}: peak memory of one process", peak / 2**20, "GiB")
            rec.details[f"make {name}: disk after (GiB)"] = {
                part: round(_disk(clone / part) / 2**30, 2) for part in (".venv", "_build", "data", ".cache")
            }
            if name == "book" and args.keep_book:
                shutil.copytree(clone / "_build" / "html", args.keep_book, dirs_exist_ok=True)
            shutil.rmtree(clone, ignore_errors=True)
    write_readme(json.loads(rec.write().read_text(encoding="utf-8")))


if __name__ == "__main__":
    main()
