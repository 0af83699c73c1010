"""Benchmark Hidden Token Attribution on the embedded model: naive reverse loop vs exact forward mode vs the
estimator, at d_s = 16, 32, 64, in one run (run on demand, not a test):

    python benchmarks/bench_attribution.py [--lengths 16 32 64] [--probes 16] [--threads 2] [--full]

Every rate is compared with a plain fp32 matmul measured in the same run, just before each timed step
(the machine is shared; ratios measured side by side are what to read). What is extrapolated says so:
- the naive loop ((L+1)·d_s·d backward passes, far too many to run at every length) is timed on a sample
  of its passes per layer (the passes of one layer all cost the same);
- the generic torch.func path is timed on a sample of its tangent chunks;
- the exact folded pass runs in full for d_s ≤ 32 and on a sample of chunks above that (``--full``:
  always in full), since every chunk costs the same.
The estimator's error is measured against the full exact result where that was computed.
Peak memory: the growth of the peak resident set (VmHWM) over the size before one exact pass, measured in
a fresh process, next to the bound stated in ``identifiability.hta.folded``.

On a machine shared with other jobs, ``--threads 1`` gives steadier numbers: two threads that must
wait for each other turn every small operation (the naive loop is thousands of them) into a stall.

Every figure is recorded, the naive loop the baseline of the times, the matmul of the rate and the stated
bound of the memory (``benchmarks/results/bench_attribution.json``).

Targets (issue 6): exact ≥ 15x the naive loop at d_s = 32 and 64; exact at ≥ 60% of the matmul rate;
estimator ≥ 200x the naive loop with median relative error of c ≤ 1% and 95th percentile ≤ 3%.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from records import Record

from identifiability import hta as attribution
from identifiability.corpus.corpora import concatenated_inputs, load_corpus
from identifiability.hta.core import Directions, auto_chunk, prepare
from identifiability.hta.folded import folded_S
from identifiability.hta.generic import generic_S
from identifiability.models.load import load_model


def matmul_gflops(d: int, reps: int = 5) -> float:
    """A plain fp32 GEMM of the shape the tangent pass is made of: (8192 x d) @ (d x 3d)."""
    a, b = torch.randn(8192, d), torch.randn(d, 3 * d)
    a @ b
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    return reps * 2 * 8192 * d * 3 * d / (time.perf_counter() - t0) / 1e9


def _rss_kb(field: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1])
    return 0


class PeakMemory:
    """Peak resident-set growth during a block, in MB (Linux: VmHWM reset through clear_refs)."""

    def __enter__(self):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6").malloc_trim(0)  # hand freed memory back, so reuse cannot hide a peak
        except (OSError, AttributeError):
            pass
        try:
            open("/proc/self/clear_refs", "w").write("5")
        except OSError:
            pass
        self.base = _rss_kb("VmRSS:")
        return self

    def __exit__(self, *exc):
        self.mb = max(0, _rss_kb("VmHWM:") - self.base) / 1024


def fresh_process_peak(text: str, args) -> float:
    """Peak RSS growth (MB) of one exact folded pass over a few chunks, in a fresh process: in this one the
    naive and generic runs have fragmented the heap, which a pass then pays for.
    Every chunk has the same working set, so a few chunks show the whole pass's peak."""
    code = (
        "import sys, torch; sys.path.insert(0, 'benchmarks'); "
        "from bench_attribution import attribution, PeakMemory, auto_chunk, Directions, folded_S, prepare; "
        "from bench_attribution import load_model; "
        f"torch.set_num_threads({args.threads}); lm = load_model(device={args.device!r}); "
        "inp = prepare(lm, sys.argv[1]); n = inp.x.shape[0]; "
        "dirs = Directions(n, lm.d_model, limit=3 * auto_chunk(n, None)); "
        "m = PeakMemory().__enter__(); folded_S(lm, inp, dirs, None, attribution.fold_spec(lm)); m.__exit__(); "
        "print(m.mb)"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code, text], capture_output=True, text=True, cwd=root, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def timed_S(engine, lm, inp, dirs, chunk=None):
    t0 = time.perf_counter()
    if engine == "folded":
        S = folded_S(lm, inp, dirs, chunk, attribution.fold_spec(lm))
    else:
        S = generic_S(lm, inp, dirs, chunk)
    return S, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--probes", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--naive-per-layer", type=int, default=12, help="timed backward passes per layer")
    ap.add_argument("--sample-chunks", type=int, default=3, help="chunks timed where a pass is extrapolated")
    ap.add_argument("--full-up-to", type=int, default=32, help="run the exact pass in full up to this d_s")
    ap.add_argument("--full", action="store_true", help="run the exact pass in full at every length")
    ap.add_argument(
        "--sweep",
        type=int,
        nargs="*",
        default=[32, 64, 128],
        help="more probe counts whose speed and error are measured where the exact result exists",
    )
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rec = Record(__file__, settings=vars(args))
    lm = load_model(device=args.device)
    d = lm.d_model
    texts = concatenated_inputs(load_corpus("lee"), args.lengths, lm.tokenizer, seed=0)
    print(
        f"model {lm.name}: {lm.n_layers} layers, d={d}, {lm.n_heads} heads; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, device {args.device}"
    )
    rows = []
    for text in texts:
        inp = prepare(lm, text)
        n = inp.x.shape[0]
        B = auto_chunk(n, None)
        dirs = Directions(n, d)
        mm = [matmul_gflops(d)]
        naive_s = attribution.naive_seconds(lm, text, per_layer=args.naive_per_layer)
        # generic torch.func path: a sample of chunks, extrapolated
        lim = min(dirs.total, args.sample_chunks * B)
        _, t = timed_S("generic", lm, inp, Directions(n, d, limit=lim))
        generic_s = t * dirs.total / lim
        # folded exact pass: in full, or a sample of chunks plus the per-sentence folding, extrapolated
        mm.append(matmul_gflops(d))
        full = args.full or n <= args.full_up_to
        if full:
            S_exact, exact_s = timed_S("folded", lm, inp, dirs)
        else:
            S_exact = None
            lim = min(dirs.total, args.sample_chunks * B)
            _, t1 = timed_S("folded", lm, inp, Directions(n, d, limit=1))  # folding + one direction
            _, t2 = timed_S("folded", lm, inp, Directions(n, d, limit=lim + 1))
            exact_s = t1 + (t2 - t1) * dirs.total / lim
        mm.append(matmul_gflops(d))
        flops = attribution.folded_flops(lm, n, dirs.total)
        # estimator
        t0 = time.perf_counter()
        est = attribution.hta(lm, text, mode="estimate", probes=args.probes, seed=0)
        est_s = time.perf_counter() - t0
        mm.append(matmul_gflops(d))
        err = None
        if S_exact is not None:
            exact = attribution.HTAResult(text, inp.tokens, S_exact, "folded")
            err = attribution.estimate_error([exact], [est])
        mm_rate = statistics.median(mm)
        rows.append(
            dict(
                n=n,
                naive=naive_s,
                generic=generic_s,
                exact=exact_s,
                full=full,
                est=est_s,
                err=err,
                gflops=flops / exact_s / 1e9,
                mm=mm_rate,
                mem=fresh_process_peak(text, args),
                bound=attribution.peak_bytes(lm, n) / 2**20,
            )
        )
        r = rows[-1]
        _record_row(rec, r, args.probes)
        print(f"\nd_s = {n}: naive loop {naive_s:8.1f} s (extrapolated from {args.naive_per_layer} passes per layer)")
        print(f"  generic torch.func  {generic_s:8.1f} s (extrapolated)   {naive_s / generic_s:6.1f}x naive")
        print(
            f"  exact folded        {exact_s:8.1f} s ({'full run' if full else 'extrapolated from sampled chunks'})"
            f"   {naive_s / exact_s:6.1f}x naive   {r['gflops']:6.1f} GFLOP/s = {100 * r['gflops'] / mm_rate:4.0f}% "
            f"of matmul ({mm_rate:.1f} GFLOP/s, median of {len(mm)})"
        )
        print(
            f"  estimate ({args.probes} probes)  {est_s:8.2f} s   {naive_s / est_s:6.0f}x naive   "
            f"{exact_s / est_s:5.1f}x cheaper than exact"
        )
        if err:
            print(
                f"  estimate error of c: median {100 * err['median']:.2f}%, p95 {100 * err['p95']:.2f}%, "
                f"max {100 * err['max']:.1f}%, top contributor unchanged in {100 * err['top_agreement']:.1f}% of rows"
            )
        for m in args.sweep if S_exact is not None else []:
            t0 = time.perf_counter()
            e2 = attribution.estimate_error([exact], [attribution.hta(lm, text, mode="estimate", probes=m, seed=0)])
            t = time.perf_counter() - t0
            r.setdefault("sweep", []).append((m, naive_s / t, e2["median"], e2["p95"]))
            rec.figure(f"probe sweep: estimate {m} probes, d_s {n}", t, "s", baseline=f"naive loop, d_s {n}")
            rec.figure(f"probe sweep: estimate {m} probes error median, d_s {n}", e2["median"], "fraction")
            rec.figure(f"probe sweep: estimate {m} probes error p95, d_s {n}", e2["p95"], "fraction")
            print(
                f"  estimate ({m:3d} probes) {t:8.2f} s   {naive_s / t:6.0f}x naive   "
                f"median {100 * e2['median']:.2f}%, "
                f"p95 {100 * e2['p95']:.2f}%"
            )
        print(
            f"  peak memory of the exact pass: +{r['mem']:.0f} MB RSS in a fresh process "
            f"(stated bound {r['bound']:.0f} MB)"
        )
    print("\nsummary  d_s  exact/naive  %matmul  est/naive  est median  est p95   targets: 15x, 60%, 200x, 1%, 3%")
    for r in rows:
        e = r["err"]
        print(
            f"         {r['n']:3d}  {r['naive'] / r['exact']:9.1f}x  {100 * r['gflops'] / r['mm']:6.0f}%  "
            f"{r['naive'] / r['est']:8.0f}x  "
            + (f"{100 * e['median']:8.2f}%  {100 * e['p95']:6.2f}%" if e else "       n/a      n/a")
        )

    for r in rows:
        for m, speed, med, p95 in r.get("sweep", []):
            print(
                f"  d_s {r['n']:3d}, {m:3d} probes: {speed:6.0f}x naive, median {100 * med:.2f}%, p95 {100 * p95:.2f}%"
            )
    rec.write()


