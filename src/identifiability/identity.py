"""Token identity across layers (paper section 4, appendix B) and the angle-versus-magnitude ablations.

The question: given the hidden embedding e_i^l of token i at layer l, can we tell which input token it
came from? Token i is *identified* at layer l if the nearest neighbour of g^l(e_i^l) among a set of
candidate input embeddings is x_i (the embedding layer's output, position included). g^l is

* ``naive``: the identity map (nearest neighbour of e_i^l itself),
* ``linear``: an affine map R^d -> R^d,
* ``mlp``: a two-layer perceptron,

trained to minimise the L2 distance (``l2``) or the cosine distance (``cos``) between g^l(e_i^l) and x_i,
and evaluated with L2 or cosine nearest-neighbour lookup. Candidates are the input embeddings of the
same sentence (the paper's setting) or, stricter, of every token in the evaluation split.

Shapes: L = number of layers, so there are L+1 hidden states per token (``hidden[0]`` is the input to the
first layer); N tokens in a corpus sample, d model width, P probes trained side by side.

Everything that costs time is cached with :func:`identifiability.results.cached_tensors`: the hidden states
(one forward pass per model + corpus + sample) and the trained probe weights, so the two chapters that use
them (token identity; angle vs magnitude) share the work.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm import tqdm

from .loaded_model import LoadedModel
from .paths import safe_key
from .results import cached_tensors
from .trace import forward, tokenize

MAPPINGS = ("naive", "linear", "mlp")
LOSSES = ("l2", "cos")
LOOKUPS = ("l2", "cos")
CANDIDATES = ("sentence", "all")
VARIANTS = ("raw", "unit", "norm")
CACHE_VERSION = 1


# --------------------------------------------------------------------------------------------------
# Hidden states, extracted once per model + corpus sample
# --------------------------------------------------------------------------------------------------


@dataclass
class HiddenStates:
    """Hidden states of every token of a sample of sentences, flattened over sentences.

    Attributes:
        hidden: (L+1, N, d) e_i^l; ``hidden[0]`` is the input to the first layer.
        x: (N, d) input embeddings x_i (the output of the adapter's x module, position information
            included; after the projection to d where a family has one, so that it lives in the space of e_i^l).
        sentence: (N,) index of the sentence each token belongs to (0..n_sentences-1).
        position: (N,) position of the token in its sentence (special tokens counted).
        token_id: (N,) vocabulary id.
        special: (N,) True for special tokens ([CLS], [SEP], <s>, ...), from ``tokenizer.all_special_ids``.
    """

    hidden: torch.Tensor
    x: torch.Tensor
    sentence: torch.Tensor
    position: torch.Tensor
    token_id: torch.Tensor
    special: torch.Tensor

    @property
    def n_layers(self) -> int:
        """L (the number of transformer layers; there are L+1 hidden states)."""
        return self.hidden.shape[0] - 1

    @property
    def n_tokens(self) -> int:
        return self.hidden.shape[1]

    @property
    def n_sentences(self) -> int:
        return int(self.sentence.max()) + 1 if self.n_tokens else 0

    @property
    def d(self) -> int:
        return self.hidden.shape[2]

    def to_tensors(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, k) for k in ("hidden", "x", "sentence", "position", "token_id", "special")}

    @classmethod
    def from_tensors(cls, t: dict[str, torch.Tensor]) -> "HiddenStates":
        return cls(**{k: t[k] for k in ("hidden", "x", "sentence", "position", "token_id", "special")})


@torch.no_grad()
def extract_hidden(lm: LoadedModel, texts: Sequence[str], max_tokens: int | None = None, batch_size: int = 32,
                   progress: bool = True) -> HiddenStates:
    """One forward pass per batch (sorted by length so padding stays small), keeping only hidden states.

    Cheaper than :func:`identifiability.trace.trace_sentences` for this purpose: attention maps and value
    vectors are not copied out.
    """
    texts = list(texts)
    if not texts:
        raise ValueError("no sentences: the corpus sample is empty; lower min_tokens or raise n_sentences")
    special_ids = torch.tensor(sorted(set(lm.tokenizer.all_special_ids)), dtype=torch.long)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    per_sentence: list[tuple | None] = [None] * len(texts)
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    for idx in tqdm(batches, desc="hidden states", unit="batch", disable=not progress or len(batches) < 2):
        f = forward(lm, tokenize(lm, [texts[i] for i in idx], max_tokens))
        enc = f.enc
        hidden = torch.stack(f.out.hidden_states, 1).float().cpu()  # (B, L+1, S, d)
        x = f.x.float().cpu()
        lengths = enc["attention_mask"].sum(1).tolist()
        for b, i in enumerate(idx):
            n = int(lengths[b])
            ids = enc["input_ids"][b, :n].cpu()
            h = hidden[b, :, :n].clone()
            h[0] = x[b, :n]  # e^0 = x exactly (equal up to rounding where the model says so itself)
            per_sentence[i] = (h, ids)
    hidden = torch.cat([p[0] for p in per_sentence], 1)  # type: ignore[index]
    ids = torch.cat([p[1] for p in per_sentence])  # type: ignore[index]
    sentence = torch.cat([torch.full((p[1].numel(),), s, dtype=torch.long) for s, p in enumerate(per_sentence)])  # type: ignore[union-attr]
    position = torch.cat([torch.arange(p[1].numel()) for p in per_sentence])  # type: ignore[union-attr]
    return HiddenStates(hidden=hidden.contiguous(), x=hidden[0].clone(), sentence=sentence, position=position,
                        token_id=ids, special=torch.isin(ids, special_ids))


def hidden_states(lm: LoadedModel, texts: Sequence[str], corpus_name: str, max_tokens: int | None = None,
                  cache: bool = True, progress: bool = True) -> HiddenStates:
    """:func:`extract_hidden`, cached on disk (safetensors) by model, weights hash, corpus and the exact texts."""
    texts = list(texts)
    if not cache:
        return extract_hidden(lm, texts, max_tokens, progress=progress)
    params = {"model": lm.name, "sha256": lm.provenance.get("sha256"), "revision": lm.provenance.get("revision"),
              "corpus": corpus_name,
              "texts_sha256": hashlib.sha256("\n".join(texts).encode()).hexdigest(), "n_texts": len(texts),
              "max_tokens": max_tokens, "version": CACHE_VERSION}
    t = cached_tensors(f"hidden/{lm.key}/{safe_key(corpus_name)}", params,
                       lambda: extract_hidden(lm, texts, max_tokens, progress=progress).to_tensors())
    return HiddenStates.from_tensors(t)


def cache_params(hs: HiddenStates) -> dict:
    """A cheap fingerprint of a HiddenStates object, to key caches of things computed from it."""
    h = hs.hidden
    probe = h[:, :: max(1, h.shape[1] // 97)].double()
    return {"shape": list(h.shape), "sum": round(float(probe.sum()), 6), "abs": round(float(probe.abs().sum()), 6),
            "ids": int(hs.token_id.sum()), "n_sent": hs.n_sentences}


# --------------------------------------------------------------------------------------------------
# Splits by sentence, and the three input variants
# --------------------------------------------------------------------------------------------------


def split_by_sentence(n_sentences: int, seed: int = 0, fractions: tuple[float, float, float] = (0.7, 0.15, 0.15)
                      ) -> dict[str, torch.Tensor]:
    """Disjoint sentence indices for "train", "val" and "test" (never split a sentence's tokens)."""
    if n_sentences < 3:
        raise ValueError(f"need at least 3 sentences to split into train/val/test, got {n_sentences}")
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(n_sentences, generator=g)
    n_val = max(1, round(fractions[1] * n_sentences))
    n_test = max(1, round(fractions[2] * n_sentences))
    n_train = n_sentences - n_val - n_test
    if n_train < 1:
        raise ValueError(f"{n_sentences} sentences leave none for training; use more sentences")
    return {"train": perm[:n_train].sort().values, "val": perm[n_train:n_train + n_val].sort().values,
            "test": perm[n_train + n_val:].sort().values}


@dataclass
class SplitData:
    """The tokens of one split, as a probe sees them.

    Attributes:
        inputs: (L+1, n, d_in) probe inputs per layer (e_i^l, or e_i^l/|e_i^l|, or |e_i^l| with d_in = 1).
        targets: (n, d) what the probe is trained towards, and the lookup candidates (x_i or x_i/|x_i|).
        sentence, position, key: (n,) sentence index, position, and a key equal for two tokens exactly when
            their input embeddings are equal (same vocabulary id at the same position).
        token_id: (n,) vocabulary ids.
        raw: (L+1, n, d) the untransformed e_i^l (for the naive map and for norms/angles).
    """

    inputs: torch.Tensor
    targets: torch.Tensor
    sentence: torch.Tensor
    position: torch.Tensor
    key: torch.Tensor
    raw: torch.Tensor
    token_id: torch.Tensor
    variant: str = "raw"

    @property
    def n(self) -> int:
        return self.targets.shape[0]


def _unit(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def token_mask(hs: HiddenStates, sentences: torch.Tensor, include_special: bool = False) -> torch.Tensor:
    """(N,) bool: tokens of ``sentences``, special tokens dropped unless ``include_special``."""
    m = torch.isin(hs.sentence, sentences)
    return m if include_special else m & ~hs.special


def make_split(hs: HiddenStates, sentences: torch.Tensor, variant: str = "raw", include_special: bool = False
               ) -> SplitData:
    """Gather one split's tokens and transform them for ``variant``:

    * ``raw``: inputs e_i^l, targets x_i;
    * ``unit``: inputs e_i^l/|e_i^l|, targets x_i/|x_i| (direction only: magnitude removed everywhere);
    * ``norm``: inputs |e_i^l| (a single number), targets x_i (magnitude only).
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    m = token_mask(hs, sentences, include_special)
    if not bool(m.any()):
        raise ValueError("a split holds no tokens; use more sentences or include_special=True")
    raw = hs.hidden[:, m]
    x = hs.x[m]
    if variant == "raw":
        inputs, targets = raw, x
    elif variant == "unit":
        inputs, targets = _unit(raw), _unit(x)
    else:
        inputs, targets = raw.norm(dim=-1, keepdim=True), x
    key = hs.token_id[m] * (int(hs.position.max()) + 1) + hs.position[m]
    return SplitData(inputs=inputs, targets=targets, sentence=hs.sentence[m], position=hs.position[m], key=key,
                     raw=raw, token_id=hs.token_id[m], variant=variant)


# --------------------------------------------------------------------------------------------------
# Probes: P independent maps trained side by side in one batched matmul
# --------------------------------------------------------------------------------------------------


@dataclass
class ProbeConfig:
    """How probes are trained: minibatch AdamW, early stopping on the validation loss, fixed seed."""

    kind: str = "linear"  # naive | linear | mlp
    hidden: int = 512  # MLP width
    epochs: int = 15  # at most
    batch_size: int = 512
    lr: float = 1e-2  # see DEFAULT_LR for the value used per mapping
    weight_decay: float = 1e-4
    patience: int = 3  # epochs without a validation improvement before a probe stops
    seed: int = 0
    cosine_decay: bool = True  # lr follows half a cosine from lr to 0 over ``epochs`` (settles the last steps)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class StackedProbe(nn.Module):
    """P independent probes R^{d_in} -> R^{d_out}, evaluated together.

    Inputs are standardised per feature with training statistics (``mean``, ``std``; this keeps one
    learning rate right for every layer's scale and leaves the class of affine maps unchanged).
    ``naive`` has no parameters and returns its input.
    """

    def __init__(self, kind: str, n_probes: int, d_in: int, d_out: int, hidden: int = 512,
                 seeds: Sequence[int] | None = None):
        super().__init__()
        if kind not in MAPPINGS:
            raise ValueError(f"mapping must be one of {MAPPINGS}, got {kind!r}")
        if kind == "naive" and d_in != d_out:
            raise ValueError(f"the naive map needs d_in == d_out, got {d_in} and {d_out}")
        self.kind, self.n_probes, self.d_in, self.d_out, self.hidden = kind, n_probes, d_in, d_out, hidden
        self.register_buffer("mean", torch.zeros(n_probes, 1, d_in))
        self.register_buffer("std", torch.ones(n_probes, 1, d_in))
        # each probe draws its initial weights from its own generator, so a probe starts the same
        # whichever other probes it is trained beside
        gens = [torch.Generator().manual_seed(int(s)) for s in (seeds if seeds is not None else range(n_probes))]
        if len(gens) != n_probes:
            raise ValueError("one seed per probe")

        def uniform(*shape, fan_in):  # nn.Linear's default init, from our own generators
            bound = 1 / math.sqrt(fan_in)
            w = torch.stack([torch.rand(*shape, generator=g) for g in gens])
            return nn.Parameter((w * 2 - 1) * bound)

        if kind == "linear":
            self.w = uniform(d_in, d_out, fan_in=d_in)
            self.b = uniform(1, d_out, fan_in=d_in)
        elif kind == "mlp":
            self.w1 = uniform(d_in, hidden, fan_in=d_in)
            self.b1 = uniform(1, hidden, fan_in=d_in)
            self.w2 = uniform(hidden, d_out, fan_in=hidden)
            self.b2 = uniform(1, d_out, fan_in=hidden)

    def forward_one(self, p: int, inputs: torch.Tensor) -> torch.Tensor:
        """Probe ``p`` alone: (B, d_in) -> (B, d_out)."""
        if self.kind == "naive":
            return inputs
        z = (inputs - self.mean[p]) / self.std[p]
        if self.kind == "linear":
            return torch.addmm(self.b[p], z, self.w[p])
        return torch.addmm(self.b2[p], torch.relu(torch.addmm(self.b1[p], z, self.w1[p])), self.w2[p])

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """inputs: (P, B, d_in) -> (P, B, d_out)."""
        if self.kind == "naive":
            return inputs
        return self.forward_standardised((inputs - self.mean) / self.std)

    def forward_standardised(self, z: torch.Tensor) -> torch.Tensor:
        """The map on inputs already standardised with ``mean``/``std``: (P, B, d_in) -> (P, B, d_out)."""
        if self.kind == "naive":
            return z
        if self.kind == "linear":
            return torch.baddbmm(self.b, z, self.w)
        return torch.baddbmm(self.b2, torch.relu(torch.baddbmm(self.b1, z, self.w1)), self.w2)


def probe_losses(pred: torch.Tensor, target: torch.Tensor, is_cos: torch.Tensor) -> torch.Tensor:
    """Per-probe mean loss, shape (P,): squared L2 distance or cosine distance 1 - cos.

    pred: (P, B, d); target: (B, d) or (P, B, d); is_cos: (P,) bool.
    """
    # each loss is computed only for the probes that use it (the cosine is the dearer one)
    out = pred.new_zeros(pred.shape[0])
    for use_cos in (False, True):
        idx = (is_cos == use_cos).nonzero().flatten()
        if idx.numel() == 0:
            continue
        pr = pred.index_select(0, idx)
        tg = target if target.dim() == 2 else target.index_select(0, idx)
        if use_cos:
            dots = (pr * tg).sum(-1)
            val = (1 - dots / (pr.norm(dim=-1) * tg.norm(dim=-1)).clamp_min(1e-8)).mean(-1)
        else:
            val = (pr - tg).pow(2).sum(-1).mean(-1)
        out = out.index_copy(0, idx, val)
    return out


@dataclass
class TrainedProbes:
    """Probes and what they were trained for: probe p maps layer ``layers[p]`` with loss ``losses[p]``."""

    probe: StackedProbe
    layers: list[int]
    losses: list[str]
    variant: str = "raw"
    history: dict = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.probe.kind


def _init_seeds(seed: int, layers: Sequence[int], losses: Sequence[str]) -> list[int]:
    """A probe's initial weights depend on (seed, layer, loss) only."""
    return [seed * 10_007 + 2 * int(l) + (lo == "cos") for l, lo in zip(layers, losses)]


def _select(inputs: torch.Tensor, layers: torch.Tensor, idx: torch.Tensor | None = None) -> torch.Tensor:
    """(L+1, n, d_in) -> (P, b, d_in) for probe layers ``layers`` and token rows ``idx``."""
    x = inputs if idx is None else inputs[:, idx]
    return x[layers]


@torch.no_grad()
def apply_probes(probe: StackedProbe, inputs: torch.Tensor, layers: Sequence[int], chunk: int = 4096) -> torch.Tensor:
    """Run probe p on layer ``layers[p]`` of ``inputs`` (L+1, n, d_in); returns (P, n, d_out)."""
    lay = torch.as_tensor(list(layers))
    n = inputs.shape[1]
    return torch.cat([probe(_select(inputs, lay, torch.arange(s, min(n, s + chunk)))) for s in range(0, n, chunk)], 1)


def train_probes(train: SplitData, val: SplitData, layers: Sequence[int], losses: Sequence[str],
                 config: ProbeConfig = ProbeConfig(), targets: torch.Tensor | None = None,
                 progress: bool = True) -> TrainedProbes:
    """Train one probe per (layer, loss) pair, all at once: a pure-torch minibatch AdamW loop.

    Probe p maps ``train.inputs[layers[p]]`` to the targets with loss ``losses[p]``. The probes share
    the minibatch order but nothing else; the summed loss gives each probe exactly its own gradient and
    AdamW is elementwise, so this is the same as training them one after another, only faster.
    Early stopping is per probe: it stops improving its copy after ``patience`` epochs without a better
    validation loss, and keeps the weights of its best epoch.

    Args:
        train, val: splits from :func:`make_split` (same variant).
        layers: (P,) layer of each probe; losses: (P,) "l2" or "cos".
        targets: (n_train, d) to train towards instead of ``train.targets`` (e.g. shuffled, for a control).
    """
    if len(layers) != len(losses):
        raise ValueError("one loss per probe layer")
    bad = set(losses) - set(LOSSES)
    if bad:
        raise ValueError(f"unknown loss(es) {bad}; use {LOSSES}")
    P = len(layers)
    d_in, d_out = train.inputs.shape[-1], train.targets.shape[-1]
    probe = StackedProbe(config.kind, P, d_in, d_out, config.hidden, _init_seeds(config.seed, layers, losses))
    lay = torch.as_tensor(list(layers))
    is_cos = torch.tensor([l == "cos" for l in losses])
    history: dict = {"train_loss": [], "val_loss": [], "best_epoch": [0] * P, "stop_epoch": [0] * P, "epochs": 0}
    if config.kind == "naive":
        return TrainedProbes(probe, list(layers), list(losses), train.variant, history)
    tgt = train.targets if targets is None else targets
    # standardise each used layer once (not per step); the probe keeps the statistics for later use
    used = sorted(set(int(l) for l in layers))
    where = torch.tensor([used.index(int(l)) for l in layers])
    z_all = train.inputs[used]  # (U, n, d_in)
    mu = z_all.mean(1, keepdim=True)
    sd = z_all.std(1, keepdim=True).clamp_min(1e-6)
    z_all = (z_all - mu) / sd
    with torch.no_grad():
        probe.mean.copy_(mu[where])
        probe.std.copy_(sd[where])
    opt = torch.optim.AdamW(probe.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    g = torch.Generator().manual_seed(config.seed)
    best = torch.full((P,), float("inf"))
    stale = torch.zeros(P, dtype=torch.long)
    active = torch.ones(P, dtype=torch.bool)
    best_state = {k: v.detach().clone() for k, v in probe.named_parameters()}
    n = train.n
    steps_per_epoch = math.ceil(n / config.batch_size)
    total_steps = max(1, config.epochs * steps_per_epoch)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, (lambda step: 0.5 * (1 + math.cos(math.pi * step / total_steps))) if config.cosine_decay else (lambda step: 1.0))
    bar = tqdm(range(config.epochs), desc=f"{config.kind} probes ({P})", unit="epoch", disable=not progress)
    for epoch in bar:
        perm = torch.randperm(n, generator=g)
        total = torch.zeros(P)
        for s in range(0, n, config.batch_size):
            idx = perm[s:s + config.batch_size]
            loss = probe_losses(probe.forward_standardised(_select(z_all, where, idx)), tgt[idx], is_cos)
            opt.zero_grad(set_to_none=True)
            loss.sum().backward()
            opt.step()
            sched.step()
            total += loss.detach() * idx.numel()
        with torch.no_grad():
            vl = probe_losses(apply_probes(probe, val.inputs, layers), val.targets, is_cos)
        history["train_loss"].append((total / n).tolist())
        history["val_loss"].append(vl.tolist())
        history["epochs"] = epoch + 1
        better = active & torch.isfinite(vl) & (~torch.isfinite(best) | (vl < best - 1e-7 * best.abs()))
        for p in better.nonzero().flatten().tolist():
            for k, v in probe.named_parameters():
                best_state[k][p] = v.detach()[p]
            history["best_epoch"][p] = epoch + 1
        best = torch.where(better, vl, best)
        stale = torch.where(better, torch.zeros_like(stale), stale + 1)
        for p in active.nonzero().flatten().tolist():
            history["stop_epoch"][p] = epoch + 1  # the last epoch this probe trained in
        active &= stale < config.patience
        bar.set_postfix(active=int(active.sum()), val=f"{float(best.mean()):.4f}")
        if not bool(active.any()):
            break
    with torch.no_grad():
        for k, v in probe.named_parameters():
            v.copy_(best_state[k])
    return TrainedProbes(probe, list(layers), list(losses), train.variant, history)


def _probe_tensors(tp: TrainedProbes) -> dict[str, torch.Tensor]:
    h = tp.history
    t = {f"state.{k}": v.detach() for k, v in tp.probe.state_dict().items()}
    t["best_epoch"] = torch.tensor(h["best_epoch"])
    t["stop_epoch"] = torch.tensor(h["stop_epoch"])
    if h["train_loss"]:
        t["train_loss"] = torch.tensor(h["train_loss"])
        t["val_loss"] = torch.tensor(h["val_loss"])
    return t


def fit_probes(train: SplitData, val: SplitData, config: ProbeConfig, losses: Sequence[str] = LOSSES,
               layers: Sequence[int] | None = None, cache_key: dict | None = None, progress: bool = True
               ) -> TrainedProbes:
    """Probes for every layer x loss, with weights cached on disk when ``cache_key`` (a dict naming the
    data: model, corpus, sample, split seed, ...) is given."""
    layers = list(range(train.inputs.shape[0])) if layers is None else list(layers)
    if config.kind == "naive":
        losses = losses[:1]  # nothing is trained: one (loss-free) probe per layer
    lay = [l for l in layers for _ in losses]
    los = [lo for _ in layers for lo in losses]
    if config.kind == "naive":
        return train_probes(train, val, lay, los, config, progress=progress)
    if cache_key is None:
        return train_probes(train, val, lay, los, config, progress=progress)
    params = {**cache_key, "variant": train.variant, "layers": lay, "losses": los, "config": config.as_dict(),
              "n_train": train.n, "n_val": val.n, "version": CACHE_VERSION}
    made: list[TrainedProbes] = []

    def compute():
        made.append(train_probes(train, val, lay, los, config, progress=progress))
        return _probe_tensors(made[0])

    t = cached_tensors(f"probes/{cache_key.get('model', 'model')}", params, compute)
    if made:
        return made[0]
    probe = StackedProbe(config.kind, len(lay), train.inputs.shape[-1], train.targets.shape[-1], config.hidden,
                         _init_seeds(config.seed, lay, los))
    probe.load_state_dict({k[len("state."):]: v for k, v in t.items() if k.startswith("state.")})
    hist = {"best_epoch": t["best_epoch"].tolist(), "stop_epoch": t["stop_epoch"].tolist(), "epochs": int(t["train_loss"].shape[0]) if "train_loss" in t else 0,
            "train_loss": t["train_loss"].tolist() if "train_loss" in t else [],
            "val_loss": t["val_loss"].tolist() if "val_loss" in t else [], "cached": True}
    return TrainedProbes(probe, lay, los, train.variant, hist)


# --------------------------------------------------------------------------------------------------
# Nearest-neighbour lookup
# --------------------------------------------------------------------------------------------------


def _scores(q: torch.Tensor, c: torch.Tensor, lookup: str) -> torch.Tensor:
    """Larger is nearer. q: (..., n, d), c: (..., m, d) -> (..., n, m).

    L2: -|q-c|^2 + |q|^2 = 2 q.c - |c|^2 (|q|^2 is the same for every candidate);
    cosine: q.c / |c| (dividing by |q| does not change the ranking).
    """
    dots = q @ c.transpose(-1, -2)
    if lookup == "l2":
        return 2 * dots - c.pow(2).sum(-1).unsqueeze(-2)
    if lookup == "cos":
        return dots / c.norm(dim=-1).clamp_min(1e-12).unsqueeze(-2)
    raise ValueError(f"lookup must be one of {LOOKUPS}, got {lookup!r}")


class SentenceLayout:
    """Tokens grouped by sentence into a padded (n_sent, S) grid, for same-sentence lookups."""

    def __init__(self, sentence: torch.Tensor, position: torch.Tensor):
        uniq, slot = torch.unique(sentence, return_inverse=True)
        self.n_sent = uniq.numel()
        order = torch.argsort(slot * (int(position.max()) + 1) + position)  # by sentence, then position
        counts = torch.bincount(slot, minlength=self.n_sent)
        starts = torch.cumsum(counts, 0) - counts
        col = torch.empty_like(slot)
        col[order] = torch.arange(slot.numel()) - starts[slot[order]]
        self.slot, self.col, self.counts = slot, col, counts
        self.S = int(counts.max())
        self.valid = torch.arange(self.S)[None, :] < counts[:, None]  # (n_sent, S)
        self.pos = torch.full((self.n_sent, self.S), -1, dtype=torch.long)
        self.pos[slot, col] = position
        self.row = torch.full((self.n_sent, self.S), -1, dtype=torch.long)
        self.row[slot, col] = torch.arange(slot.numel())

    def pad(self, v: torch.Tensor) -> torch.Tensor:
        """(n, d) -> (n_sent, S, d), zeros where there is no token."""
        out = v.new_zeros(self.n_sent, self.S, v.shape[-1])
        out[self.slot, self.col] = v
        return out


@torch.no_grad()
def nearest_in_sentence(queries: torch.Tensor, candidates: torch.Tensor, layout: SentenceLayout, lookup: str
                        ) -> torch.Tensor:
    """Row of the nearest same-sentence candidate for every query.

    queries: (n, d) g(e_i); candidates: (n, d) the x_j of the same n tokens (row j is token j);
    returns (n,) the row j of the winner (its position is ``position[j]``).
    """
    s = _scores(layout.pad(queries), layout.pad(candidates), lookup)  # (n_sent, S, S)
    s = s.masked_fill(~layout.valid[:, None, :], float("-inf"))
    best = s.argmax(-1)  # (n_sent, S) column of the winner
    return layout.row.gather(1, best)[layout.slot, layout.col]


@torch.no_grad()
def nearest_in_set(queries: torch.Tensor, candidates: torch.Tensor, keys: torch.Tensor, lookup: str,
                   chunk: int = 2048) -> torch.Tensor:
    """Row of the nearest candidate among *all* tokens of the set (duplicates of a key are one candidate,
    since equal keys mean equal input embeddings; the first row holding it is returned).
    queries, candidates: (n, d); keys: (n,); returns (n,) rows."""
    uniq, inv = torch.unique(keys, return_inverse=True)
    first = torch.full((uniq.numel(),), keys.numel(), dtype=torch.long).scatter_reduce(
        0, inv, torch.arange(keys.numel()), reduce="amin")
    c = candidates[first]
    out = torch.empty(queries.shape[0], dtype=torch.long)
    for s in range(0, queries.shape[0], chunk):
        out[s:s + chunk] = first[_scores(queries[s:s + chunk], c, lookup).argmax(-1)]
    return out


def chance_in_sentence(layout: SentenceLayout) -> float:
    """Expected identification rate of a uniformly random same-sentence guess: mean over tokens of 1/d_s."""
    return float((1.0 / layout.counts.double())[layout.slot].mean())


def chance_in_set(keys: torch.Tensor) -> float:
    """Expected rate of a uniformly random pick among all tokens of the set (a pick is right when it has
    the same input embedding): mean over tokens of (tokens sharing its key) / n."""
    _, inv, counts = torch.unique(keys, return_inverse=True, return_counts=True)
    return float((counts[inv].double() / keys.numel()).mean())


def offset_chance(layout: SentenceLayout, position: torch.Tensor, offsets: Sequence[int],
                  among_others: bool = False) -> dict[int, float]:
    """For each offset k: the chance that a uniformly random same-sentence guess is x_{i+k}
    (mean over tokens of [token i+k is a candidate] / d_s). With ``among_others`` the guess is uniform over
    the *other* candidates (d_s - 1 of them): what a miss would give if misses were spread evenly."""
    M = int(position.max()) + max([abs(k) for k in offsets] + [0]) + 1
    code = layout.slot * M + position
    n_valid = layout.counts[layout.slot].double()
    if among_others:
        n_valid = (n_valid - 1).clamp_min(1)
    out = {}
    for k in offsets:
        present = torch.isin(code + k, code) & (position + k >= 0)
        out[k] = float((present.double() / n_valid).mean())
    return out


# --------------------------------------------------------------------------------------------------
# Evaluation: rates per layer, neighbours, generalisation across layers, rescaling
# --------------------------------------------------------------------------------------------------

NEIGHBOUR_OFFSETS = (-3, -2, -1, 0, 1, 2, 3)


@torch.no_grad()
def evaluate(tp: TrainedProbes, data: SplitData, lookups: Sequence[str] = LOOKUPS,
             candidate_sets: Sequence[str] = ("sentence",), input_layers: Sequence[int] | None = None,
             scale: torch.Tensor | None = None, offsets: Sequence[int] = NEIGHBOUR_OFFSETS,
             ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Identification rates of every probe on ``data``, and where the same-sentence lookups land.

    Args:
        tp: trained probes; probe p is applied to layer ``input_layers[p]`` (default: the layer it was
            trained on; pass another list to test generalisation across layers).
        data: the split to evaluate (same variant as the probes).
        scale: optional (n,) factors multiplying every input embedding at test time (rescaling ablation).

    Returns:
        rates: one row per probe x lookup x candidate set: mapping, loss, layer (trained on), test_layer,
            lookup, candidates, rate, chance, n.
        neighbours: one row per probe x lookup x offset k: share of tokens whose nearest same-sentence
            candidate is x_{i+k} (k=0 is the rate), and the chance of that.
    """
    layers = tp.layers if input_layers is None else list(input_layers)
    inputs = data.inputs
    if scale is not None:
        # scale e_i^l; for the norm-only variant the input *is* the norm, which scales the same way
        inputs = inputs * scale[None, :, None]
    out = apply_probes(tp.probe, inputs, layers)  # (P, n, d)
    layout = SentenceLayout(data.sentence, data.position)
    ch_sent = chance_in_sentence(layout)
    ch_all = chance_in_set(data.key)
    ch_off = offset_chance(layout, data.position, offsets)
    rows, nrows = [], []
    for p in range(len(layers)):
        base = {"mapping": tp.kind, "loss": tp.losses[p] if tp.kind != "naive" else "none",
                "layer": tp.layers[p], "test_layer": layers[p], "n": data.n}
        for lookup in lookups:
            if "sentence" in candidate_sets:
                pred = nearest_in_sentence(out[p], data.targets, layout, lookup)
                off = data.position[pred] - data.position
                rows.append({**base, "lookup": lookup, "candidates": "sentence",
                             "rate": float((off == 0).double().mean()), "chance": ch_sent})
                for k in offsets:
                    nrows.append({**base, "lookup": lookup, "offset": k, "share": float((off == k).double().mean()),
                                  "chance": ch_off[k]})
            if "all" in candidate_sets:
                pred = nearest_in_set(out[p], data.targets, data.key, lookup)
                rows.append({**base, "lookup": lookup, "candidates": "all",
                             "rate": float((data.key[pred] == data.key).double().mean()), "chance": ch_all})
    return pd.DataFrame(rows), pd.DataFrame(nrows)


@torch.no_grad()
def predict(tp: TrainedProbes, data: SplitData, layer: int, loss: str = "cos", lookup: str = "cos",
            candidates: str = "sentence", input_layer: int | None = None) -> torch.Tensor:
    """(n,) row of ``data`` whose input embedding is nearest to g^l(e_i) for the probe trained on ``layer``
    with ``loss`` (applied to ``input_layer``, default the same layer). Token i is identified when
    ``data.key[row] == data.key[i]``; ``data.token_id[row]`` is the token it was taken for."""
    p = next(i for i, (l, lo) in enumerate(zip(tp.layers, tp.losses)) if l == layer and (tp.kind == "naive" or lo == loss))
    q = tp.probe.forward_one(p, data.inputs[layer if input_layer is None else input_layer])
    if candidates == "sentence":
        return nearest_in_sentence(q, data.targets, SentenceLayout(data.sentence, data.position), lookup)
    return nearest_in_set(q, data.targets, data.key, lookup)


def generalisation(tp: TrainedProbes, data: SplitData, lookups: Sequence[str] = LOOKUPS) -> pd.DataFrame:
    """Train-layer x test-layer identification rates (same-sentence candidates): each probe trained on
    layer l applied to the embeddings of every layer m. Columns: mapping, loss, layer, test_layer, lookup,
    rate, chance."""
    frames = []
    for m in range(data.inputs.shape[0]):
        r, _ = evaluate(tp, data, lookups, ("sentence",), input_layers=[m] * len(tp.layers), offsets=())
        frames.append(r)
    return pd.concat(frames, ignore_index=True)


def random_scales(n: int, max_factor: float, seed: int = 0) -> torch.Tensor:
    """(n,) factors drawn log-uniformly from [1/max_factor, max_factor]."""
    g = torch.Generator().manual_seed(seed)
    return torch.exp((torch.rand(n, generator=g) * 2 - 1) * math.log(max_factor))


# --------------------------------------------------------------------------------------------------
# The chapters' workflow in a few calls
# --------------------------------------------------------------------------------------------------

# Chosen on the embedded model (400 lee sentences, 12 epochs, layers 0 and 6; batch 128-1024 and lr 1e-3 to
# 3e-2 compared by validation loss and test rate): larger rates made the MLP unstable, smaller ones too slow.
DEFAULT_LR = {"naive": 0.0, "linear": 1e-2, "mlp": 3e-3}


def probe_config(kind: str, epochs: int = 15, batch_size: int = 512, mlp_hidden: int = 512, patience: int = 3,
                 seed: int = 0, lr: float | None = None) -> ProbeConfig:
    """A ProbeConfig with the learning rate that suits ``kind`` unless ``lr`` is given."""
    return ProbeConfig(kind=kind, hidden=mlp_hidden, epochs=epochs, batch_size=batch_size,
                       lr=DEFAULT_LR[kind] if lr is None else lr, patience=patience, seed=seed)


def data_key(lm: LoadedModel, corpus_name: str, hs: HiddenStates, seed: int, include_special: bool) -> dict:
    """What trained probes depend on besides their own configuration (used to key the probe cache)."""
    return {"model": lm.key, "sha256": lm.provenance.get("sha256"), "revision": lm.provenance.get("revision"),
            "corpus": corpus_name,
            "hidden": cache_params(hs), "split_seed": seed, "include_special": include_special}


def make_splits(hs: HiddenStates, seed: int = 0, variant: str = "raw", include_special: bool = False
                ) -> dict[str, SplitData]:
    """train / val / test :class:`SplitData` of ``hs``, split by sentence with ``seed``."""
    idx = split_by_sentence(hs.n_sentences, seed)
    return {k: make_split(hs, v, variant, include_special) for k, v in idx.items()}


def train_all(splits: dict[str, SplitData], kinds: Sequence[str] = MAPPINGS, epochs: int = 15,
              batch_size: int = 512, mlp_hidden: int = 512, patience: int = 3, seed: int = 0,
              losses: Sequence[str] = LOSSES, cache_key: dict | None = None, progress: bool = True
              ) -> dict[str, TrainedProbes]:
    """Probes of every kind for every layer x loss (cached when ``cache_key`` is given)."""
    return {k: fit_probes(splits["train"], splits["val"], probe_config(k, epochs, batch_size, mlp_hidden, patience, seed),
                          losses, cache_key=cache_key, progress=progress) for k in kinds}


def evaluate_all(probes: dict[str, TrainedProbes], splits: dict[str, SplitData],
                 test_candidates: Sequence[str] = CANDIDATES, with_train: bool = True
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rates on the test split (both candidate sets) and on the training split (same-sentence only,
    the paper's Figure 7), plus the test split's neighbour table. Both frames get a ``split`` column."""
    rates, nbs = [], []
    for tp in probes.values():
        r, nb = evaluate(tp, splits["test"], LOOKUPS, test_candidates)
        rates.append(r.assign(split="test"))
        nbs.append(nb.assign(split="test"))
        if with_train:
            r, _ = evaluate(tp, splits["train"], LOOKUPS, ("sentence",), offsets=())
            rates.append(r.assign(split="train"))
    return pd.concat(rates, ignore_index=True), pd.concat(nbs, ignore_index=True)


def training_summary(probes: dict[str, TrainedProbes]) -> pd.DataFrame:
    """One row per trained probe: mapping, loss, layer, epochs run, best epoch, best validation loss."""
    rows = []
    for tp in probes.values():
        h = tp.history
        if tp.kind == "naive":
            continue
        for p, (layer, loss) in enumerate(zip(tp.layers, tp.losses)):
            vl = [e[p] for e in h["val_loss"]]
            rows.append({"mapping": tp.kind, "loss": loss, "layer": layer, "epochs run": h["stop_epoch"][p],
                         "best epoch": h["best_epoch"][p],
                         "best val loss": min(vl) if vl else float("nan"),
                         "final train loss": h["train_loss"][-1][p] if h["train_loss"] else float("nan")})
    return pd.DataFrame(rows)


def nested(df: pd.DataFrame, keys: Sequence[str], value: str, order: str = "layer", digits: int = 4) -> dict:
    """Frame -> nested dict keys[0] -> keys[1] -> ... -> list of ``value`` sorted by ``order`` (for JSON)."""
    out: dict = {}
    for combo, g in df.groupby(list(keys), sort=True):
        combo = combo if isinstance(combo, tuple) else (combo,)
        node = out
        for k in combo[:-1]:
            node = node.setdefault(str(k), {})
        node[str(combo[-1])] = [round(float(v), digits) for v in g.sort_values(order)[value]]
    return out


def rescaled_rates(probes: dict[str, TrainedProbes], data: SplitData, max_factor: float, seed: int = 0
                   ) -> pd.DataFrame:
    """Rates when every test embedding e_i^l is multiplied by its own random factor in
    [1/max_factor, max_factor] (log-uniform) before the (unchanged) probe is applied."""
    scale = random_scales(data.n, max_factor, seed)
    frames = [evaluate(tp, data, LOOKUPS, ("sentence",), scale=scale, offsets=())[0] for tp in probes.values()]
    return pd.concat(frames, ignore_index=True)


def ablation_study(hs: HiddenStates, splits: dict[str, SplitData], probes: dict[str, TrainedProbes],
                   rescale_max: float = 4.0, seed: int = 0, include_special: bool = False, epochs: int = 15,
                   batch_size: int = 512, mlp_hidden: int = 512, patience: int = 3, cache_key: dict | None = None,
                   progress: bool = True) -> pd.DataFrame:
    """Separate angle from magnitude. Test-split, same-sentence rates per layer for

    * ``original``: the raw probes (``probes`` must hold "naive" and "linear", trained on ``splits``);
    * ``angle only``: linear maps trained and evaluated on unit vectors e/|e| -> x/|x| (candidates x/|x|);
    * ``magnitude only``: an MLP that sees only the number |e_i^l| and must output x_i;
    * ``rescaled``: the raw probes applied to e_i^l times a random factor in [1/r, r] per token.

    Returns columns ablation, loss ("none" where nothing is trained), lookup, layer, rate, chance.
    """
    def tidy(df: pd.DataFrame, label: str) -> pd.DataFrame:
        df = df[df.candidates == "sentence"] if "candidates" in df else df
        return df.assign(ablation=label)[["ablation", "mapping", "loss", "lookup", "layer", "rate", "chance"]]

    frames = []
    for kind, name in (("linear", "linear map"), ("naive", "identity map")):
        frames.append(tidy(evaluate(probes[kind], splits["test"], offsets=())[0], f"original: {name}"))
    unit = make_splits(hs, seed, "unit", include_special)
    pu = train_all(unit, ("linear",), epochs, batch_size, mlp_hidden, patience, seed, cache_key=cache_key,
                   progress=progress)
    frames.append(tidy(evaluate(pu["linear"], unit["test"], offsets=())[0], "angle only (unit vectors): linear map"))
    norm = make_splits(hs, seed, "norm", include_special)
    pn = train_all(norm, ("mlp",), epochs, batch_size, mlp_hidden, patience, seed, cache_key=cache_key,
                   progress=progress)
    frames.append(tidy(evaluate(pn["mlp"], norm["test"], offsets=())[0], "magnitude only (norms |e|): MLP"))
    r = f"{rescale_max:g}"
    resc = rescaled_rates({k: probes[k] for k in ("linear", "naive")}, splits["test"], rescale_max, seed)
    for kind, name in (("linear", "linear map"), ("naive", "identity map")):
        frames.append(tidy(resc[resc.mapping == kind], f"rescaled ×[1/{r}, {r}] at test: {name}"))
    return pd.concat(frames, ignore_index=True)


# --------------------------------------------------------------------------------------------------
# Norms and angles
# --------------------------------------------------------------------------------------------------

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def _quantile_row(v: torch.Tensor) -> dict:
    q = torch.quantile(v.double(), torch.tensor(QUANTILES, dtype=torch.double)).tolist()
    return {"q05": q[0], "q25": q[1], "median": q[2], "q75": q[3], "q95": q[4], "mean": float(v.double().mean())}


@torch.no_grad()
def norm_summary(data: SplitData) -> pd.DataFrame:
    """Per layer: quantiles of |e_i^l| (layer 0 is |x_i|). One row per layer."""
    norms = data.raw.norm(dim=-1)  # (L+1, n)
    return pd.DataFrame([{"layer": l, **_quantile_row(norms[l])} for l in range(norms.shape[0])])


@torch.no_grad()
def norm_histograms(data: SplitData, bins: int = 40) -> pd.DataFrame:
    """Per layer: a histogram of |e_i^l| relative to that layer's median (so one x range fits all layers)."""
    norms = data.raw.norm(dim=-1)
    rel = norms / norms.median(dim=1, keepdim=True).values
    hi = float(torch.quantile(rel.flatten(), 0.995))
    edges = torch.linspace(0, hi, bins + 1)
    rows = []
    for l in range(norms.shape[0]):
        counts = torch.histc(rel[l].clamp(max=hi), bins=bins, min=0, max=hi)
        for b in range(bins):
            rows.append({"layer": l, "lo": float(edges[b]), "hi": float(edges[b + 1]),
                         "share": float(counts[b] / rel.shape[1])})
    return pd.DataFrame(rows)


@torch.no_grad()
def angle_summary(data: SplitData) -> pd.DataFrame:
    """Per layer: the angle (degrees) between e_i^l and its own x_i, and, as a reference, the mean angle
    between e_i^l and the input embeddings x_j (j != i) of the other tokens of the same sentence.

    Columns: layer, median/quantiles of the own angle, ``other_mean`` the reference, and
    ``closest_share`` the share of tokens whose own x_i is the angularly closest (= naive cosine rate).
    """
    layout = SentenceLayout(data.sentence, data.position)
    xu = layout.pad(_unit(data.targets))
    rows = []
    for l in range(data.raw.shape[0]):
        eu = layout.pad(_unit(data.raw[l]))
        cos = (eu @ xu.transpose(1, 2)).clamp(-1, 1)  # (n_sent, S, S): e_i vs x_j
        ang = torch.rad2deg(torch.acos(cos))
        own = torch.diagonal(ang, dim1=1, dim2=2)[layout.slot, layout.col]
        pair_valid = layout.valid[:, :, None] & layout.valid[:, None, :] & ~torch.eye(layout.S, dtype=torch.bool)
        other = ang[pair_valid]
        cmask = cos.masked_fill(~layout.valid[:, None, :], -2)
        closest = (cmask.argmax(-1) == torch.arange(layout.S))[layout.slot, layout.col]
        rows.append({"layer": l, **_quantile_row(own), "other_mean": float(other.double().mean()) if other.numel() else float("nan"),
                     "closest_share": float(closest.double().mean())})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------
# Charts (Altair; layer on the x axis, dropdowns for mapping / loss / lookup)
# --------------------------------------------------------------------------------------------------


def _dropdown(name: str, options: list, value=None) -> alt.Parameter:
    return alt.param(name=name, value=options[0] if value is None else value,
                     bind=alt.binding_select(options=options, name=f"{name} "))


def _probe_choice(df: pd.DataFrame, naive: bool, default: str | None = None):
    """Dropdowns for mapping, training loss and lookup, and the filter they set; returns (df, params, filter).

    With ``naive`` the identity map is a mapping choice too; it has no training loss, so its rows are
    repeated under every loss and it stays visible whichever loss is picked.
    """
    if naive:
        plain = df[df.mapping == "naive"]
        df = pd.concat([df[df.mapping != "naive"]] + [plain.assign(loss=l) for l in LOSSES], ignore_index=True)
    mapping = _dropdown("mapping", [m for m in MAPPINGS if m in set(df.mapping) and (naive or m != "naive")], default)
    loss = _dropdown("loss", list(LOSSES), "cos")
    lookup = _dropdown("lookup", list(LOOKUPS), "cos")
    sel = (alt.datum.mapping == mapping) & (alt.datum.loss == loss) & (alt.datum.lookup == lookup)
    return df, [mapping, loss, lookup], sel


def rate_chart(rates: pd.DataFrame, title: str, paper_value: float | None = None,
               paper_label: str = "paper") -> alt.LayerChart:
    """Identification rate per layer. ``rates`` has columns mapping, loss, lookup, candidates, split,
    layer, rate, chance. Dropdowns choose the trained mapping, its loss, the lookup and the candidate
    set; the naive baseline (same lookup and candidates) and chance are drawn with it."""
    df = rates[["mapping", "loss", "lookup", "candidates", "split", "layer", "rate", "chance"]].copy()
    df["rate"] = df["rate"].round(4)
    df["chance"] = df["chance"].round(4)
    trained = sorted(set(df.mapping) - {"naive"}, key=MAPPINGS.index)
    mapping = _dropdown("mapping", trained)
    loss = _dropdown("loss", [l for l in LOSSES if l in set(df.loss)], "cos")
    lookup = _dropdown("lookup", [l for l in LOOKUPS if l in set(df.lookup)], "cos")
    cands = _dropdown("candidates", [c for c in CANDIDATES if c in set(df.candidates)])
    base = alt.Chart(df).encode(x=alt.X("layer:O", title="layer l (0 = input embeddings)"))
    y = alt.Y("rate:Q", title="identified tokens (share)", scale=alt.Scale(domain=[0, 1]))
    sel = (alt.datum.mapping == mapping) & (alt.datum.loss == loss) & (alt.datum.lookup == lookup) & (
        alt.datum.candidates == cands)
    probe = base.transform_filter(sel).mark_line(point=True).encode(
        y=y, strokeDash=alt.StrokeDash("split:N", title="split", sort=["test", "train"]),
        color=alt.value("#1f77b4"),
        tooltip=["mapping", "loss", "lookup", "candidates", "split", "layer", alt.Tooltip("rate:Q", format=".3f")])
    nsel = (alt.datum.mapping == "naive") & (alt.datum.lookup == lookup) & (alt.datum.candidates == cands) & (
        alt.datum.split == "test")
    naive = base.transform_filter(nsel).mark_line(point=True, color="gray").encode(
        y=y, tooltip=[alt.Tooltip("rate:Q", format=".3f", title="naive (identity map)"), "layer"])
    chance = base.transform_filter(nsel).mark_line(color="crimson", strokeDash=[2, 2]).encode(
        y="chance:Q", tooltip=[alt.Tooltip("chance:Q", format=".3f")])
    layers = [probe, naive, chance]
    if paper_value is not None:
        last = int(df.layer.max())
        ref = pd.DataFrame({"layer": [last], "rate": [paper_value], "label": [f"{paper_label}: {paper_value:.0%}"]})
        pt = alt.Chart(ref).mark_point(shape="diamond", size=120, color="darkorange", filled=True).encode(
            x="layer:O", y="rate:Q", tooltip=["label"])
        tx = alt.Chart(ref).mark_text(dx=-10, dy=14, align="right", color="darkorange").encode(
            x="layer:O", y="rate:Q", text="label")
        layers += [pt, tx]
    subtitle = "blue: the chosen probe (solid: test, dashed: train); grey: identity map; red dotted: chance"
    return alt.layer(*layers).add_params(mapping, loss, lookup, cands).properties(
        title=alt.TitleParams(title, subtitle=subtitle), width=460, height=280)


def overlay_chart(rates: pd.DataFrame, title: str) -> alt.Chart:
    """Test-split rates per layer with one line per ``series`` (e.g. corpus); dropdowns as in rate_chart,
    the naive map included as a mapping choice."""
    df = rates[["series", "mapping", "loss", "lookup", "layer", "rate", "chance"]].copy()
    df["rate"] = df["rate"].round(4)
    df, params, sel = _probe_choice(df, naive=True, default="linear")
    base = alt.Chart(df).transform_filter(sel).encode(x=alt.X("layer:O", title="layer l"))
    lines = base.mark_line(point=True).encode(
        y=alt.Y("rate:Q", title="identified tokens (test)", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("series:N", title=None),
        tooltip=["series", "mapping", "loss", "lookup", "layer", alt.Tooltip("rate:Q", format=".3f")])
    chance = base.mark_line(strokeDash=[2, 2]).encode(y="chance:Q", color=alt.Color("series:N"),
                                                      opacity=alt.value(0.5))
    return alt.layer(lines, chance).add_params(*params).properties(title=title, width=460, height=280)


def generalisation_chart(gen: pd.DataFrame, title: str) -> alt.Chart:
    """Heatmap: rows the layer a probe was trained on, columns the layer it is tested on."""
    df = gen[["mapping", "loss", "lookup", "layer", "test_layer", "rate"]].copy()
    df["rate"] = df["rate"].round(3)
    df, params, sel = _probe_choice(df, naive=False)
    base = alt.Chart(df).transform_filter(sel).encode(
        x=alt.X("test_layer:O", title="tested on layer"), y=alt.Y("layer:O", title="trained on layer"))
    rect = base.mark_rect().encode(color=alt.Color("rate:Q", scale=alt.Scale(domain=[0, 1], scheme="viridis"),
                                                   title="identified"),
                                   tooltip=["layer", "test_layer", alt.Tooltip("rate:Q", format=".3f")])
    text = base.mark_text(fontSize=10).encode(
        text=alt.Text("rate:Q", format=".2f"),
        color=alt.condition(alt.datum.rate > 0.6, alt.value("black"), alt.value("white")))
    return alt.layer(rect, text).add_params(*params).properties(title=title, width=320, height=260)


def neighbour_chart(nb: pd.DataFrame, title: str) -> alt.Chart:
    """Share of tokens whose nearest same-sentence input embedding is x_{i+k}, per layer, one line per k."""
    df = nb[nb.offset != 0][["mapping", "loss", "lookup", "layer", "offset", "share", "chance"]].copy()
    df["share"] = df["share"].round(4)
    df, params, sel = _probe_choice(df, naive=True, default="linear")
    return alt.Chart(df).transform_filter(sel).mark_line(point=True).encode(
        x=alt.X("layer:O", title="layer l"),
        y=alt.Y("share:Q", title="nearest candidate is x_{i+k} (share of tokens)"),
        color=alt.Color("offset:O", title="k", scale=alt.Scale(
            domain=[-3, -2, -1, 1, 2, 3], range=["#fcae91", "#fb6a4a", "#cb181d", "#08519c", "#3182bd", "#9ecae1"])),
        tooltip=["offset", "layer", alt.Tooltip("share:Q", format=".3f"), alt.Tooltip("chance:Q", format=".3f")],
    ).add_params(*params).properties(title=title, width=460, height=260)


def combo_chart(rates: pd.DataFrame, title: str) -> alt.Chart:
    """Test rate per layer, one line per (training loss, lookup) pair; a dropdown picks the mapping.

    The naive map has no training loss: its two lookups appear as "— / l2" and "— / cos"."""
    df = rates[["mapping", "loss", "lookup", "layer", "rate", "chance"]].copy()
    df["rate"] = df["rate"].round(4)
    df["pair"] = np.where(df.mapping == "naive", "—", df.loss) + " loss / " + df.lookup + " lookup"
    mapping = _dropdown("mapping", [m for m in MAPPINGS if m in set(df.mapping)], "linear")
    base = alt.Chart(df).transform_filter(alt.datum.mapping == mapping).encode(x=alt.X("layer:O", title="layer l"))
    lines = base.mark_line(point=True).encode(
        y=alt.Y("rate:Q", title="identified tokens (test)", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("pair:N", title="training loss / lookup"),
        strokeDash=alt.StrokeDash("lookup:N", title="lookup"),
        tooltip=["mapping", "loss", "lookup", "layer", alt.Tooltip("rate:Q", format=".3f")])
    chance = base.mark_line(color="crimson", strokeDash=[2, 2]).encode(y="chance:Q")
    return alt.layer(lines, chance).add_params(mapping).properties(title=title, width=460, height=280)


def ablation_chart(df: pd.DataFrame, title: str) -> alt.Chart:
    """Test rate per layer, one line per ablation; dropdowns pick the training loss and the lookup.

    ``df`` columns: ablation, loss ("none" for maps without training), lookup, layer, rate, chance."""
    df = df[["ablation", "loss", "lookup", "layer", "rate", "chance"]].copy()
    df["rate"] = df["rate"].round(4)
    fixed = df[df.loss == "none"]
    df = pd.concat([df[df.loss != "none"]] + [fixed.assign(loss=l) for l in LOSSES], ignore_index=True)
    loss = _dropdown("loss", list(LOSSES), "cos")
    lookup = _dropdown("lookup", list(LOOKUPS), "cos")
    base = alt.Chart(df).transform_filter((alt.datum.loss == loss) & (alt.datum.lookup == lookup)).encode(
        x=alt.X("layer:O", title="layer l"))
    lines = base.mark_line(point=True).encode(
        y=alt.Y("rate:Q", title="identified tokens (test)", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("ablation:N", title=None, legend=alt.Legend(orient="bottom", columns=2, labelLimit=320)),
        tooltip=["ablation", "loss", "lookup", "layer", alt.Tooltip("rate:Q", format=".3f")])
    chance = base.transform_filter(alt.datum.ablation == df.ablation.iloc[0]).mark_line(
        color="crimson", strokeDash=[2, 2]).encode(y="chance:Q")
    return alt.layer(lines, chance).add_params(loss, lookup).properties(title=title, width=460, height=280)


def norm_chart(summary: pd.DataFrame, hist: pd.DataFrame, title: str) -> alt.HConcatChart:
    """Left: |e_i^l| per layer (whiskers 5-95 %, box 25-75 %, tick median). Right: the distribution of
    |e_i^l| / median at one layer, chosen with a slider."""
    s = summary.round(3)
    base = alt.Chart(s).encode(x=alt.X("layer:O", title="layer l (0 = input embeddings)"))
    whisk = base.mark_rule().encode(y=alt.Y("q05:Q", title="|e_i^l|"), y2="q95:Q")
    box = base.mark_bar(size=18, opacity=0.6).encode(y="q25:Q", y2="q75:Q",
                                                     tooltip=["layer", "q05", "q25", "median", "q75", "q95"])
    med = base.mark_tick(color="black", size=18, thickness=2).encode(y="median:Q")
    left = alt.layer(whisk, box, med).properties(title=title, width=300, height=260)
    h = hist.round(4)
    layer = alt.param(name="norm_layer", value=int(h.layer.max()),
                      bind=alt.binding_range(min=0, max=int(h.layer.max()), step=1, name="layer "))
    right = alt.Chart(h).transform_filter(alt.datum.layer == layer).mark_bar().encode(
        x=alt.X("lo:Q", bin="binned", title="|e_i^l| / median of the layer (last bin: all above)"), x2="hi:Q",
        y=alt.Y("share:Q", title="share of tokens"),
        tooltip=[alt.Tooltip("lo:Q", format=".2f"), alt.Tooltip("share:Q", format=".3f")],
    ).add_params(layer).properties(title="Distribution at one layer", width=300, height=260)
    return alt.hconcat(left, right)


def angle_chart(angles: pd.DataFrame, title: str) -> alt.Chart:
    """Angle between e_i^l and its own x_i (median, 25-75 % band) against the mean angle to the other
    tokens' x_j of the same sentence, per layer."""
    a = angles.round(3)
    base = alt.Chart(a).encode(x=alt.X("layer:O", title="layer l"))
    band = base.mark_area(opacity=0.25, color="#1f77b4").encode(y=alt.Y("q25:Q", title="angle (degrees)",
                                                                         scale=alt.Scale(domain=[0, 120])), y2="q75:Q")
    own = base.mark_line(point=True, color="#1f77b4").encode(
        y="median:Q", tooltip=["layer", alt.Tooltip("median:Q", title="median angle to own x_i", format=".1f"),
                               alt.Tooltip("closest_share:Q", title="own x_i is the closest", format=".3f")])
    other = base.mark_line(point=True, color="gray", strokeDash=[4, 3]).encode(
        y="other_mean:Q", tooltip=["layer", alt.Tooltip("other_mean:Q", title="mean angle to other x_j", format=".1f")])
    rule = alt.Chart(pd.DataFrame({"y": [90]})).mark_rule(color="lightgray").encode(y="y:Q")
    return alt.layer(rule, band, own, other).properties(title=title, width=460, height=260)
