"""Chapter 3's studies: effective attention A_eff = A U Uᵀ (U an orthonormal basis of col(T)) over a sample.

One function per section of the chapter: the rank of every head's output block W_O^h, Pearson(A, A_eff)
against the input length d_s (Figure 1 (a), claim C4), the same in the other precision, the attention mass
per key category (Figure 1 (b, c), claim C5), the two separators of sentence pairs, and the head viewer's
matrices. Each takes the loaded model, its texts and the chapter's parameters, and returns what the chapter
records plus the tables and intervals that its charts draw and its verdict functions take.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..effective import (
    CATEGORIES,
    SEPARATOR,
    STRUCTURAL,
    attention_mass,
    category_labels,
    correlation_by_length,
    effective_attention,
    null_mass_ratios,
    out_proj_row_space,
    separator_mass,
    special_roles,
)
from ..loaded_model import LoadedModel
from ..stats import grouped_ci, paired_ci
from ..trace import out_proj_weights, trace_batch
from ..verdicts import Interval
from . import Study, data

DTYPES = {"float32": torch.float32, "float64": torch.float64}
IDENTICAL = 1 - 1e-9  # Pearson(A, A_eff) above this counts as A_eff = A (C4's rule)


def dtype_of(precision: str) -> torch.dtype:
    """The torch dtype of the chapter's ``precision`` parameter, in which T is formed and decomposed."""
    if precision not in DTYPES:
        raise ValueError(f"precision must be one of {list(DTYPES)}, got {precision!r}")
    return DTYPES[precision]


# --------------------------------------------------------------------------------------------------
# Is col(T) = col(V_h)?
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutProjectionRanks(Study):
    """The rank of every head's output-projection block W_O^h (d_v x d): where it is d_v, col(T) = col(V_h)."""

    d_v: int
    wo_rank_min: int
    wo_deficient_heads: int  # heads whose W_O^h has rank below d_v
    wo_rank: torch.Tensor = data()  # (L, H) rank of W_O^h
    family: str = data()
    causal: bool = data()  # a causal model: A is lower-triangular, A_eff need not be


def out_projection_ranks(lm: LoadedModel, precision: str = "float32") -> OutProjectionRanks:
    """The rank of W_O^h for every layer and head, by the book's rank rule in ``precision``."""
    _, rank = out_proj_row_space(out_proj_weights(lm), dtype_of(precision))
    return OutProjectionRanks(
        d_v=lm.d_v,
        wo_rank_min=int(rank.min()),
        wo_deficient_heads=int((rank < lm.d_v).sum()),
        wo_rank=rank,
        family=lm.adapter.family,
        causal=lm.adapter.causal,
    )


# --------------------------------------------------------------------------------------------------
# Figure 1 (a): Pearson(A, A_eff) against d_s; C4
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RawVsEffective(Study):
    """Pearson(A, A_eff) and the null part per input, layer and head, against the input length d_s."""

    fig1_lengths: list[int]  # every d_s measured
    fig1_inputs: int
    fig1_longest: int
    pearson_min_below_dv: float | None  # smallest correlation over heads and inputs with d_s < d_v
    null_heads_at_or_below_dv: int  # head-inputs with d_s <= d_v and a non-empty LN(T)
    heads_at_or_below_dv: int
    null_dim_equals_ds_minus_dv: float  # share of head-inputs with dim LN(T) = max(d_s - d_v, 0)
    null_dim_exceeds_ds_minus_dv: int
    pearson_median_longest: float  # median over heads and inputs at the longest length
    pearson_median_by_layer_longest: list[float]  # the same per layer 1..L, rounded to 4 decimals
    pearson_median_just_above_dv: float | None  # at the shortest length above d_v
    first_ds_median_below_0_9: int | None  # the shortest length whose median is below 0.9
    null_share_median_longest: float  # median ||A - A_eff||_F / ||A||_F at the longest length
    c4_pearson_random_median_longest: float  # the null model: A projected onto a random subspace of the same rank
    table: pd.DataFrame = data()  # rows of :func:`identifiability.effective.correlation_by_length`
    d_v: int = data()
    ds_just_above_dv: int | None = data()
    identical_below_dv: bool = data()  # A_eff = A (to 1e-9) for every head with d_s < d_v
    median_longest: Interval = data()  # pearson_median_longest, its interval resampling inputs
    paired_vs_random: Interval = data()  # mean over inputs of (Pearson minus the random projection's), per input


