"""Chapter 3's studies: effective attention A_eff = A U Uᵀ (U an orthonormal basis of col(T)) over a sample.

One function per section of the chapter: the rank of every head's output block W_O^h, Pearson(A, A_eff)
against the input length d_s (Figure 1 (a), claim C4), the same in the other precision, the attention mass
per key category (Figure 1 (b, c), claims C5 and C18), the two separators of sentence pairs, and the head
viewer's matrices. Each takes the loaded model, its texts and the chapter's parameters, and returns what the chapter
records plus the tables and intervals that its charts draw and its verdict functions take.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch
from scipy.stats import rankdata

from ..base.stats import Interval, grouped_ci, paired_ci, unit_interval
from ..corpus.token_roles import CATEGORIES, SEPARATOR, START, STRUCTURAL, category_labels, special_roles
from ..effective.attention_mass import END_SEPARATOR, MIDDLE_SEPARATOR, mass_tables
from ..effective.nulls import value_bias as model_value_bias
from ..effective.nulls import without_value_bias
from ..effective.projection import correlation_by_length, effective_attention, out_proj_row_space
from ..evidence.effective_attention import C4Evidence, C5Category, C5Evidence, C5Original, C18Evidence
from ..models.loaded_model import LoadedModel
from ..models.trace import out_proj_weights, trace_batch
from . import Study, data

DTYPES = {"float32": torch.float32, "float64": torch.float64}
IDENTICAL = 1 - 1e-9  # Pearson(A, A_eff) above this counts as A_eff = A (C4's rule)
PEARSONS = ("pearson", "pearson_random", "pearson_random_weights")  # the model's and the two nulls'
CURVES = ("model", "random subspace", "random weights")  # the names of PEARSONS' curves on the page
MASSES = (
    "raw",
    "effective",
    "random",
)  # summed attention masses of :func:`identifiability.effective.attention_mass.mass_rows`


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


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rank correlation of two (n,) arrays; 0 where either is constant (no ranks to correlate:
    there is no trend, and a NaN would hide that)."""
    rx, ry = rankdata(x), rankdata(y)
    if rx.std() == 0 or ry.std() == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])


def c4_evidence(table: pd.DataFrame, d_v: int, seed: int = 0) -> C4Evidence:
    """C4's evidence (the rule in force, its alternatives and the original rule) from the rows of
    :func:`identifiability.effective.projection.correlation_by_length`: one row per input (``text``) and head."""
    wide = {c: table.pivot(index="text", columns=["layer", "head"], values=c) for c in PEARSONS}
    ds = table.groupby("text").d_s.first().loc[wide["pearson"].index].to_numpy()
    p, rnd, rw = (wide[c].to_numpy() for c in PEARSONS)  # (inputs, heads)
    up, far = ds > d_v, ds >= d_v + 2
    med = np.median(p[up], axis=1)
    d_rnd, d_rw = (p - rnd)[far], (p - rw)[far]
    n_heads = p.shape[1]

    def trend_of_heads(h: np.ndarray) -> float:
        return spearman(ds[up], np.median(p[up][:, h], axis=1))

    at_long = table[table.d_s == table.d_s.max()]
    paired_long = at_long.assign(d=at_long.pearson - at_long.pearson_random).groupby("text").d.mean()
    below, at_or_below = table[table.d_s < d_v], table[table.d_s <= d_v]
    empty = at_or_below[at_or_below.null_dim == 0]
    return C4Evidence(
        # C4's precondition (version 3): nothing is removed where LN(T) is empty; a head with a numerically
        # rank-deficient T at d_s <= d_v has a non-empty LN(T), and A_eff may rightly differ from A there
        identical_at_or_below_dv=bool((empty.pearson > IDENTICAL).all()),
        min_at_or_below_dv=float(empty.pearson.min()) if len(empty) else None,
        deficient_at_or_below_dv=int((at_or_below.null_dim > 0).sum()),
        diverges=bool((med < IDENTICAL).any()),
        trend=unit_interval(len(med), lambda i: spearman(ds[up][i], med[i]), seed),
        beyond=unit_interval(len(d_rnd), lambda i: float(np.median(d_rnd[i], axis=1).mean()), seed),
        beyond_random_weights=unit_interval(len(d_rw), lambda i: float(np.median(d_rw[i], axis=1).mean()), seed),
        trend_by_heads=unit_interval(n_heads, trend_of_heads, seed, "heads"),
        beyond_by_heads=unit_interval(n_heads, lambda h: float(np.median(d_rnd[:, h], axis=1).mean()), seed, "heads"),
        random_trend=spearman(ds[up], np.median(rnd[up], axis=1)) if up.any() else None,
        identical_below_dv=bool((below.pearson > IDENTICAL).all()),
        median_longest=Interval(
            *grouped_ci([g.pearson.to_numpy() for _, g in at_long.groupby("text")], np.median, seed=seed),
            n=int(at_long.text.nunique()),
            unit="inputs",
        ),
        paired_longest=Interval(
            *paired_ci(paired_long.to_numpy(), np.zeros(len(paired_long)), seed=seed),
            n=len(paired_long),
            unit="inputs",
        ),  # fmt: skip
        random_median_longest=float(at_long.pearson_random.median()),
    )


