"""Probes g^l: P independent maps trained side by side in one batched matmul.

g^l maps the hidden embedding e_i^l towards the input embedding x_i and is one of

* ``naive``: the identity map (nearest neighbour of e_i^l itself),
* ``linear``: an affine map R^d -> R^d,
* ``mlp``: a two-layer perceptron,

trained to minimise the L2 distance (``l2``) or the cosine distance (``cos``) between g^l(e_i^l) and x_i.
Shapes: L+1 hidden states, n tokens in a split, d_in probe input width, d_out its output width, P probes.

Trained weights are cached with :func:`identifiability.base.results.cached_tensors` (see :func:`fit_probes`), so
the angle-vs-magnitude chapter reuses the token-identity chapter's probes when the parameters match.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch
from torch import nn
from tqdm import tqdm

from ..base.results import cached_tensors
from ..models.loaded_model import LoadedModel
from .data import SplitData
from .hidden import CACHE_VERSION, HiddenStates, cache_params
from .lookup import SentenceLayout, nearest_in_sentence

MAPPINGS = ("naive", "linear", "mlp")
LOSSES = ("l2", "cos")


@dataclass
class ProbeConfig:
    """How probes are trained: minibatch AdamW at a constant learning rate from a start (a linear map: the
    least-squares affine map; an MLP: random weights), early stopping on the validation loss, fixed seed."""

    kind: str = "linear"  # naive | linear | mlp
    hidden: int = 512  # MLP width
    epochs: int = 40  # a cap: a probe stops when its validation loss stops improving
    batch_size: int = 512
    lr: float = 1e-3  # see DEFAULT_LR for the value used per mapping
    weight_decay: float = 1e-4
    patience: int = 3  # epochs without a validation improvement before a probe stops
    seed: int = 0
    init: str = "least_squares"  # how a linear map starts ("random": as an MLP, nn.Linear's default)
    min_delta: float = 1e-3  # an improvement: a validation loss below the best so far by this share of it

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class StackedProbe(nn.Module):
    """P independent probes R^{d_in} -> R^{d_out}, evaluated together.

    Inputs are standardised per feature with training statistics (``mean``, ``std``; this keeps one
    learning rate right for every layer's scale and leaves the class of affine maps unchanged).
    ``naive`` has no parameters and returns its input.
    """

    def __init__(
        self, kind: str, n_probes: int, d_in: int, d_out: int, hidden: int = 512, seeds: Sequence[int] | None = None
    ):
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

    def forward_standardised(self, z: torch.Tensor, probes: torch.Tensor | None = None) -> torch.Tensor:
        """The map on inputs already standardised with ``mean``/``std``: (P', B, d_in) -> (P', B, d_out), for
        the probes of indices ``probes`` (P' of them; default every probe)."""
        if self.kind == "naive":
            return z

        def of(t: torch.Tensor) -> torch.Tensor:
            return t if probes is None else t.index_select(0, probes)

        if self.kind == "linear":
            return torch.baddbmm(of(self.b), z, of(self.w))
        return torch.baddbmm(of(self.b2), torch.relu(torch.baddbmm(of(self.b1), z, of(self.w1))), of(self.w2))


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
    config: ProbeConfig | None = None  # how they were trained (None for the identity map)

    @property
    def kind(self) -> str:
        return self.probe.kind

    def stopped_early(self, p: int) -> bool:
        """Whether probe p's early stopping triggered: ``patience`` epochs without a better validation loss
        before the epoch cap ran out."""
        h, c = self.history, self.config
        return c is not None and h["stop_epoch"][p] - h["best_epoch"][p] >= c.patience


def _init_seeds(seed: int, layers: Sequence[int], losses: Sequence[str]) -> list[int]:
    """A probe's initial weights depend on (seed, layer, loss) only."""
    return [seed * 10_007 + 2 * int(li) + (lo == "cos") for li, lo in zip(layers, losses)]


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


def train_probes(
    train: SplitData,
    val: SplitData,
    layers: Sequence[int],
    losses: Sequence[str],
    config: ProbeConfig | None = None,
    targets: torch.Tensor | None = None,
    progress: bool = True,
) -> TrainedProbes:
    """Train one probe per (layer, loss) pair, all at once: a pure-torch minibatch AdamW loop.

    Probe p maps ``train.inputs[layers[p]]`` to the targets with loss ``losses[p]``. The probes share
    the minibatch order but nothing else; the summed loss gives each probe exactly its own gradient and
    AdamW is elementwise, so this is the same as training them one after another, only faster.
    Early stopping is per probe: it stops improving its copy after ``patience`` epochs without a better
    validation loss, and keeps the weights of its best epoch.

    Args:
        train, val: splits from :func:`make_split` (same variant).
        layers: (P,) layer of each probe; losses: (P,) "l2" or "cos".
        config: how to train (default: ``ProbeConfig()``, a linear map).
        targets: (n_train, d) to train towards instead of ``train.targets`` (e.g. shuffled, for a control).
    """
    config = ProbeConfig() if config is None else config
    if len(layers) != len(losses):
        raise ValueError("one loss per probe layer")
    bad = set(losses) - set(LOSSES)
    if bad:
        raise ValueError(f"unknown loss(es) {bad}; use {LOSSES}")
    P = len(layers)
    d_in, d_out = train.inputs.shape[-1], train.targets.shape[-1]
    probe = StackedProbe(config.kind, P, d_in, d_out, config.hidden, _init_seeds(config.seed, layers, losses))
    is_cos = torch.tensor([loss == "cos" for loss in losses])
    history: dict = {"train_loss": [], "val_loss": [], "best_epoch": [0] * P, "stop_epoch": [0] * P, "epochs": 0}
    if config.kind == "naive":
        return TrainedProbes(probe, list(layers), list(losses), train.variant, history)
    tgt = train.targets if targets is None else targets
    # standardise each used layer once (not per step); the probe keeps the statistics for later use
    used = sorted(set(int(li) for li in layers))
    where = torch.tensor([used.index(int(li)) for li in layers])
    z_all = train.inputs[used]  # (U, n, d_in)
    mu = z_all.mean(1, keepdim=True)
    sd = z_all.std(1, keepdim=True).clamp_min(1e-6)
    z_all = (z_all - mu) / sd
    with torch.no_grad():
        probe.mean.copy_(mu[where])
        probe.std.copy_(sd[where])
        if config.kind == "linear" and config.init == "least_squares":
            w, b = _least_squares(z_all, tgt)
            probe.w.copy_(w[where])
            probe.b.copy_(b[where])
    opt = torch.optim.AdamW(probe.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    g = torch.Generator().manual_seed(config.seed)
    val_layout = SentenceLayout(val.sentence, val.position)

    def validate() -> tuple[torch.Tensor, list[float]]:
        with torch.no_grad():
            out = apply_probes(probe, val.inputs, layers)
            rate = [
                float((val.key[nearest_in_sentence(o, val.targets, val_layout, "cos")] == val.key).double().mean())
                for o in out
            ]
            return probe_losses(out, val.targets, is_cos), rate

    best, rate0 = validate()  # epoch 0: the initial weights
    history["val_loss"].append(best.tolist())
    history["val_rate"] = [rate0]
    stale = torch.zeros(P, dtype=torch.long)
    active = torch.ones(P, dtype=torch.bool)
    best_state = {k: v.detach().clone() for k, v in probe.named_parameters()}
    n = train.n
    bar = tqdm(range(1, config.epochs + 1), desc=f"{config.kind} probes ({P})", unit="epoch", disable=not progress)
    for epoch in bar:
        perm = torch.randperm(n, generator=g)
        # only the probes still training are computed: a probe's gradient is its own, so leaving the stopped
        # ones out changes nothing for the others (the stopped ones keep the weights of their best epoch)
        act = active.nonzero().flatten()
        sub = None if len(act) == P else act
        total = torch.full((P,), float("nan"))
        total[act] = 0.0
        for s in range(0, n, config.batch_size):
            idx = perm[s : s + config.batch_size]
            pred = probe.forward_standardised(_select(z_all, where[act], idx), sub)
            loss = probe_losses(pred, tgt[idx], is_cos[act])
            opt.zero_grad(set_to_none=True)
            loss.sum().backward()
            opt.step()
            total[act] += loss.detach() * idx.numel()
        vl, rate = validate()
        history["train_loss"].append((total / n).tolist())
        history["val_loss"].append(vl.tolist())
        history["val_rate"].append(rate)
        history["epochs"] = epoch
        better = active & torch.isfinite(vl) & (~torch.isfinite(best) | (vl < best - config.min_delta * best.abs()))
        for p in better.nonzero().flatten().tolist():
            for k, v in probe.named_parameters():
                best_state[k][p] = v.detach()[p]
            history["best_epoch"][p] = epoch
        best = torch.where(better, vl, best)
        stale = torch.where(better, torch.zeros_like(stale), stale + 1)
        for p in active.nonzero().flatten().tolist():
            history["stop_epoch"][p] = epoch  # the last epoch this probe trained in
        active &= stale < config.patience
        bar.set_postfix(active=int(active.sum()), val=f"{float(best.mean()):.4f}")
        if not bool(active.any()):
            break
    with torch.no_grad():
        for k, v in probe.named_parameters():
            v.copy_(best_state[k])
    return TrainedProbes(probe, list(layers), list(losses), train.variant, history, config)


def _least_squares(z: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The affine maps of least squared error from standardised inputs to ``targets``, per used layer:
    z (U, n, d_in) with zero mean, targets (n, d_out) -> weights (U, d_in, d_out) and biases (U, 1, d_out).
    In double precision with the SVD driver: the rows of a LayerNorm output satisfy a linear equation, so
    z is rank-deficient and the minimum-norm solution is the one that generalises."""
    y = targets.double()
    ym = y.mean(0, keepdim=True)
    w = torch.stack([torch.linalg.lstsq(zu.double(), y - ym, driver="gelsd").solution for zu in z])
    return w.to(targets.dtype), ym.expand(z.shape[0], 1, -1).to(targets.dtype).clone()


def _probe_tensors(tp: TrainedProbes) -> dict[str, torch.Tensor]:
    h = tp.history
    t = {f"state.{k}": v.detach() for k, v in tp.probe.state_dict().items()}
    t["best_epoch"] = torch.tensor(h["best_epoch"])
    t["stop_epoch"] = torch.tensor(h["stop_epoch"])
    if h["train_loss"]:
        t["train_loss"] = torch.tensor(h["train_loss"])
        t["val_loss"] = torch.tensor(h["val_loss"])
        t["val_rate"] = torch.tensor(h["val_rate"])
    return t


def fit_probes(
    train: SplitData,
    val: SplitData,
    config: ProbeConfig,
    losses: Sequence[str] = LOSSES,
    layers: Sequence[int] | None = None,
    cache_key: dict | None = None,
    progress: bool = True,
) -> TrainedProbes:
    """Probes for every layer x loss, with weights cached on disk when ``cache_key`` (a dict naming the
    data: model, corpus, sample, split seed, ...) is given."""
    layers = list(range(train.inputs.shape[0])) if layers is None else list(layers)
    if config.kind == "naive":
        losses = losses[:1]  # nothing is trained: one (loss-free) probe per layer
    lay = [li for li in layers for _ in losses]
    los = [lo for _ in layers for lo in losses]
    if config.kind == "naive":
        return train_probes(train, val, lay, los, config, progress=progress)
    if cache_key is None:
        return train_probes(train, val, lay, los, config, progress=progress)
    params = {
        **cache_key,
        "variant": train.variant,
        "layers": lay,
        "losses": los,
        "config": config.as_dict(),
        "n_train": train.n,
        "n_val": val.n,
        "version": CACHE_VERSION,
    }
    made: list[TrainedProbes] = []

    def compute():
        made.append(train_probes(train, val, lay, los, config, progress=progress))
        return _probe_tensors(made[0])

    t = cached_tensors(f"probes/{cache_key.get('model', 'model')}", params, compute)
    if made:
        return made[0]
    probe = StackedProbe(
        config.kind,
        len(lay),
        train.inputs.shape[-1],
        train.targets.shape[-1],
        config.hidden,
        _init_seeds(config.seed, lay, los),
    )
    probe.load_state_dict({k[len("state.") :]: v for k, v in t.items() if k.startswith("state.")})
    hist = {
        "best_epoch": t["best_epoch"].tolist(),
        "stop_epoch": t["stop_epoch"].tolist(),
        "epochs": int(t["train_loss"].shape[0]) if "train_loss" in t else 0,
        "train_loss": t["train_loss"].tolist() if "train_loss" in t else [],
        "val_loss": t["val_loss"].tolist() if "val_loss" in t else [],
        "val_rate": t["val_rate"].tolist() if "val_rate" in t else [],
        "cached": True,
    }
    return TrainedProbes(probe, lay, los, train.variant, hist, config)


# --------------------------------------------------------------------------------------------------
# Every probe of a chapter in a few calls
# --------------------------------------------------------------------------------------------------

# Chosen on the embedded model (600 lee sentences, every layer; constant rates until early stopping, compared
# by epochs to stop and test rate): a linear map starts at the least-squares map, which 1e-2 shakes loose
# (its validation loss creeps for 50 epochs) and 1e-3 refines within 20; the MLP at 3e-3, as chosen before
# for stability (larger rates made it unstable).
DEFAULT_LR = {"naive": 0.0, "linear": 1e-3, "mlp": 3e-3}


def probe_config(
    kind: str,
    epochs: int = 40,
    batch_size: int = 512,
    mlp_hidden: int = 512,
    patience: int = 3,
    seed: int = 0,
    lr: float | None = None,
) -> ProbeConfig:
    """A ProbeConfig with the learning rate that suits ``kind`` unless ``lr`` is given."""
    return ProbeConfig(
        kind=kind,
        hidden=mlp_hidden,
        epochs=epochs,
        batch_size=batch_size,
        lr=DEFAULT_LR[kind] if lr is None else lr,
        patience=patience,
        seed=seed,
    )


def data_key(lm: LoadedModel, corpus_name: str, hs: HiddenStates, seed: int, include_special: bool) -> dict:
    """What trained probes depend on besides their own configuration (used to key the probe cache)."""
    return {
        "model": lm.content_key,
        "corpus": corpus_name,
        "hidden": cache_params(hs),
        "split_seed": seed,
        "include_special": include_special,
    }


def train_all(
    splits: dict[str, SplitData],
    kinds: Sequence[str] = MAPPINGS,
    epochs: int = 40,
    batch_size: int = 512,
    mlp_hidden: int = 512,
    patience: int = 3,
    seed: int = 0,
    losses: Sequence[str] = LOSSES,
    cache_key: dict | None = None,
    progress: bool = True,
) -> dict[str, TrainedProbes]:
    """Probes of every kind for every layer x loss (cached when ``cache_key`` is given)."""
    return {
        k: fit_probes(
            splits["train"],
            splits["val"],
            probe_config(k, epochs, batch_size, mlp_hidden, patience, seed),
            losses,
            cache_key=cache_key,
            progress=progress,
        )
        for k in kinds
    }


def seeded_probes(
    splits: dict[str, SplitData],
    first: TrainedProbes,
    config: ProbeConfig,
    more_seeds: Sequence[int] = (1, 2),
    losses: Sequence[str] = ("cos",),
    layers: Sequence[int] | None = None,
    cache_key: dict | None = None,
) -> list[TrainedProbes]:
    """``first`` (trained with ``config``) and, per offset k of ``more_seeds``, the probes of ``losses`` x
    ``layers`` (default every layer) trained with seed ``config.seed + k``: the probe seeds an interval
    resamples. Cached like :func:`fit_probes` when ``cache_key`` is given, so a second chapter asking for the
    same seeds reads them back. A probe's initial weights depend on its seed, layer and loss only, so the
    probe of a seed is the same whichever others are trained beside it."""
    return [first] + [
        fit_probes(
            splits["train"],
            splits["val"],
            replace(config, seed=config.seed + k),
            losses,
            layers,
            cache_key=cache_key,
            progress=False,
        )
        for k in more_seeds
    ]