def _record_row(rec: Record, r: dict, probes: int) -> None:
    """One length's figures: each engine's seconds against the naive loop, the exact pass's rate against the
    matmul's, its peak memory against the stated bound, the estimator's error."""
    n, naive = r["n"], f"naive loop, d_s {r['n']}"
    rec.figure(naive, r["naive"], "s")
    rec.figure(f"generic torch.func, d_s {n}", r["generic"], "s", baseline=naive)
    rec.figure(f"exact folded, d_s {n}", r["exact"], "s", baseline=naive)
    rec.figure(f"estimate {probes} probes, d_s {n}", r["est"], "s", baseline=naive)
    rec.figure(f"matmul, d_s {n}", r["mm"], "GFLOP/s")
    rec.figure(f"exact folded rate, d_s {n}", r["gflops"], "GFLOP/s", baseline=f"matmul, d_s {n}")
    rec.figure(f"exact pass peak memory bound, d_s {n}", r["bound"], "MB")
    rec.figure(f"exact pass peak memory, d_s {n}", r["mem"], "MB", baseline=f"exact pass peak memory bound, d_s {n}")
    if r["err"]:
        rec.figure(f"estimate {probes} probes error median, d_s {n}", r["err"]["median"], "fraction")
        rec.figure(f"estimate {probes} probes error p95, d_s {n}", r["err"]["p95"], "fraction")


if __name__ == "__main__":
    main()
