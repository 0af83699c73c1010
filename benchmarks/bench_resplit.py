"""Go/no-go of issue 55 (item 1): the book's model re-split at d_v = 16 and 128 and healed for a fixed wall-clock
budget each, globally and layer by layer (run on demand, not a test):

    python benchmarks/bench_resplit.py [--widths 16,128] [--minutes 5] [--threads 2] [--blocks 24]

For each width and mode, :func:`identifiability.pretrain.heal.heal` runs with the issue's settings (blocks of
128 tokens of the pre-training text, batches of 16, AdamW at 1e-4 after 50 warm-up steps; the schedule's total
is set far beyond the budget, so the rate stays at its peak) until ``--minutes`` of wall time have passed (the
fidelity passes not counted), and
the fidelity curve (every depth's mean cosine with the original's hidden states on ``--blocks`` held-out blocks,
the Spearman of 500 held-out sentence pairs) is read from its checkpoint against the tokens seen and the
seconds of training (the fidelity passes not counted). Also the untrained fidelity at each width with the
attention scale of the new width (what the re-split keeps) and with Q rescaled to the original's logit scale.
Records ``benchmarks/results/bench_resplit.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path

import torch
from records import Record

from identifiability.models.load import load_model
from identifiability.models.resplit import resplit
from identifiability.models.training import optimizer, optimizer_step
from identifiability.pretrain import heal as healing
from identifiability.pretrain import text
from identifiability.pretrain.fidelity import PAIRS, Reference, fidelity, heldout_sentences, sentence_pairs
from identifiability.pretrain.heal import HealSettings, Original, heal, step_loss
from identifiability.pretrain.mlm import batch_indices


class Budget(Exception):
    """The run's wall-clock budget is spent."""


def _rescaled_q(member, original_width: int, width: int):
    """``member`` with W_Q and b_Q times sqrt(d_v' / d_v): its logits then keep the original's 1/sqrt(d_v) scale."""
    factor = math.sqrt(width / original_width)
    with torch.no_grad():
        for layer in member.encoder.layer:
            layer.attention.self.query.weight.mul_(factor)
            layer.attention.self.query.bias.mul_(factor)
    return member


def _step_times(original: Original, train: torch.Tensor, widths, modes, reps: int) -> dict[str, list[float]]:
    """Seconds of one step (loss, backward, AdamW) per width and mode, the modes interleaved step by step on the
    same batches, so that a shared machine's changing load falls on both alike."""
    out: dict[str, list[float]] = {}
    for width in widths:
        members = {m: resplit(original.model, original.adapter, width) for m in modes}
        opts = {m: optimizer(members[m], 1e-4, 0.01) for m in modes}
        for rep in range(reps):
            ids = train[batch_indices(rep, len(train), 16, 0)]
            for mode in modes:
                t = time.perf_counter()
                loss = step_loss(members[mode], original.model, original.adapter, ids, mode)
                optimizer_step(members[mode], opts[mode], loss, 1e-4, 1.0)
                out.setdefault(f"d_v={width} {mode}", []).append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--widths", default="16,128")
    ap.add_argument("--modes", default="global,layerwise")
    ap.add_argument("--minutes", type=float, default=5.0, help="wall-clock budget of each run")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--blocks", type=int, default=24, help="held-out blocks of the cosine")
    ap.add_argument("--step-times", type=int, default=0, help="interleaved steps per mode timed alone (0: none)")
    ap.add_argument("--no-runs", action="store_true", help="skip the healing runs")
    ap.add_argument("--no-untrained", action="store_true", help="skip the untrained fidelity at both scales")
    ap.add_argument("--checkpoint-tokens", type=int, default=40960)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rec = Record(__file__, settings=vars(args))
    lm = load_model()
    original = Original(lm.model, lm.tokenizer, lm.adapter, lm.name, lm.provenance["content_key"])
    train = text.token_blocks(lm.tokenizer, 128, "train")
    held = text.token_blocks(lm.tokenizer, 128, "heldout")[: args.blocks]
    reference = Reference.of(lm.model, lm.tokenizer, held, sentence_pairs(heldout_sentences(), PAIRS))
    widths = [int(w) for w in args.widths.split(",")]
    measure = healing.fidelity
    details: dict = {"untrained": {}, "runs": {}}
    for width in [] if args.no_untrained else widths:
        kept = fidelity(resplit(lm.model, lm.adapter, width), lm.tokenizer, reference)
        scaled = fidelity(_rescaled_q(resplit(lm.model, lm.adapter, width), 32, width), lm.tokenizer, reference)
        details["untrained"][width] = {"scale 1/sqrt(d_v')": kept.as_dict(), "Q rescaled": scaled.as_dict()}
        print(
            f"d_v={width} untrained: kept scale last {kept.last:.3f} worst {kept.worst:.3f} rho {kept.spearman:.3f}; "
            f"Q rescaled last {scaled.last:.3f} worst {scaled.worst:.3f} rho {scaled.spearman:.3f}",
            flush=True,
        )
    for width in [] if args.no_runs else widths:
        for mode in args.modes.split(","):
            s = HealSettings(width=width, tokens=100_000_000, mode=mode, checkpoint_tokens=args.checkpoint_tokens)
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "m"
                start, evaluating = time.perf_counter(), [0.0]

                def timed(*a, **k):
                    t = time.perf_counter()
                    try:
                        return measure(*a, **k)
                    finally:
                        evaluating[0] += time.perf_counter() - t

                def budget(step: int, total: int) -> None:  # after a checkpoint: its fidelity point is the last
                    if step % s.every(128) == 0 and time.perf_counter() - start - evaluating[0] > 60 * args.minutes:
                        raise Budget

                healing.fidelity = timed  # the budget counts the steps and checkpoints, not the fidelity passes

                try:
                    heal(original, s, train, out, reference, progress=False, on_step=budget)
                except Budget:
                    pass
                meta = json.loads((out / "checkpoint" / "state.json").read_text())
            points = meta["fidelity"]
            details["runs"][f"{width}-{mode}"] = points
            for p in points:
                print(
                    f"d_v={width} {mode}: step {p['step']} tokens {p['tokens_seen']} train {p['seconds']:.0f}s "
                    f"last {p['last']:.4f} worst {p['worst']:.4f} rho {p['spearman']:.4f}",
                    flush=True,
                )
            last = points[-1]
            rate = f"d_v={width} {mode}: tokens per train second"
            base = (
                None
                if mode == "global" or "global" not in args.modes
                else f"d_v={width} global: tokens per train second"
            )
            rec.figure(rate, last["tokens_seen"] / last["seconds"], "tok/s", baseline=base)
            rec.figure(f"d_v={width} {mode}: last-layer cosine at the end", last["last"], "cosine")
            rec.figure(f"d_v={width} {mode}: worst-layer cosine at the end", last["worst"], "cosine")
            rec.figure(f"d_v={width} {mode}: Spearman at the end", last["spearman"], "rho")
    if args.step_times:
        details["step_seconds"] = _step_times(original, train, widths, args.modes.split(","), args.step_times)
        for key, times in details["step_seconds"].items():
            rec.figure(f"{key}: median step", statistics.median(times), "s")
    rec.details = details
    rec.write()


if __name__ == "__main__":
    main()