def raw_vs_effective(
    lm: LoadedModel, texts: Sequence[str], precision: str = "float32", seed: int = 0, progress: bool = True
) -> RawVsEffective:
    """Pearson(A, A_eff) for every head of every text, the quantities of Figure 1 (a) and C4's evidence.

    C4's intervals use the texts at the longest length: the median over their heads, resampling whole
    texts (a text's heads are not independent), and the paired difference from the random-subspace
    projection, one mean over heads per text.
    """
    d_v = lm.d_v
    t = correlation_by_length(lm, texts, dtype=dtype_of(precision), progress=progress)
    longest = int(t.d_s.max())
    below, at_or_below, above = t[t.d_s < d_v], t[t.d_s <= d_v], t[t.d_s > d_v]
    expected_null = (t.d_s - d_v).clip(lower=0)
    med_by_len = above.groupby("d_s").pearson.median()
    drop_90 = med_by_len[med_by_len < 0.9]
    at_long = t[t.d_s == longest]
    just_above = int(above.d_s.min()) if len(above) else None
    pearson_min_below = float(below.pearson.min()) if len(below) else None
    by_input = [g.pearson.to_numpy() for _, g in at_long.groupby("text")]
    paired = at_long.assign(d=at_long.pearson - at_long.pearson_random).groupby("text").d.mean()
    return RawVsEffective(
        fig1_lengths=sorted(t.d_s.unique().tolist()),
        fig1_inputs=int(t.text.nunique()),
        fig1_longest=longest,
        pearson_min_below_dv=pearson_min_below,
        null_heads_at_or_below_dv=int((at_or_below.null_dim > 0).sum()),
        heads_at_or_below_dv=int(len(at_or_below)),
        null_dim_equals_ds_minus_dv=float((t.null_dim == expected_null).mean()),
        null_dim_exceeds_ds_minus_dv=int((t.null_dim > expected_null).sum()),
        pearson_median_longest=float(at_long.pearson.median()),
        pearson_median_by_layer_longest=at_long.groupby("layer").pearson.median().round(4).tolist(),
        pearson_median_just_above_dv=float(above[above.d_s == just_above].pearson.median()) if len(above) else None,
        first_ds_median_below_0_9=int(drop_90.index.min()) if len(drop_90) else None,
        null_share_median_longest=float(at_long.null_share.median()),
        c4_pearson_random_median_longest=float(at_long.pearson_random.median()),
        table=t,
        d_v=d_v,
        ds_just_above_dv=just_above,
        identical_below_dv=pearson_min_below is None or pearson_min_below > IDENTICAL,
        median_longest=Interval(*grouped_ci(by_input, np.median, seed=seed), n=len(by_input)),
        paired_vs_random=Interval(*paired_ci(paired.to_numpy(), np.zeros(len(paired)), seed=seed), n=len(paired)),
    )


@dataclass(frozen=True)
class PrecisionCheck(Study):
    """The inputs up to 2 d_v tokens recomputed in the other precision: where the rank decision changes."""

    precision_check_heads: int
    precision_rank_differences: int  # head-inputs whose dim LN(T) differs between the precisions
    precision_rank_difference_ds: list[int]  # the lengths d_s where it does
    precision_max_pearson_difference: float
    precision: str = data()
    other: str = data()
    max_ds: int = data()  # 2 d_v
    table: pd.DataFrame = data()  # the correlation table's rows joined with the other precision's (``*_other``)


