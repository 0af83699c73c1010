"""Angle versus magnitude: ablations that separate the two, and norms and angles per layer.

Where in e_i^l does a token's identity live: in its direction or in its length? The ablations train and
test on unit vectors (angle only) or on norms (magnitude only), and rescale test embeddings at random; the
summaries describe |e_i^l| and the angle between e_i^l and x_i per layer.
"""

from __future__ import annotations

import math

import pandas as pd
import torch

from .data import SplitData, make_splits, unit_vectors
from .evaluation import evaluate
from .hidden import HiddenStates
from .lookup import LOOKUPS, SentenceLayout
from .probes import TrainedProbes, train_all


def random_scales(n: int, max_factor: float, seed: int = 0) -> torch.Tensor:
    """(n,) factors drawn log-uniformly from [1/max_factor, max_factor]."""
    g = torch.Generator().manual_seed(seed)
    return torch.exp((torch.rand(n, generator=g) * 2 - 1) * math.log(max_factor))


def rescaled_rates(probes: dict[str, TrainedProbes], data: SplitData, max_factor: float, seed: int = 0) -> pd.DataFrame:
    """Rates when every test embedding e_i^l is multiplied by its own random factor in
    [1/max_factor, max_factor] (log-uniform) before the (unchanged) probe is applied."""
    scale = random_scales(data.n, max_factor, seed)
    frames = [evaluate(tp, data, LOOKUPS, ("sentence",), scale=scale, offsets=())[0] for tp in probes.values()]
    return pd.concat(frames, ignore_index=True)


def ablation_study(
    hs: HiddenStates,
    splits: dict[str, SplitData],
    probes: dict[str, TrainedProbes],
    rescale_max: float = 4.0,
    seed: int = 0,
    include_special: bool = False,
    epochs: int = 40,
    batch_size: int = 512,
    mlp_hidden: int = 512,
    patience: int = 3,
    cache_key: dict | None = None,
    progress: bool = True,
) -> pd.DataFrame:
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
    pu = train_all(
        unit, ("linear",), epochs, batch_size, mlp_hidden, patience, seed, cache_key=cache_key, progress=progress
    )
    frames.append(tidy(evaluate(pu["linear"], unit["test"], offsets=())[0], "angle only (unit vectors): linear map"))
    norm = make_splits(hs, seed, "norm", include_special)
    pn = train_all(
        norm, ("mlp",), epochs, batch_size, mlp_hidden, patience, seed, cache_key=cache_key, progress=progress
    )
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
    return pd.DataFrame([{"layer": li, **_quantile_row(norms[li])} for li in range(norms.shape[0])])


@torch.no_grad()
def norm_histograms(data: SplitData, bins: int = 40) -> pd.DataFrame:
    """Per layer: a histogram of |e_i^l| relative to that layer's median (so one x range fits all layers)."""
    norms = data.raw.norm(dim=-1)
    rel = norms / norms.median(dim=1, keepdim=True).values
    hi = float(torch.quantile(rel.flatten(), 0.995))
    edges = torch.linspace(0, hi, bins + 1)
    rows = []
    for li in range(norms.shape[0]):
        counts = torch.histc(rel[li].clamp(max=hi), bins=bins, min=0, max=hi)
        for b in range(bins):
            rows.append(
                {
                    "layer": li,
                    "lo": float(edges[b]),
                    "hi": float(edges[b + 1]),
                    "share": float(counts[b] / rel.shape[1]),
                }
            )
    return pd.DataFrame(rows)


@torch.no_grad()
def angle_summary(data: SplitData) -> pd.DataFrame:
    """Per layer: the angle (degrees) between e_i^l and its own x_i, and, as a reference, the mean angle
    between e_i^l and the input embeddings x_j (j != i) of the other tokens of the same sentence.

    Columns: layer, median/quantiles of the own angle, ``other_mean`` the reference, and
    ``closest_share`` the share of tokens whose own x_i is the angularly closest (= naive cosine rate).
    """
    layout = SentenceLayout(data.sentence, data.position)
    xu = layout.pad(unit_vectors(data.targets))
    rows = []
    for li in range(data.raw.shape[0]):
        eu = layout.pad(unit_vectors(data.raw[li]))
        cos = (eu @ xu.transpose(1, 2)).clamp(-1, 1)  # (n_sent, n_max, n_max): e_i vs x_j
        ang = torch.rad2deg(torch.acos(cos))
        own = torch.diagonal(ang, dim1=1, dim2=2)[layout.slot, layout.col]
        pair_valid = layout.valid[:, :, None] & layout.valid[:, None, :] & ~torch.eye(layout.n_max, dtype=torch.bool)
        other = ang[pair_valid]
        cmask = cos.masked_fill(~layout.valid[:, None, :], -2)
        closest = (cmask.argmax(-1) == torch.arange(layout.n_max))[layout.slot, layout.col]
        rows.append(
            {
                "layer": li,
                **_quantile_row(own),
                "other_mean": float(other.double().mean()) if other.numel() else float("nan"),
                "closest_share": float(closest.double().mean()),
            }
        )
    return pd.DataFrame(rows)
