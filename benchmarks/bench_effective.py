"""Effective attention for all layers and heads of a batch: batched vs a per-head Python loop.

Run on demand: ``python benchmarks/bench_effective.py [--repeats 5] [--lengths 32 128 512] [--batch 4]``.

For each sequence length d_s it times, interleaved in one process (the machine is shared and noisy, so
only medians and ratios measured in the same run mean anything):

- forward: one forward pass of the batch with attention probabilities returned (the model alone);
- batched: ``effective_attention`` for every sentence, layer and head (one padded SVD of the value
  matrices), float32 and float64;
- loop: the per-head reference, a Python loop over layers and heads with an SVD of T = V_h W_O^h
  (d_s x d) each, float32, on the default thread count and on one thread (one sentence: it is slow);
- svd threads: the batched SVD alone on 1 thread (what the code uses) vs the default thread count.

All times are per sentence. It prints the ratio loop / batched and batched / forward, and records every time
with its baseline (``benchmarks/results/bench_effective.json``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from records import Record  # noqa: E402

from identifiability.base.linalg import one_thread  # noqa: E402
from identifiability.corpus.corpora import concatenated_inputs, load_corpus  # noqa: E402
from identifiability.effective import projection as eff_attn  # noqa: E402
from identifiability.models.load import load_model  # noqa: E402
from identifiability.models.trace import out_proj_weights, tokenize, trace_batch  # noqa: E402

LABELS = {"b1": "batched B=1", "loop1": "loop 1 thread", "svd1": "batched SVD 1 thread", "svdN": "batched SVD"}


def _time(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--lengths", type=int, nargs="+", default=[32, 128, 512])
    ap.add_argument("--batch", type=int, default=4, help="sentences per batch (halved for d_s > 256)")
    ap.add_argument("--model", default=None, help="default: the embedded all-MiniLM-L6-v2")
    args = ap.parse_args()
    rec = Record(__file__, settings=vars(args))

    lm = load_model(args.model)
    corpus = load_corpus("lee")
    w_o = out_proj_weights(lm)
    row_space = eff_attn.out_proj_row_space(w_o)
    row_space64 = eff_attn.out_proj_row_space(w_o, torch.float64)
    print(
        f"{lm.name}: {lm.n_layers} layers x {lm.n_heads} heads, d={lm.d_model}, d_v={lm.d_v}; "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cores; "
        f"median of {args.repeats} interleaved repeats\n"
    )
    header = (
        f"{'d_s':>5} {'B':>3} | per sentence: {'forward':>8} {'batched':>8} {'B=1':>8} {'float64':>8} "
        f"{'loop':>8} {'loop 1thr':>9} | {'loop/batched':>12} {'batched/fwd':>11} | "
        f"batched SVD {'1 thr':>7} {'N thr':>7}"
    )
    print(header)
    print("-" * len(header))
    for n in args.lengths:
        n = min(n, lm.max_positions)
        batch = args.batch if n <= 256 else max(1, args.batch // 2)
        texts = concatenated_inputs(corpus, [n] * batch, lm.tokenizer, seed=n)
        traces = trace_batch(lm, texts)
        enc = {k: v.to(lm.device) for k, v in tokenize(lm, texts).items()}
        _, vals, _ = eff_attn.pad_traces(traces)

        def forward():
            with torch.no_grad():
                lm.model(**enc, output_attentions=True)

        def svd_default():
            torch.linalg.svd(vals, full_matrices=False)

        def svd_single():
            with one_thread():
                torch.linalg.svd(vals, full_matrices=False)

        def loop_single():
            with one_thread():
                eff_attn.effective_loop(traces[0], w_o, torch.float32)

        # (job, sentences it covers): the per-head loop runs on one sentence (it is slow), the rest on all B.
        jobs = {
            "forward": (forward, batch),
            "batched": (lambda: eff_attn.effective_attention(traces, w_o, torch.float32, row_space=row_space), batch),
            "b1": (lambda: eff_attn.effective_attention(traces[:1], w_o, torch.float32, row_space=row_space), 1),
            "float64": (lambda: eff_attn.effective_attention(traces, w_o, torch.float64, row_space=row_space64), batch),
            "loop": (lambda: eff_attn.effective_loop(traces[0], w_o, torch.float32), 1),
            "loop1": (loop_single, 1),
            "svd1": (svd_single, batch),
            "svdN": (svd_default, batch),
        }
        for fn, _ in jobs.values():  # warm-up
            fn()
        times: dict[str, list[float]] = {k: [] for k in jobs}
        for _ in range(args.repeats):
            for k, (fn, _) in jobs.items():
                times[k].append(_time(fn))
        per = {k: statistics.median(v) / jobs[k][1] for k, v in times.items()}  # seconds per sentence
        best_loop = min(per["loop"], per["loop1"])
        d_s = traces[0].n_tokens
        ms = {k: f"{1e3 * v:>6.1f}ms" for k, v in per.items()}
        print(
            f"{d_s:>5} {batch:>3} | {'':>13} {ms['forward']:>8} {ms['batched']:>8} {ms['b1']:>8} {ms['float64']:>8} "
            f"{ms['loop']:>8} {ms['loop1']:>9} | {best_loop / per['batched']:>11.1f}x "
            f"{per['batched'] / per['forward']:>10.2f}x | {'':>11} {ms['svd1']:>7} {ms['svdN']:>7}"
        )
        # each job against the one it replaces: batched against the model's forward pass, the rest against
        # batched, the default-thread SVD against the one-thread SVD the code uses
        baselines = {"forward": None, "batched": "forward", "svd1": None, "svdN": "svd1"}
        label = {k: f"{LABELS.get(k, k)}, {d_s} tokens" for k in jobs}
        for k in jobs:  # dict order puts each baseline before the jobs that name it
            base = baselines.get(k, "batched")
            rec.figure(label[k], per[k], "s", baseline=base and label[base])
        # The two computations agree (the loop decomposes T itself, the batched code V_h).
        ref = eff_attn.effective_loop(traces[0], w_o, torch.float64)
        got = eff_attn.effective_attention(traces[:1], w_o, torch.float32, row_space=row_space)[0]
        err = float((got.effective.double() - ref.effective).abs().max())
        assert err < 1e-4, f"batched and per-head results differ by {err:.2e} at d_s={d_s}"
    print("\nloop/batched uses the faster of the two loop variants; batched/fwd < 1 means computing A_eff for")
    print("every head costs less than the forward pass that produced A.")
    rec.write()


if __name__ == "__main__":
    main()