def precision_check(
    lm: LoadedModel, texts: Sequence[str], measured: RawVsEffective, precision: str = "float32"
) -> PrecisionCheck:
    """Recompute ``measured`` for the texts of at most 2 d_v tokens in the other precision (float32 <->
    float64) and compare the null-space dimension and the correlation head by head. Around d_s = d_v the
    value matrices are square, closest to singular: there a rank decision can depend on the precision."""
    dtype_of(precision)
    other = "float64" if precision == "float32" else "float32"
    max_ds = 2 * lm.d_v
    t = measured.table
    short_idx = sorted(t[t.d_s <= max_ds].text.unique().tolist())
    check = correlation_by_length(lm, [texts[i] for i in short_idx], dtype=DTYPES[other], progress=False)
    check["text"] = check.text.map(lambda j: short_idx[j])
    merged = t.merge(check, on=["text", "layer", "head"], suffixes=("", "_other"))
    differ = merged[merged.null_dim != merged.null_dim_other]
    return PrecisionCheck(
        precision_check_heads=int(len(merged)),
        precision_rank_differences=int(len(differ)),
        precision_rank_difference_ds=sorted(differ.d_s.unique().tolist()),
        precision_max_pearson_difference=float((merged.pearson - merged.pearson_other).abs().max()),
        precision=precision,
        other=other,
        max_ds=max_ds,
        table=merged,
    )


# --------------------------------------------------------------------------------------------------
# Figure 1 (b, c): attention mass per key category; C5
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MassByCategory(Study):
    """Raw and effective attention mass per key category (special tokens by role, punctuation, other tokens)
    on texts longer than d_v, and C5's per-text ratios of effective to raw mass."""

    mass_sentences: int
    mass_categories: list[str]  # the categories present, in display order
    mass_by_layer: dict[str, dict[str, list[float]]]  # category -> raw / effective -> per layer 1..L (4 decimals)
    mass_mean: dict[str, dict[str, float]]  # category -> raw / effective -> mean over layers and heads
    sink_token: str | None  # the structural role (start or separator) with the largest raw mass
    sink_mass_raw: float | None
    sink_mass_effective: float | None
    c5_ratio_by_sentence: dict[str, dict[str, list[float]]]  # role -> raw / effective / random -> per text
    table: pd.DataFrame = data()  # rows of :func:`identifiability.effective.attention_mass`
    by_layer: pd.DataFrame = data()  # mean over heads, indexed by (layer, category)
    labels: dict[str, str] = data()  # category -> chart label, e.g. "separator ([SEP])"
    peak_token: str = data()  # the tokenizer's spelling of the sink ("" where there is none)
    separator_ratio: Interval | None = data()  # effective / raw mass of the separator, one value per text
    separator_vs_random: Interval | None = data()  # that ratio minus the random projection's, per text
    separator_random: float | None = data()  # the random projection's ratio, mean over texts
    peak_ratio: Interval | None = data()  # the same for the sink, where it is not the separator
    peak_vs_random: Interval | None = data()


def _ratio_intervals(
    ratios: pd.DataFrame, category: str | None, seed: int
) -> tuple[Interval | None, Interval | None, float | None]:
    """C5's evidence for one category: its effective / raw mass ratio per text, that ratio minus the random
    projection's, both with intervals over texts, and the random projection's mean ratio."""
    g = ratios[ratios.category == category]
    if not len(g):
        return None, None, None
    rel = (g.effective / g.raw).to_numpy()
    vs_random = (g.effective / g.raw - g.random / g.raw).to_numpy()
    zeros = np.zeros(len(rel))
    return (
        Interval(*paired_ci(rel, zeros, seed=seed), n=len(rel)),
        Interval(*paired_ci(vs_random, zeros, seed=seed), n=len(rel)),
        float((g.random / g.raw).mean()),
    )


