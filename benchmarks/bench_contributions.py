"""Every registered context-mixing measure's time per sentence, as a ratio to one forward pass (run on demand,
not a test, and not while other jobs share the machine):

    python benchmarks/bench_contributions.py [--lengths 16 32 64] [--repeats 3] [--slow 5] [--threads 2] [--model NAME]

For each sentence length d_s, one sentence of real text (``concatenated_inputs`` of the Lee corpus) is traced
once; then, interleaved in one process (only medians and ratios measured in the same run mean anything on a
shared machine), it times:

- forward: one forward pass of that sentence with attention probabilities and hidden states returned;
- each measure of ``contributions.MEASURES`` through ``contributions.compute`` (whatever modules are
  registered when it runs), and exact HTA (``hta.api.hta``, the reference they are scored against);
- the one-layer references of chapter 10 (``contributions.one_layer``: exact HTA of one layer, the one-layer
  intervention), each also recorded against exact HTA's time (figures named ``... against exact HTA``).

Each job runs once to warm up; a job whose warm-up took longer than ``--slow`` seconds (exact HTA, Integrated
Gradients at 64 tokens) keeps that one time, marked ``*``, as at that length warm-up effects are
negligible. It prints a row per job, a column per length: median seconds per sentence and the ratio to the
forward pass, and records them (``benchmarks/results/bench_contributions.json``). Measures that only read the
traced attention (raw, rollout) cost next to nothing beyond the trace, which is itself one forward pass. A
measure that fails is reported with the error's first line, and the others still run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from records import Record  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from identifiability.base.errors import one_line  # noqa: E402
from identifiability.contributions import MEASURES, compute  # noqa: E402
from identifiability.contributions.one_layer import hta_layer, intervention_layer  # noqa: E402
from identifiability.corpus.corpora import concatenated_inputs, load_corpus  # noqa: E402
from identifiability.hta.api import hta  # noqa: E402
from identifiability.models.load import load_model  # noqa: E402
from identifiability.models.trace import tokenize, trace_batch  # noqa: E402

ONE_LAYER = {"hta_layer (exact, one layer)": hta_layer, "intervention_layer (one layer)": intervention_layer}


def _time(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--slow", type=float, default=5.0, help="seconds: a job whose warm-up took longer is timed once")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    ap.add_argument("--model", default=None, help="default: the embedded all-MiniLM-L6-v2")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rec = Record(__file__, settings=vars(args))

    lm = load_model(args.model)
    corpus = load_corpus("lee")
    print(
        f"{lm.name}: {lm.n_layers} layers x {lm.n_heads} heads, d={lm.d_model}; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, {os.cpu_count()} cores; median of {args.repeats} interleaved repeats "
        f"(once, marked *, where the warm-up took over {args.slow:g} s)\n"
    )
    names = [*sorted(MEASURES), "hta (exact)", *ONE_LAYER]
    cells: dict[str, list[str]] = {k: [] for k in ["forward", *names]}
    tokens: list[int] = []
    failures: list[str] = []
    for n in args.lengths:
        n = min(n, lm.max_positions)
        text = concatenated_inputs(corpus, [n], lm.tokenizer, seed=n)[0]
        tr = trace_batch(lm, [text])[0]
        tokens.append(tr.n_tokens)
        enc = {k: v.to(lm.device) for k, v in tokenize(lm, [text]).items()}

        def forward():
            with torch.no_grad():
                lm.model(**enc, output_attentions=True, output_hidden_states=True)

        jobs = {"forward": forward, **{m: (lambda m=m: compute(lm, tr, m)) for m in sorted(MEASURES)}}
        jobs["hta (exact)"] = lambda: hta(lm, tr)
        jobs |= {k: (lambda fn=fn: fn(lm, tr)) for k, fn in ONE_LAYER.items()}
        warm: dict[str, float] = {}
        for k, fn in tqdm(jobs.items(), desc=f"warm-up, {tr.n_tokens} tokens", leave=False):
            try:  # a measure's failure is reported, not fatal: the others still run
                warm[k] = _time(fn)
            except Exception as e:
                failures.append(f"{k} at {tr.n_tokens} tokens failed: {one_line(e)}")
        fast = [k for k in warm if warm[k] <= args.slow]
        times: dict[str, list[float]] = {k: [] for k in fast}
        for _ in range(args.repeats):  # interleaved: load drifts hit every job alike
            for k in fast:
                times[k].append(_time(jobs[k]))
        med = {k: statistics.median(v) for k, v in times.items()} | {k: warm[k] for k in warm if k not in fast}
        rec.details.setdefault("timed_once", []).extend(f"{k}, {tr.n_tokens} tokens" for k in warm if k not in fast)
        base = f"forward, {tr.n_tokens} tokens"
        for k in (k for k in cells if k in med):  # forward first: the baseline of its length
            rec.figure(f"{k}, {tr.n_tokens} tokens", med[k], "s", baseline=None if k == "forward" else base)
        for k in (k for k in ONE_LAYER if k in med and "hta (exact)" in med):  # what chapter 10 adds to HTA
            rec.figure(
                f"{k} against exact HTA, {tr.n_tokens} tokens", med[k], "s", f"hta (exact), {tr.n_tokens} tokens"
            )
        for k in cells:
            if k not in med:
                cells[k].append("failed")
            else:
                mark = "" if k in fast else "*"
                cells[k].append(f"{med[k]:.3g} s{mark} ({med[k] / med['forward']:.3g}x)")
    width = max(map(len, cells)) + 1
    print(f"{'d_s':<{width}}" + "".join(f"{t:>24}" for t in tokens))
    for k, row in cells.items():
        print(f"{k:<{width}}" + "".join(f"{c:>24}" for c in row))
    for line in failures:
        print(line)
    print("\nEach cell: seconds per sentence and, in brackets, the ratio to one forward pass of the same sentence.")
    rec.details["failures"] = failures
    rec.write()


if __name__ == "__main__":
    main()
