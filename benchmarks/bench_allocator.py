"""Benchmark the allocator settings of the computing processes (run on demand, not a test):

    python benchmarks/bench_allocator.py [--member mlm-w128-dv16-seed0] [--steps 3]

Runs ``bench_pretrain.py`` (one thread, the member's training step) in fresh processes, since glibc reads its
settings when a process starts: first under Dask's default environment for workers
(``MALLOC_TRIM_THRESHOLD_=65536``, the baseline), then under ``cluster.ALLOCATOR_ENV``, and prints each
one's seconds per step of the fused fp32 kernel, its minor page faults and system time, as ratios against the
baseline, and records them (``benchmarks/results/bench_allocator.json``).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

from records import Record

from identifiability.base.cluster import ALLOCATOR_ENV

HERE = Path(__file__).resolve().parent
DASK_DEFAULT = {"MALLOC_TRIM_THRESHOLD_": "65536"}


def _run(env: dict[str, str], member: str, steps: int) -> tuple[float, int, float]:
    """(s/step of "sdpa fp32", minor page faults, system seconds) of one bench_pretrain process."""
    base = {k: v for k, v in os.environ.items() if k not in ALLOCATOR_ENV}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, str(HERE / "bench_pretrain.py"), "--member", member, "--threads", "1", "--steps", str(steps)]
        + ["--no-record"],  # its record would replace bench_pretrain's own; this one's is bench_allocator's
        env={**base, "OMP_NUM_THREADS": "1", **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    step = float(re.search(r"sdpa fp32 \(training\)\s+([\d.]+) s/step", out).group(1))
    return step, after.ru_minflt - before.ru_minflt, after.ru_stime - before.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--member", default="mlm-w128-dv16-seed0")
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    rec = Record(__file__, settings=vars(a))
    runs = {"Dask's default (baseline)": DASK_DEFAULT, "cluster.ALLOCATOR_ENV": ALLOCATOR_ENV}
    results = {name: _run(env, a.member, a.steps) for name, env in runs.items()}
    base = results["Dask's default (baseline)"][0]
    print(f"{a.member}, one thread, {a.steps} steps after a warm-up")
    for name, (step, faults, sys_s) in results.items():
        print(
            f"  {name:26s} {step:5.2f} s/step  {base / step:4.2f}x the baseline  "
            f"{faults / 1e6:5.2f} M page faults  {sys_s:5.1f} s system"
        )
    first = next(iter(results))
    for what, unit, k in (("step", "s", 0), ("minor page faults", "count", 1), ("system time", "s", 2)):
        for name, values in results.items():
            rec.figure(f"{what}, {name}", values[k], unit, baseline=None if name == first else f"{what}, {first}")
    rec.write()


if __name__ == "__main__":
    main()