def mass_by_category(
    lm: LoadedModel, texts: Sequence[str], precision: str = "float32", seed: int = 0, progress: bool = True
) -> MassByCategory:
    """Attention mass per key category, raw and effective, for every head (means over queries and texts), and
    C5's evidence: per text, the mass on the separator and on the sink in effective attention (rows
    normalised to sum to one) relative to raw attention, next to the same for a random subspace."""
    dtype = dtype_of(precision)
    mass = attention_mass(lm, texts, dtype=dtype, progress=progress)
    order = [c for c in CATEGORIES if c in set(mass.category)]
    by_layer = mass.groupby(["layer", "category"])[["raw", "effective"]].mean()
    tot = mass.groupby("category")[["raw", "effective"]].mean()
    structural = [c for c in order if c in STRUCTURAL]
    sink = max(structural, key=lambda c: tot.loc[c, "raw"]) if structural else None
    judged = list(dict.fromkeys(c for c in (SEPARATOR, sink) if c))
    ratios = null_mass_ratios(lm, texts, judged, dtype=dtype, progress=False)
    sep_ratio, sep_vs_random, sep_random = _ratio_intervals(ratios, SEPARATOR, seed)
    peak_ratio, peak_vs_random, _ = _ratio_intervals(ratios, sink, seed) if sink != SEPARATOR else (None,) * 3
    return MassByCategory(
        mass_sentences=len(texts),
        mass_categories=order,
        mass_by_layer={
            c: {k: by_layer.xs(c, level="category")[k].round(4).tolist() for k in ("raw", "effective")} for c in order
        },
        mass_mean={c: {k: float(tot.loc[c, k]) for k in ("raw", "effective")} for c in order},
        sink_token=sink,
        sink_mass_raw=float(tot.loc[sink, "raw"]) if sink else None,
        sink_mass_effective=float(tot.loc[sink, "effective"]) if sink else None,
        c5_ratio_by_sentence={
            k: g[["raw", "effective", "random"]].round(6).to_dict(orient="list") for k, g in ratios.groupby("category")
        },
        table=mass,
        by_layer=by_layer,
        labels=category_labels(lm.tokenizer, order),
        peak_token=special_roles(lm.tokenizer)[sink][1] if sink else "",
        separator_ratio=sep_ratio,
        separator_vs_random=sep_vs_random,
        separator_random=sep_random,
        peak_ratio=peak_ratio,
        peak_vs_random=peak_vs_random,
    )


@dataclass(frozen=True)
class PairSeparators(Study):
    """On sentence pairs: the attention mass on the separator between the segments and on the final one."""

    separator_mass: dict[str, dict[str, list[float]]]  # first / second -> raw / effective -> per layer 1..L
    table: pd.DataFrame = data()  # rows of :func:`identifiability.effective.separator_mass`
    pairs: int = data()  # pairs that hold two or more separators
    means: pd.DataFrame = data()  # mean over layers, indexed by separator (first, second)


def pair_separators(lm: LoadedModel, pairs: Sequence[str], precision: str = "float32") -> PairSeparators:
    """Raw and effective mass on each separator of sentence pairs, per layer (means over heads and queries)."""
    seps = separator_mass(lm, pairs, dtype=dtype_of(precision), progress=False)
    return PairSeparators(
        separator_mass={
            w: {k: g.sort_values("layer")[k].round(4).tolist() for k in ("raw", "effective")}
            for w, g in seps.groupby("separator")
        },
        table=seps,
        pairs=int(seps.texts.iloc[0]),
        means=seps.groupby("separator")[["raw", "effective"]].mean(),
    )


# --------------------------------------------------------------------------------------------------
# The head viewer
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ViewerExamples(Study):
    """A few texts' raw and effective attention for every layer and head."""

    viewer_lengths: list[int]
    examples: list[tuple[list[str], torch.Tensor, torch.Tensor]] = data()  # (tokens, A, A_eff) (L, H, d_s, d_s)


def viewer_examples(lm: LoadedModel, texts: Sequence[str], precision: str = "float32") -> ViewerExamples:
    w_o = out_proj_weights(lm)
    examples = []
    for tr in trace_batch(lm, texts):
        eff = effective_attention([tr], w_o, dtype=dtype_of(precision))[0]
        examples.append((tr.tokens, tr.attentions, eff.effective))
    return ViewerExamples(viewer_lengths=[len(t) for t, _, _ in examples], examples=examples)


RESULTS = (OutProjectionRanks, RawVsEffective, PrecisionCheck, MassByCategory, PairSeparators, ViewerExamples)
