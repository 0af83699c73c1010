"""Chapter 5's text (angle versus magnitude): each sentence that states a finding, from a study result of
:mod:`identifiability.studies.angle_magnitude`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..studies.angle_magnitude import Ablations, C8Result, CosineL2, NormsAngles, ProbeSample


def norm_model_text(family: str, causal: bool, pre_ln: bool) -> str:
    """What the model's architecture does to hidden-state norms (chapter 5)."""
    notes = []
    if causal:
        notes.append(
            f"**{family} is causal:** the candidate set is unchanged (token $i$ from $e_i^l$ among its sentence's "
            "input embeddings), but $e_i^l$ only mixes in tokens $\\le i$."
        )
    if pre_ln:
        notes.append(
            "**Pre-LayerNorm model:** the residual stream is never renormalised between layers (only at the very "
            "end), so hidden-state norms can grow with depth; where they do, the L2 rows and the norm plots below "
            "show that growth, and the unit-vector ablation removes it."
        )
    else:
        notes.append(
            f"{family} is post-LayerNorm: every layer ends with a LayerNorm, which gives every $e_i^l$ the same norm "
            "before its learned gain and bias; only these let the norms differ (the norm plots below show by how "
            "much)."
        )
    return " ".join(notes)


def probe_sample_text(r: ProbeSample) -> str:
    """The sample and where its probes came from."""
    source = "read from the cache" if r.probes_from_cache else "trained"
    return (
        f"{r.n_sentences_used} sentences, {r.splits['train'].n} training and {r.test_tokens} test tokens; "
        f"linear probes {source}"
    )


def cosine_l2_text(r: CosineL2) -> str:
    """The paper's evidence: cosine against L2, for the linear and the identity map."""
    n = len(r.linear_cos_cos)
    return (
        f"Linear map, cosine loss and cosine lookup vs L2 loss and L2 lookup: {r.linear_cos_cos[-1]:.1%} vs "
        f"{r.linear_l2_l2[-1]:.1%} at the last layer; cosine is strictly ahead at {r.cos_beats_l2_layers_linear} "
        f"and at least as good at {r.cos_at_least_l2_layers_linear} of {n} layers, by "
        f"{r.cos_minus_l2_linear_mean:.1%} on average. The identity map: {r.naive_cos[-1]:.1%} (cosine) vs "
        f"{r.naive_l2[-1]:.1%} (L2) at the last layer, cosine strictly ahead at {r.cos_beats_l2_layers_naive} and "
        f"at least as good at {r.cos_at_least_l2_layers_naive} of {n} layers. The paper reads cosine ahead of L2 "
        "as 'identity lives in the angle'. The comparison is indirect: an L2 lookup also penalises a length "
        "mismatch that a linear map could undo, so the ablations below test the claim directly."
    )


def ablation_caption(r: Ablations, chance: float) -> str:
    """The caption of the last layer's table of ablations."""
    return (
        f"Test identifiability at the last layer ({len(r.unit_linear_cos_cos) - 1}); the 'rescaled' column holds "
        f"the identity map's value in its own rows (— where a column does not apply); chance {chance:.3f}."
    )


def ablation_text(r: Ablations, c: CosineL2) -> str:
    """What each ablation keeps, against the raw probes of ``c``."""
    naive_cos = (
        "is unchanged"
        if r.rescale_naive_cos_max_change == 0
        else f"changes by at most {r.rescale_naive_cos_max_change:.1%}"
    )
    return (
        f"* **Angle only.** Trained and looked up on unit vectors, the linear map identifies "
        f"{r.unit_linear_cos_cos[-1]:.1%} at the last layer (original {c.linear_cos_cos[-1]:.1%}); the two curves "
        f"differ by at most {r.unit_minus_original_max_abs:.1%} over all layers. Throwing the length away costs "
        + (
            "next to nothing."
            if r.unit_minus_original_min > -0.03
            else "something: the length carries part of the identity."
        )
        + f"\n* **Magnitude only.** From $\\lVert e_i^l\\rVert$ alone the best MLP reaches "
        f"{r.norm_only_best_max:.1%} (layer {r.norm_only_best_max_layer}; chance {c.chance:.1%}). "
        + (
            "The length is close to useless for identity."
            if r.norm_only_best_max < 3 * c.chance
            else "The length is not useless — it tells the probe something (perhaps about position or word "
            "frequency; see exercise 2): at that layer the direction alone identifies "
            f"{r.unit_linear_cos_cos[r.norm_only_best_max_layer]:.1%}."
        )
        + f"\n* **Rescaling at test time** (factors in [1/{r.rescale_max:g}, {r.rescale_max:g}]). The identity map "
        f"with cosine lookup {naive_cos} (largest change {r.rescale_naive_cos_max_change:.1%}; a cosine ignores "
        f"lengths); with L2 lookup it loses {r.rescale_drop_naive_l2_mean:.1%} on average. The linear cosine "
        f"probe loses {r.rescale_drop_linear_cos_last:.1%} at the last layer (its bias and the input "
        f"standardisation are not scale-free), the linear L2 probe {r.rescale_drop_linear_l2_last:.1%}."
    )


def norms_angles_text(r: NormsAngles) -> str:
    """Norms and angles at the input and at the last layer."""
    L = len(r.norm_median) - 1
    return (
        f"Hidden-embedding norms: median {r.norm_median[0]:.2f} at the input and {r.norm_median[-1]:.2f} at "
        f"layer {L}; at the last layer the 95th percentile is {r.norm_spread_last:.1f}× the 5th. The angle "
        f"between $e_i^l$ and its own $x_i$ goes from {r.angles['median'].iloc[0]:.0f}° at the input to a median "
        f"of {r.angles['median'].iloc[-1]:.0f}° at layer {L} (it grows at {r.angle_increasing_layers} of {L} "
        f"steps), while the other tokens' input embeddings stay at about "
        f"{r.angles.other_mean.iloc[1:].mean():.0f}° on average. The own $x_i$ remains the angularly closest for "
        f"{r.angles.closest_share.iloc[-1]:.1%} of tokens at the last layer — that share *is* the identity map's "
        "cosine rate."
    )


def c8_text(r: C8Result, a: Ablations, c: CosineL2) -> str:
    """What claim C8 is judged on, in words."""
    return (
        f"**Measured.** Unit vectors alone give {a.unit_linear_cos_cos[-1]:.1%} at the last layer against "
        f"{c.linear_cos_cos[-1]:.1%} with lengths kept; lengths alone give at most {a.norm_only_best_max:.1%} "
        f"(chance {c.chance:.1%}); unit vectors with the length as one more input give "
        f"{r.c8_unit_norm_rate_last:.1%}. The relative spread of the norms at the last layer (interquartile range "
        f"over median) is {r.c8_norm_spread_last:.1%}."
    )
