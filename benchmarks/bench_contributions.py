"""Every registered context-mixing measure's time per sentence, as a ratio to one forward pass (run on demand,
not a test, and not while other jobs share the machine):

    python benchmarks/bench_contributions.py [--lengths 16 32 64] [--repeats 3] [--threads 2] [--model NAME]

For each sentence length d_s, one sentence of real text (``concatenated_inputs`` of the Lee corpus) is traced
once; then, interleaved in one process (only medians and ratios measured in the same run mean anything on a
shared machine), it times:

- forward: one forward pass of that sentence with attention probabilities and hidden states returned;
- each measure of ``contributions.MEASURES`` through ``contributions.compute`` (whatever modules are
  registered when it runs), and exact HTA (``hta.api.hta``, the reference they are scored against).

It prints each one's median seconds per sentence and its ratio to the forward pass. A measure that fails is
reported on its line with the error's first line, and the others still run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from identifiability.contributions import MEASURES, compute  # noqa: E402
from identifiability.corpora import concatenated_inputs, load_corpus  # noqa: E402
from identifiability.errors import one_line  # noqa: E402
from identifiability.hta.api import hta  # noqa: E402
from identifiability.models import load_model  # noqa: E402
from identifiability.trace import tokenize, trace_batch  # noqa: E402


def _time(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    ap.add_argument("--model", default=None, help="default: the embedded all-MiniLM-L6-v2")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    lm = load_model(args.model)
    corpus = load_corpus("lee")
    print(
        f"{lm.name}: {lm.n_layers} layers x {lm.n_heads} heads, d={lm.d_model}; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, {os.cpu_count()} cores; median of {args.repeats} interleaved repeats\n"
    )
    names = sorted(MEASURES)
    header = f"{'d_s':>4} | {'forward':>9} | " + " | ".join(f"{n[:20]:>20}" for n in [*names, "hta (exact)"])
    print(header)
    print("-" * len(header))
    for n in args.lengths:
        n = min(n, lm.max_positions)
        text = concatenated_inputs(corpus, [n], lm.tokenizer, seed=n)[0]
        tr = trace_batch(lm, [text])[0]
        enc = {k: v.to(lm.device) for k, v in tokenize(lm, [text]).items()}

        def forward():
            with torch.no_grad():
                lm.model(**enc, output_attentions=True, output_hidden_states=True)

        jobs = {"forward": forward, **{m: (lambda m=m: compute(lm, tr, m)) for m in names}}
        jobs["hta (exact)"] = lambda: hta(lm, tr)
        failed: dict[str, str] = {}
        for k, fn in jobs.items():  # warm-up, and find what fails
            try:
                fn()
            except Exception as e:  # a measure's failure is reported, not fatal: the others still run
                failed[k] = one_line(e)
        times: dict[str, list[float]] = {k: [] for k in jobs if k not in failed}
        for _ in range(args.repeats):
            for k in times:
                times[k].append(_time(jobs[k]))
        med = {k: statistics.median(v) for k, v in times.items()}
        cells = [
            f"{'failed':>20}" if k in failed else f"{1e3 * med[k]:>8.1f}ms {med[k] / med['forward']:>8.1f}x"
            for k in [*names, "hta (exact)"]
        ]
        print(f"{tr.n_tokens:>4} | {1e3 * med['forward']:>7.1f}ms | " + " | ".join(cells))
        for k, msg in failed.items():
            print(f"     {k} failed: {msg}")
    print("\nEach cell: median seconds per sentence and the ratio to one forward pass of the same sentence.")


if __name__ == "__main__":
    main()