@dataclass(frozen=True)
class RawVsEffective(Study):
    """Pearson(A, A_eff) and the null part per input, layer and head, against the input length d_s."""

    fig1_lengths: list[int]  # every d_s measured
    fig1_inputs: int
    fig1_longest: int
    value_bias: bool  # T built from V_h = E W_V + b_V (True) or from E W_V
    pearson_min_below_dv: float | None  # smallest correlation over heads and inputs with d_s < d_v
    pearson_min_at_or_below_dv: float | None  # the same with d_s <= d_v (C4's rule)
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
    pearson_random_weights_median_longest: float  # the other null: random value weights on the same inputs
    pearson_median_by_length: dict[str, list[float]]  # model / random subspace / random weights, per fig1_lengths
    c4_spearman: float  # C4's decrease: rank correlation of d_s and the input's median Pearson (d_s > d_v)
    c4_beyond_random: float  # C4's paired difference from the random subspace, mean over inputs d_s >= d_v + 2
    c4_beyond_random_weights: float  # the same against random value weights
    table: pd.DataFrame = data()  # rows of :func:`identifiability.effective.projection.correlation_by_length`
    d_v: int = data()
    ds_just_above_dv: int | None = data()
    c4: C4Evidence = data()  # what C4's verdict reads (``verdicts.effective_attention.c4``)


