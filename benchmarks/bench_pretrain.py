"""Benchmark one masked-LM training step of a family member (run on demand, not a test):

    python benchmarks/bench_pretrain.py [--member mlm-w128-dv32-seed0] [--steps 4] [--threads 2]

Times forward, backward and the AdamW update of one batch (32 blocks of 256 tokens, 15% masked, the head at
the masked positions only) with the attention kernels transformers offers, interleaved in the same run: the
baseline is the eager attention the chapters read attention weights from, with BERT's attention dropout; the
others are PyTorch's scaled-dot-product attention with that dropout (which keeps it unfused on the CPU), then
without it (fused; what training runs), in fp32 and under bf16 autocast. Every rate is also compared with a plain fp32
matmul measured in the same run (the machine is shared: read the ratios). Reports tokens per second and the
minutes 6 million tokens would take, and records seconds per step and tokens per second against the eager
baseline (``benchmarks/results/bench_pretrain.json``).

Target (issue 33): `make family` within 120 minutes on 2 quiet cores, i.e. five members of 6 million tokens
each at about 5,000 tokens per second or more.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from records import Record

from identifiability.pretrain.family import TOKENS, by_name
from identifiability.pretrain.mlm import build_model, generator, mask_blocks, masked_logits, special_ids
from identifiability.pretrain.text import default_tokenizer


def _matmul_gflops(n: int = 1024) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    t = time.perf_counter()
    for _ in range(5):
        a @ b
    return 5 * 2 * n**3 / (time.perf_counter() - t) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--member", default="mlm-w128-dv32-seed0")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--no-record", action="store_true", help="print only (bench_allocator runs it: the record is its)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    rec = Record(__file__, settings=vars(a))
    tok = default_tokenizer()
    member = by_name(a.member)
    blocks = torch.randint(1000, len(tok), (a.batch, 256))
    blocks[:, 0], blocks[:, -1] = tok.cls_token_id, tok.sep_token_id
    inputs, masked = mask_blocks(blocks, generator(0, 0), special_ids(tok), tok.mask_token_id, len(tok))
    attention = torch.ones_like(blocks)
    # (kernel, bf16, dropout on the attention probabilities): BERT's 0.1 keeps PyTorch's CPU attention on its
    # unfused kernel; training runs the fused one without it (pretrain.mlm.ATTENTION_DROPOUT)
    variants = {
        "eager fp32 (baseline)": ("eager", False, 0.1),
        "sdpa fp32 attn-drop 0.1": ("sdpa", False, 0.1),
        "sdpa fp32 (training)": ("sdpa", False, 0.0),
        "sdpa bf16": ("sdpa", True, 0.0),
    }
    models = {}
    for name, (impl, _, dropout) in variants.items():
        m = build_model(member, tok)
        m.config._attn_implementation = impl
        for module in m.modules():
            if type(module).__name__ == "BertSelfAttention":
                module.dropout.p = dropout
        models[name] = (m, torch.optim.AdamW(m.parameters(), lr=1e-3))
    times: dict[str, list[float]] = {n: [] for n in variants}
    gflops = []
    for step in range(a.steps + 1):  # the first round warms up
        gflops.append(_matmul_gflops())
        for name, (_, bf16, _) in variants.items():
            m, opt = models[name]
            m.train()
            t = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                logits = masked_logits(m, inputs, attention, masked)
            loss = F.cross_entropy(logits.float(), blocks[masked])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if step:
                times[name].append(time.perf_counter() - t)
    base = statistics.median(times["eager fp32 (baseline)"])
    tokens = a.batch * 256
    rate = statistics.median(gflops)
    print(f"{member.name}: batch {a.batch} x 256 tokens, {a.threads} threads; matmul {rate:.0f} GFLOP/s")
    rec.figure("matmul fp32 1024", rate, "GFLOP/s")
    first = next(iter(variants))
    for name in variants:
        s = statistics.median(times[name])
        rate = tokens / s
        rec.figure(f"step, {name}", s, "s", baseline=None if name == first else f"step, {first}")
        rec.figure(f"rate, {name}", rate, "tokens/s", baseline=None if name == first else f"rate, {first}")
        print(
            f"  {name:24s} {s:6.2f} s/step  {rate:7.0f} tokens/s  {base / s:4.2f}x the baseline  "
            f"6M tokens in {TOKENS / rate / 60:5.1f} min"
        )
    if not a.no_record:
        rec.write()


if __name__ == "__main__":
    main()
