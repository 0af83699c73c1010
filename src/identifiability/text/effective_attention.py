"""Chapter 3's text (effective attention): the sentences the chapter states its measurements in, generated
from the study results of :mod:`identifiability.studies.effective_attention`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..corpus.token_roles import OTHER, PUNCTUATION, SEPARATOR, STRUCTURAL
from ..evidence.effective_attention import C5Category, sink_of
from ..verdicts.effective_attention import C5_PEAK

if TYPE_CHECKING:
    from ..studies.effective_attention import (
        MassByCategory,
        OutProjectionRanks,
        PairSeparators,
        PrecisionCheck,
        RawVsEffective,
        ViewerExamples,
    )


def out_projection_text(r: OutProjectionRanks) -> str:
    """What the rank of W_O^h means for the decomposition; for a causal model, what A_eff does to the triangle."""
    n = r.wo_rank.numel()
    text = f"$W_O^h$ has rank {r.wo_rank_min} to {int(r.wo_rank.max())} (d_v = {r.d_v}): " + (
        f"full rank for all {n} heads, so $\\mathrm{{col}}(T) = \\mathrm{{col}}(V_h)$ and the value matrices "
        "are decomposed as they are."
        if not r.wo_deficient_heads
        else f"{r.wo_deficient_heads} of {n} heads are rank deficient; their $V_h$ is projected onto the row "
        "space of $W_O^h$ before it is decomposed."
    )
    if r.causal:
        text += (
            f"\n\n*{r.family} is a causal model: its raw attention is lower-triangular. Effective attention is a "
            "projection of each row onto col(T), which in general does not keep the triangle: A_eff may put "
            "(positive or negative) weight on future positions even though the head never reads them. The "
            "definition and the invariant A_eff T = A T are unchanged.*"
        )
    return text


def raw_vs_effective_text(r: RawVsEffective) -> str:
    """Figure 1 (a) in words: A_eff = A up to d_v (d_s <= d_v, C4's condition), the null-space dimension, the
    decorrelation beyond d_v."""
    if r.pearson_min_at_or_below_dv is None:
        below = f"No input has $d_s \\le d_v = {r.d_v}$"
    elif r.c4.identical_at_or_below_dv and not r.c4.deficient_at_or_below_dv:
        below = (
            f"Up to $d_s = d_v = {r.d_v}$ every head of every input has $A_\\text{{eff}} = A$ "
            f"(1 minus the smallest correlation: {1 - r.pearson_min_at_or_below_dv:.1e})"
        )
    elif r.c4.identical_at_or_below_dv:
        below = (
            f"Up to $d_s = d_v = {r.d_v}$ every head with an empty LN(T) has $A_\\text{{eff}} = A$ (smallest "
            f"correlation 1 minus {1 - r.c4.min_at_or_below_dv:.1e}); {r.c4.deficient_at_or_below_dv} "
            "head-input(s) there have a numerically rank-deficient $T$, so a non-empty LN(T), and "
            f"$A_\\text{{eff}} \\ne A$ (smallest correlation {r.pearson_min_at_or_below_dv:.5f})"
        )
    else:
        t = r.table
        worst = t[t.d_s <= r.d_v].nsmallest(1, "pearson").iloc[0]
        n_below = int(((t.d_s <= r.d_v) & (t.pearson <= 1 - 1e-9)).sum())
        below = (
            f"At $d_s \\le d_v = {r.d_v}$, {n_below} head-input(s) have $A_\\text{{eff}} \\ne A$: the smallest "
            f"correlation is {worst.pearson:.5f} (layer {int(worst.layer)}, head {int(worst['head'])}, "
            f"$d_s$ = {int(worst.d_s)})"
        )
    text = (
        f"**Measured.** {below}; {r.null_heads_at_or_below_dv} of {r.heads_at_or_below_dv} head-inputs with "
        "$d_s \\le d_v$ have a non-empty null space (possible only through a numerically rank-deficient $V_h$, "
        "see the precision check below). The null-space dimension equals $\\max(d_s - d_v, 0)$ for "
        f"{100 * r.null_dim_equals_ds_minus_dv:.2f}% of all head-inputs."
    )
    if r.ds_just_above_dv is not None:
        first = (
            f"it is first below 0.9 at $d_s$ = {r.first_ds_median_below_0_9}"
            if r.first_ds_median_below_0_9 is not None
            else "it stays at or above 0.9 at every length measured"
        )
        layers = ", ".join(f"{v:.2f}" for v in r.pearson_median_by_layer_longest)
        text += (
            f" Just above $d_v$ ($d_s$ = {r.ds_just_above_dv}) the median correlation is "
            f"{r.pearson_median_just_above_dv:.2f}; {first}, and at $d_s$ = {r.fig1_longest} it is "
            f"{r.pearson_median_longest:.2f} (layers 1–{len(r.pearson_median_by_layer_longest)}: {layers})."
        )
    return text


def curves_text(r: RawVsEffective) -> str:
    """Figure 1 (a)'s three curves compared length by length from d_s = d_v + 2 on: where the model's median
    correlation lies below each null model's, and the largest gap."""
    med = r.pearson_median_by_length
    lengths = [n for n in r.fig1_lengths if n >= r.d_v + 2]
    if not lengths:
        return f"No input has $d_s \\ge d_v + 2 = {r.d_v + 2}$: the curves cannot be compared beyond $d_v$."
    idx = [r.fig1_lengths.index(n) for n in lengths]
    model = [med["model"][i] for i in idx]
    parts = []
    for name in ("random subspace", "random weights"):
        other = [med[name][i] for i in idx]
        if any(math.isnan(x) for x in other):
            continue
        gaps = [o - m for m, o in zip(model, other)]
        k = max(range(len(gaps)), key=lambda j: gaps[j])
        n_below = sum(g > 0 for g in gaps)
        parts.append(
            f"below the {name} curve at {n_below} of {len(gaps)} lengths"
            + (f" (widest gap {gaps[k]:.2f}, at $d_s$ = {lengths[k]})" if n_below else "")
        )
    return (
        f"From $d_s = d_v + 2 = {r.d_v + 2}$ to {lengths[-1]}, the model's median correlation lies "
        + " and ".join(parts)
        + f". At $d_s$ = {lengths[-1]}: model {model[-1]:.3f}, random subspace {med['random subspace'][idx[-1]]:.3f}."
    )


def null_share_text(r: RawVsEffective) -> str:
    """How much of a raw attention map (Frobenius norm) lies in the null part at the longest length."""
    share = r.null_share_median_longest
    part = "most" if share > 0.5 else "less than half"
    return (
        f"At $d_s$ = {r.fig1_longest}, the median head has {100 * share:.0f}% of its attention matrix's norm in "
        f"the null part: {part} of a raw attention map's norm lies in directions the head's output never sees."
    )


def precision_text(r: PrecisionCheck) -> str:
    ds = ", ".join(map(str, r.precision_rank_difference_ds))
    return (
        f"{r.precision_check_heads} head-inputs with $d_s \\le {r.max_ds}$ recomputed in {r.other}: the "
        f"null-space dimension differs for {r.precision_rank_differences}"
        + (
            f" (at $d_s$ = {ds}: a value matrix whose smallest singular value is below {r.precision}'s tolerance "
            f"but above {r.other}'s; such a direction is at the level of the float32 rounding with which the model "
            "itself computed $V_h$)"
            if r.precision_rank_differences
            else ""
        )
        + f"; the largest change of a correlation is {r.precision_max_pearson_difference:.1e}."
    )


def no_separator_text(r: MassByCategory) -> str:
    """One sentence where the tokenizer adds no separator (or no structural token at all) to a sentence."""
    if not any(c in r.mass_categories for c in STRUCTURAL):
        return (
            "This tokenizer adds neither a start nor a separator token to a sentence: there is no structural "
            "token to compare, and C5 is not testable on this model."
        )
    if SEPARATOR not in r.mass_categories:
        return (
            "This tokenizer adds no separator token to a sentence, so there is no separator mass to compare and "
            "C5 is not testable on this model."
        )
    return ""


def mass_text(r: MassByCategory, min_tokens: int) -> str:
    """Figure 1 (b, c) in words: each structural token's mass raw vs effective, overall and in its peak layer."""
    lines = []
    for c in (c for c in r.mass_categories if c in STRUCTURAL):
        raw, eff = r.mass_mean[c]["raw"], r.mass_mean[c]["effective"]
        per_layer = r.by_layer.xs(c, level="category")
        peak = per_layer.raw.idxmax()
        lines.append(
            f"- **{r.labels[c]}**: mean mass {raw:.3f} raw vs {eff:.3f} effective ({100 * (eff / raw - 1):+.0f}%); "
            f"in layer {peak}, where its raw mass peaks, {per_layer.raw[peak]:.3f} vs {per_layer.effective[peak]:.3f}."
        )
    for c in (c for c in r.mass_categories if c in (PUNCTUATION, OTHER)):
        lines.append(f"- **{c}**: {r.mass_mean[c]['raw']:.3f} raw vs {r.mass_mean[c]['effective']:.3f} effective.")
    missing = no_separator_text(r)
    return (
        f"**Measured on {r.mass_sentences} sentences of {min_tokens}+ tokens.**\n\n"
        + "\n".join(lines)
        + (f"\n\n{missing}" if missing else "")
    )


def separators_text(r: PairSeparators | None, corpus: str) -> str:
    """The mass on the two separators of a sentence pair in words, or why there are none to measure."""
    if r is None:
        return f"No sentence pair of `{corpus}` is longer than $d_v$ within `max_tokens`: no pair was measured."
    if not r.pairs:
        return "No pair holds two separator tokens: this tokenizer does not mark where the second segment begins."
    m = r.means
    return (
        f"On {r.pairs} sentence pairs of `{corpus}`: the separator between the segments receives "
        f"{m.loc['first', 'raw']:.3f} of a query's attention raw and {m.loc['first', 'effective']:.3f} effective; "
        f"the final one {m.loc['second', 'raw']:.3f} raw and {m.loc['second', 'effective']:.3f} effective (means "
        "over layers, heads and queries)."
    )


def c5_text(categories: Sequence[C5Category], peak: float = C5_PEAK) -> str:
    """Which special token carries this model's attention sink, and each category's peak and summed-mass
    ratios: what C5 judges and what it cannot."""
    if not categories:
        return "This tokenizer adds no start or separator token: there is no special-token peak to measure."
    sink = sink_of(categories)
    lines = [
        f"- **{c.label}** on {c.inputs}: raw mass per query row {c.peak:.1f}x the uniform share"
        + (" (a peak)" if c.peak >= peak else f" (below {peak:g}x: no peak)")
        + f"; effective / raw summed mass {c.ratio.estimate:.2f} (random subspace {c.random:.2f})"
        for c in categories
    ]
    where = (
        f"This model's attention sink is **{sink.label}**: its raw mass per query row is {sink.peak:.1f}x the "
        "uniform share 1/$d_s$"
        + (", the largest of the special tokens." if sink.peak >= peak else ", but no special token reaches a peak.")
    )
    return where + "\n\n" + "\n".join(lines)


def page_text(page: dict[str, int], r: ViewerExamples, n_layers: int, n_heads: int, digits: int) -> str:
    """The page weight of the largest charts (bytes of their specs), and how many cells the viewer ships in
    units of 10^-``digits`` (the head viewer's, :data:`identifiability.charts.effective_attention.VIEWER_DIGITS`)."""
    cells = sum(n * n for n in r.viewer_lengths) * n_layers * n_heads
    unit = {1: "tenths", 2: "hundredths", 3: "thousandths"}.get(digits, f"units of 10^-{digits}")
    return (
        f"Page weight of this chapter's largest charts: Figure 1 (a) {page['figure_1a'] / 1e3:.0f} kB, head viewer "
        f"{page['head_viewer'] / 1e6:.2f} MB ({cells:,} attention cells of raw attention and of its null part, "
        f"shipped as integers in {unit}; the effective attention is computed in the browser)."
    )