def raw_vs_effective(
    lm: LoadedModel,
    texts: Sequence[str],
    precision: str = "float32",
    seed: int = 0,
    progress: bool = True,
    value_bias: bool = True,
) -> RawVsEffective:
    """Pearson(A, A_eff) for every head of every text beside the two null models, the quantities of
    Figure 1 (a) and C4's evidence (:func:`c4_evidence`: intervals over inputs, and over heads)."""
    d_v = lm.d_v
    t = correlation_by_length(lm, texts, dtype_of(precision), progress=progress, value_bias=value_bias, seed=seed)
    longest = int(t.d_s.max())
    below, at_or_below, above = t[t.d_s < d_v], t[t.d_s <= d_v], t[t.d_s > d_v]
    expected_null = (t.d_s - d_v).clip(lower=0)
    med_by_len = t.groupby("d_s")[list(PEARSONS)].median()
    drop_90 = med_by_len.pearson[(med_by_len.index > d_v) & (med_by_len.pearson < 0.9)]
    at_long = t[t.d_s == longest]
    just_above = int(above.d_s.min()) if len(above) else None
    c4 = c4_evidence(t, d_v, seed)
    return RawVsEffective(
        fig1_lengths=sorted(t.d_s.unique().tolist()),
        fig1_inputs=int(t.text.nunique()),
        fig1_longest=longest,
        value_bias=value_bias,
        pearson_min_below_dv=float(below.pearson.min()) if len(below) else None,
        pearson_min_at_or_below_dv=float(at_or_below.pearson.min()) if len(at_or_below) else None,
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
        pearson_random_weights_median_longest=float(at_long.pearson_random_weights.median()),
        pearson_median_by_length={
            name: med_by_len[c].round(4).tolist()
            for name, c in zip(("model", "random subspace", "random weights"), PEARSONS)
        },
        c4_spearman=c4.trend.estimate,
        c4_beyond_random=c4.beyond.estimate,
        c4_beyond_random_weights=c4.beyond_random_weights.estimate,
        table=t,
        d_v=d_v,
        ds_just_above_dv=just_above,
        c4=c4,
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
    check = correlation_by_length(
        lm, [texts[i] for i in short_idx], DTYPES[other], progress=False, value_bias=measured.value_bias,
        random_weights=False,
    )  # fmt: skip
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


def c5_category(per_head: pd.DataFrame, category: str, token: str, seed: int = 0, inputs: str = "sentences"):
    """C5's evidence for one category (``evidence.effective_attention.C5Category``, None where no input holds
    it) from the rows of :func:`identifiability.effective.attention_mass.mass_rows`: per input, the masses on the
    category
    summed over heads, layers and query rows; the ratio effective / raw and the random subspace's beside it,
    with intervals over inputs and over heads; the peak, the mean raw mass per query row in units of the
    uniform share (the category's tokens / d_s), median over inputs."""
    g = per_head[per_head.category == category]
    if not len(g):
        return None
    wide = {k: g.pivot(index="text", columns=["layer", "head"], values=k).to_numpy() for k in MASSES}
    keys = g.groupby("text")["keys"].first().to_numpy()
    raw, eff, rnd = (wide[k] for k in MASSES)  # (inputs, heads)

    def ratios(i: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r = raw[np.ix_(i, h)].sum(1)
        return eff[np.ix_(i, h)].sum(1) / r, rnd[np.ix_(i, h)].sum(1) / r

    every_input, every_head = np.arange(len(raw)), np.arange(raw.shape[1])
    model, random = ratios(every_input, every_head)
    return C5Category(
        category=category,
        token=token,
        separator=category in (END_SEPARATOR, MIDDLE_SEPARATOR),
        peak=float(np.median(raw.sum(1) / (raw.shape[1] * keys))),  # per row: sum / (heads * d_s); share k / d_s
        ratio=unit_interval(len(model), lambda i: float(model[i].mean()), seed, inputs),
        vs_random=unit_interval(len(model), lambda i: float((model - random)[i].mean()), seed, inputs),
        random=float(random.mean()),
        ratio_by_heads=unit_interval(len(every_head), lambda h: float(ratios(every_input, h)[0].mean()), seed, "heads"),
        vs_random_by_heads=unit_interval(
            len(every_head), lambda h: float(np.subtract(*ratios(every_input, h)).mean()), seed, "heads"
        ),
        inputs=inputs,
    )


def c5_summary(categories: Sequence[C5Category]) -> dict[str, dict[str, float]]:
    """What the results file keeps of C5's evidence: per category its peak and both ratios."""
    return {
        c.category: {"peak": round(c.peak, 4), "ratio": round(c.ratio.estimate, 4), "random": round(c.random, 4)}
        for c in categories
    }


def _ratio_intervals(
    ratios: pd.DataFrame, category: str | None, seed: int
) -> tuple[Interval | None, Interval | None, float | None]:
    """C5's original evidence for one category: its effective (rows normalised) / raw mass ratio per text, that
    ratio minus the random projection's, both with intervals over texts, and the random projection's mean ratio."""
    g = ratios[ratios.category == category]
    if not len(g):
        return None, None, None
    rel = (g.effective / g.raw).to_numpy()
    vs_random = (g.effective / g.raw - g.random / g.raw).to_numpy()
    zeros = np.zeros(len(rel))
    return (
        Interval(*paired_ci(rel, zeros, seed=seed), n=len(rel), unit="sentences"),
        Interval(*paired_ci(vs_random, zeros, seed=seed), n=len(rel), unit="sentences"),
        float((g.random / g.raw).mean()),
    )


@dataclass(frozen=True)
class MassByCategory(Study):
    """Raw and effective attention mass per key category (special tokens by role, punctuation, other tokens)
    on texts longer than d_v, and C5's evidence for the start token and the end separator."""

    mass_sentences: int
    mass_categories: list[str]  # the categories present, in display order
    mass_by_layer: dict[str, dict[str, list[float]]]  # category -> raw / effective -> per layer 1..L (4 decimals)
    mass_mean: dict[str, dict[str, float]]  # category -> raw / effective -> mean over layers and heads
    sink_token: str | None  # the structural role (start or separator) with the largest raw mass
    sink_mass_raw: float | None
    sink_mass_effective: float | None
    c5_categories: dict[str, dict[str, float]]  # category -> peak (x uniform share), ratio, random (summed masses)
    c5_ratio_by_sentence: dict[str, dict[str, list[float]]]  # category -> model / random ratio, per sentence
    table: pd.DataFrame = data()  # per (layer, head, category): mean mass per query row, averaged over texts
    per_head: pd.DataFrame = data()  # rows of :func:`identifiability.effective.attention_mass.mass_rows`
    by_layer: pd.DataFrame = data()  # mean over heads, indexed by (layer, category)
    labels: dict[str, str] = data()  # category -> chart label, e.g. "separator ([SEP])"
    peak_token: str = data()  # the tokenizer's spelling of the sink ("" where there is none)
    c5: tuple[C5Category, ...] = data()  # start and end separator: what C5's verdict reads
    c5_original: C5Original = data()  # the original rule's inputs (rows normalised)


def _chart_table(per_head: pd.DataFrame, n_texts: int) -> pd.DataFrame:
    """Mean mass per query row per (layer, head, category), averaged over texts (0 where a text lacks the
    category), and ``present``: the share of texts that hold it."""
    m = per_head[per_head.category.isin(CATEGORIES)]
    per_row = m.assign(raw=m.raw / m.d_s, effective=m.effective / m.d_s)
    table = (per_row.groupby(["layer", "head", "category"])[["raw", "effective"]].sum() / n_texts).reset_index()
    present = m.groupby("category").text.nunique() / n_texts
    return table.assign(present=table.category.map(present))


def mass_by_category(
    lm: LoadedModel,
    texts: Sequence[str],
    precision: str = "float32",
    seed: int = 0,
    progress: bool = True,
    value_bias: bool = True,
) -> MassByCategory:
    """Attention mass per key category, raw and effective, for every head (means over queries and texts), and
    C5's evidence (:func:`c5_category`) for the start token and the end separator, with the original rule's
    (effective rows normalised to sum to one)."""
    per_head, normalised = mass_tables(lm, texts, dtype_of(precision), progress=progress, value_bias=value_bias,
                                       seed=seed)  # fmt: skip
    mass = _chart_table(per_head, len(texts))
    order = [c for c in CATEGORIES if c in set(mass.category)]
    by_layer = mass.groupby(["layer", "category"])[["raw", "effective"]].mean()
    tot = mass.groupby("category")[["raw", "effective"]].mean()
    structural = [c for c in order if c in STRUCTURAL]
    sink = max(structural, key=lambda c: tot.loc[c, "raw"]) if structural else None
    spelling = {role: tok for role, (_, tok) in special_roles(lm.tokenizer).items()}
    spelling[END_SEPARATOR] = spelling.get(SEPARATOR, "")
    c5 = tuple(c for c in (c5_category(per_head, k, spelling.get(k, ""), seed) for k in (START, END_SEPARATOR)) if c)
    sep_ratio, sep_vs_random, sep_random = _ratio_intervals(normalised, SEPARATOR, seed)
    peak_ratio, peak_vs_random, _ = _ratio_intervals(normalised, sink, seed) if sink != SEPARATOR else (None,) * 3
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
        c5_categories=c5_summary(c5),
        c5_ratio_by_sentence=_ratios_by_sentence(per_head, [c.category for c in c5]),
        table=mass,
        per_head=per_head,
        by_layer=by_layer,
        labels=category_labels(lm.tokenizer, order),
        peak_token=spelling[sink] if sink else "",
        c5=c5,
        c5_original=C5Original(
            sep_ratio, sep_vs_random, spelling[sink] if sink else "", peak_ratio, peak_vs_random, sep_random
        ),
    )


def _ratios_by_sentence(per_head: pd.DataFrame, categories: Sequence[str]) -> dict[str, dict[str, list[float]]]:
    """category -> model / random: per input, the summed effective (random-subspace) mass over the raw."""
    out = {}
    for c in categories:
        sums = per_head[per_head.category == c].groupby("text")[list(MASSES)].sum()
        out[c] = {
            "model": (sums.effective / sums.raw).round(6).tolist(),
            "random": (sums.random / sums.raw).round(6).tolist(),
        }
    return out


@dataclass(frozen=True)
class PairSeparators(Study):
    """On sentence pairs: the attention mass on the separator between the segments and on the final one, and
    C5's evidence for the middle separator."""

    separator_mass: dict[str, dict[str, list[float]]]  # first / second -> raw / effective -> per layer 1..L
    c5_pair_categories: dict[str, dict[str, float]]  # middle separator -> peak, ratio, random (summed masses)
    table: pd.DataFrame = data()  # per layer and separator (first | second): raw, effective, texts
    pairs: int = data()  # pairs that hold two or more separators
    means: pd.DataFrame = data()  # mean over layers, indexed by separator (first, second)
    c5: tuple[C5Category, ...] = data()  # the middle separator, where the pairs hold one


def pair_separators(
    lm: LoadedModel, pairs: Sequence[str], precision: str = "float32", seed: int = 0, value_bias: bool = True
) -> PairSeparators:
    """Raw and effective mass on each separator of sentence pairs, per layer (means over heads, queries and
    the pairs that hold two separators), and C5's evidence for the separator between the segments."""
    per_head, _ = mass_tables(lm, pairs, dtype_of(precision), progress=False, value_bias=value_bias, seed=seed)
    places = {MIDDLE_SEPARATOR: "first", END_SEPARATOR: "second"}
    with_two = per_head[per_head.text.isin(per_head[per_head.category == MIDDLE_SEPARATOR].text)]
    m = with_two[with_two.category.isin(places)]
    m = m.assign(separator=m.category.map(places), raw=m.raw / m.d_s, effective=m.effective / m.d_s)
    n = int(with_two.text.nunique())
    layers = range(1, lm.n_layers + 1)
    full = pd.MultiIndex.from_product([layers, ["first", "second"]], names=["layer", "separator"])
    seps = (m.groupby(["layer", "separator"])[["raw", "effective"]].mean().reindex(full, fill_value=0.0)
            .reset_index().assign(texts=n))  # fmt: skip
    token = special_roles(lm.tokenizer).get(SEPARATOR, (0, ""))[1]
    c5 = c5_category(per_head, MIDDLE_SEPARATOR, token, seed, inputs="sentence pairs")
    return PairSeparators(
        separator_mass={
            w: {k: g.sort_values("layer")[k].round(4).tolist() for k in ("raw", "effective")}
            for w, g in seps.groupby("separator")
        },
        c5_pair_categories=c5_summary([c5] if c5 else []),
        table=seps,
        pairs=n,
        means=seps.groupby("separator")[["raw", "effective"]].mean(),
        c5=(c5,) if c5 else (),
    )


def c5_evidence(mass: MassByCategory, seps: PairSeparators) -> C5Evidence:
    """C5's evidence: the start token and end separator on single sentences, the middle separator on pairs,
    and the original rule's inputs."""
    return C5Evidence(mass.c5 + seps.c5, mass.c5_original)


def c18_evidence(mass: MassByCategory, seps: PairSeparators) -> C18Evidence:
    """C18's evidence: the same categories as C5's (the start token and the end separator on single
    sentences, the middle separator on pairs), among which the sink is the one with the largest peak."""
    return C18Evidence(mass.c5 + seps.c5)


# --------------------------------------------------------------------------------------------------
# The head viewer
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ViewerExamples(Study):
    """A few texts' raw and effective attention for every layer and head."""

    viewer_lengths: list[int]
    examples: list[tuple[list[str], torch.Tensor, torch.Tensor]] = data()  # (tokens, A, A_eff) (L, H, d_s, d_s)


def viewer_examples(
    lm: LoadedModel, texts: Sequence[str], precision: str = "float32", value_bias: bool = True
) -> ViewerExamples:
    w_o = out_proj_weights(lm)
    bias = None if value_bias else model_value_bias(lm)
    examples = []
    for tr in trace_batch(lm, texts):
        if bias is not None:
            tr = replace(tr, values=without_value_bias(tr.values, bias))
        eff = effective_attention([tr], w_o, dtype=dtype_of(precision))[0]
        examples.append((tr.tokens, tr.attentions, eff.effective))
    return ViewerExamples(viewer_lengths=[len(t) for t, _, _ in examples], examples=examples)


RESULTS = (OutProjectionRanks, RawVsEffective, PrecisionCheck, MassByCategory, PairSeparators, ViewerExamples)
