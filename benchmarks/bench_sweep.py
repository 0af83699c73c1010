"""Benchmark the Dask sweep against a sequential loop of the same runs, in one run (on demand, not a test):

    python benchmarks/bench_sweep.py [--seeds 4] [--workers 2] [--hta-n 8]

1. The same chapter runs (chapters 1 and 3 with small parameters on the embedded model, ``--seeds`` seeds)
   executed one after another in this process on one thread, then as a sweep on a LocalCluster of
   ``--workers`` single-threaded workers. Each variant starts from an empty data folder, so neither reads
   the other's caches. Printed: both wall times, the speed-up (expect close to the number of workers on a
   machine with that many idle cores), and the overhead per task: the sweep's wall time minus the ideal
   (sequential time / workers), per run, next to the round trip of an empty Dask task.
2. Exact HTA of ``--hta-n`` sentences (chapter 6's sample) over the workers vs one process on one thread.

Both comparisons are recorded, the sequential time the baseline (``benchmarks/results/bench_sweep.json``).

Run it alone: on a loaded machine every ratio measures the other jobs.
"""

from __future__ import annotations

import argparse
import os

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = "1"  # the sequential baseline and every kernel it starts use one thread

import tempfile
import time
from pathlib import Path

import torch
from records import Record

from identifiability.base import cluster, paths
from identifiability.runs import corpus_hta, sweep

PARAMS = {
    "n_sentences": 24,
    "fig1_n_lengths": 3,
    "fig1_repeats": 1,
    "fig1_max_length": 64,
    "viewer_sentences": 1,
    "viewer_max_tokens": 40,
}


def _fresh_data(tag: str) -> Path:
    d = Path(tempfile.mkdtemp(prefix=f"bench-sweep-{tag}-"))
    os.environ[paths.DATA_ENV] = str(d)
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--hta-n", type=int, default=8)
    a = ap.parse_args()
    rec = Record(__file__, settings=vars(a))
    torch.set_num_threads(1)
    seeds = list(range(a.seeds))

    data = _fresh_data("seq")
    runs, problems = sweep.plan([paths.DEFAULT_MODEL], ["lee"], seeds, ["01", "03"], PARAMS)
    assert not problems, problems
    t0 = time.perf_counter()
    for run in runs:
        sweep.file_run(run, paths.sweep_root(), sweep.execute(run, str(data)), attempts=1)
    seq = time.perf_counter() - t0

    _fresh_data("dask")
    client = cluster.connect(workers=a.workers)
    try:
        t0 = time.perf_counter()
        futures = [client.submit(lambda: None, pure=False) for _ in range(50)]
        client.gather(futures)
        empty = (time.perf_counter() - t0) / 50
        t0 = time.perf_counter()
        report = sweep.sweep([paths.DEFAULT_MODEL], ["lee"], seeds, ["01", "03"], PARAMS, client=client)
        par = time.perf_counter() - t0
        assert len(report.ran) == len(runs) and not report.failed, report.summary()

        texts = corpus_hta.job_sentences(paths.DEFAULT_MODEL, "lee", a.hta_n, 0, 64)
        _fresh_data("hta-dask")
        t0 = time.perf_counter()
        corpus_hta.hta_job(paths.DEFAULT_MODEL, "lee", n=a.hta_n, seed=0, max_tokens=64, client=client, progress=False)
        hta_par = time.perf_counter() - t0
    finally:
        cluster.close(client, own=True)

    from identifiability.hta import hta_corpus
    from identifiability.models.load import load_model

    t0 = time.perf_counter()
    hta_corpus(load_model(), texts, mode="exact", progress=False)
    hta_seq = time.perf_counter() - t0

    n = len(runs)
    print(f"chapter runs: {n} ({', '.join(sorted({r.chapter for r in runs}))} x {a.seeds} seeds)")
    print(f"  sequential, one thread:        {seq:7.1f} s")
    print(f"  sweep, {a.workers} workers x 1 thread:   {par:7.1f} s   speed-up {seq / par:.2f}x (ideal {a.workers}x)")
    print(
        f"  overhead per run: {(par - seq / a.workers) / n:.2f} s over the ideal; "
        f"empty Dask task round trip {1000 * empty:.1f} ms"
    )
    print(f"exact HTA of {len(texts)} sentences (up to 64 tokens):")
    print(f"  one process, one thread:       {hta_seq:7.1f} s")
    print(f"  {a.workers} workers x 1 thread:           {hta_par:7.1f} s   speed-up {hta_seq / hta_par:.2f}x")
    print("(the worker timings include loading the model once per worker)")
    rec.figure("chapter runs, sequential", seq, "s")
    rec.figure(f"chapter runs, sweep on {a.workers} workers", par, "s", baseline="chapter runs, sequential")
    rec.figure("overhead per run over the ideal", (par - seq / a.workers) / n, "s")
    rec.figure("empty Dask task round trip", empty, "s")
    rec.figure("exact HTA, sequential", hta_seq, "s")
    rec.figure(f"exact HTA, {a.workers} workers", hta_par, "s", baseline="exact HTA, sequential")
    rec.write()


if __name__ == "__main__":
    main()
