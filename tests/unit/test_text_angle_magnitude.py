"""Chapter 5's words (identifiability.text.angle_magnitude): each wording, from numbers on each side of the
branch that chooses it."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pandas as pd

from identifiability.studies import angle_magnitude as study
from identifiability.text import angle_magnitude as prose

from .test_text import stand_ins_match


def test_norm_model_text_follows_the_attention_direction_and_the_layer_norm():
    post = prose.norm_model_text("bert", False, False)
    assert post.startswith("bert is post-LayerNorm: every layer ends with a LayerNorm")
    assert "causal" not in post and "Pre-LayerNorm" not in post
    pre = prose.norm_model_text("gpt2", True, True)
    assert pre.startswith("**gpt2 is causal:** the candidate set is unchanged")
    assert " **Pre-LayerNorm model:** the residual stream is never renormalised" in pre and "post-LayerNorm" not in pre
    causal_post = prose.norm_model_text("opt", True, False)
    assert causal_post.startswith("**opt is causal:**") and " opt is post-LayerNorm" in causal_post


def _sample(cached: bool) -> NS:
    return NS(n_sentences_used=60, splits={"train": NS(n=500)}, test_tokens=200, probes_from_cache=cached, n_layers=2)


def test_probe_sample_text_says_where_the_probes_came_from():
    assert (
        prose.probe_sample_text(_sample(False))
        == "60 sentences, 500 training and 200 test tokens; linear probes trained"
    )
    assert prose.probe_sample_text(_sample(True)).endswith("linear probes read from the cache")


def _cos_l2() -> NS:
    return NS(
        linear_cos_cos=[1.0, 0.9, 0.8],
        linear_l2_l2=[1.0, 0.8, 0.7],
        cos_beats_l2_layers_linear=2,
        cos_at_least_l2_layers_linear=3,
        cos_minus_l2_linear_mean=0.0667,
        naive_cos=[1.0, 0.7, 0.5],
        naive_l2=[1.0, 0.6, 0.4],
        cos_beats_l2_layers_naive=2,
        cos_at_least_l2_layers_naive=3,
        chance=0.05,
    )


def test_cosine_l2_text_states_both_maps():
    text = prose.cosine_l2_text(_cos_l2())
    assert text.startswith(
        "Linear map, cosine loss and cosine lookup vs L2 loss and L2 lookup: 80.0% vs 70.0% at the last layer; cosine "
        "is strictly ahead at 2 and at least as good at 3 of 3 layers, by 6.7% on average. The identity map: 50.0% "
        "(cosine) vs 40.0% (L2) at the last layer"
    )


def _ablations(**kw) -> NS:
    base = dict(
        unit_linear_cos_cos=[1.0, 0.85, 0.78],
        unit_minus_original_max_abs=0.02,
        unit_minus_original_min=-0.02,
        norm_only_best_max=0.1,
        norm_only_best_max_layer=1,
        rescale_max=4.0,
        rescale_naive_cos_max_change=0.0,
        rescale_drop_naive_l2_mean=0.3,
        rescale_drop_linear_cos_last=0.05,
        rescale_drop_linear_l2_last=0.2,
    )
    return NS(**(base | kw))


def test_ablation_caption_names_the_last_layer_and_chance():
    assert prose.ablation_caption(_ablations(), 0.05) == (
        "Test identifiability at the last layer (2); the 'rescaled' column holds the identity map's value in its "
        "own rows (— where a column does not apply); chance 0.050."
    )


def test_ablation_text_angle_only_costs_next_to_nothing_or_something():
    cheap = prose.ablation_text(_ablations(unit_minus_original_min=-0.0299), _cos_l2())
    assert "identifies 78.0% at the last layer (original 80.0%)" in cheap
    assert "Throwing the length away costs next to nothing." in cheap
    costly = prose.ablation_text(_ablations(unit_minus_original_min=-0.03), _cos_l2())
    assert "Throwing the length away costs something: the length carries part of the identity." in costly


def test_ablation_text_magnitude_only_is_useless_or_not():
    useless = prose.ablation_text(_ablations(norm_only_best_max=0.149), _cos_l2())  # below 3 x chance 0.05
    assert "the best MLP reaches 14.9% (layer 1; chance 5.0%). The length is close to useless for identity." in useless
    useful = prose.ablation_text(_ablations(norm_only_best_max=0.16), _cos_l2())
    assert "The length is not useless — it tells the probe something" in useful
    assert "at that layer the direction alone identifies 85.0%." in useful


def test_ablation_text_the_cosine_lookup_ignores_a_rescaling():
    same = prose.ablation_text(_ablations(), _cos_l2())
    assert "(factors in [1/4, 4]). The identity map with cosine lookup is unchanged (largest change 0.0%" in same
    changed = prose.ablation_text(_ablations(rescale_naive_cos_max_change=0.012), _cos_l2())
    assert "The identity map with cosine lookup changes by at most 1.2% (largest change 1.2%" in changed
    assert "with L2 lookup it loses 30.0% on average. The linear cosine probe loses 5.0% at the last layer" in same


def _norms_angles() -> NS:
    angles = pd.DataFrame(
        {"median": [0.0, 30.0, 50.0], "other_mean": [80.0, 85.0, 87.0], "closest_share": [1.0, 0.9, 0.6]}
    )
    return NS(norm_median=[1.0, 2.5, 10.0], norm_spread_last=3.25, angles=angles, angle_increasing_layers=2)


def test_norms_angles_text_states_norms_and_angles():
    assert prose.norms_angles_text(_norms_angles()) == (
        "Hidden-embedding norms: median 1.00 at the input and 10.00 at layer 2; at the last layer the 95th percentile "
        "is 3.2× the 5th. The angle between $e_i^l$ and its own $x_i$ goes from 0° at the input to a median of 50° at "
        "layer 2 (it grows at 2 of 2 steps), while the other tokens' input embeddings stay at about 86° on average. "
        "The own $x_i$ remains the angularly closest for 60.0% of tokens at the last layer — that share *is* the "
        "identity map's cosine rate."
    )


def test_c8_text_states_what_c8_is_judged_on():
    c8 = NS(c8_unit_norm_rate_last=0.79, c8_norm_spread_last=0.25)
    assert prose.c8_text(c8, _ablations(), _cos_l2()) == (
        "**Measured.** Unit vectors alone give 78.0% at the last layer against 80.0% with lengths kept; lengths alone "
        "give at most 10.0% (chance 5.0%); unit vectors with the length as one more input give 79.0%. The relative "
        "spread of the norms at the last layer (interquartile range over median) is 25.0%."
    )


def test_the_stand_ins_have_the_fields_of_the_study_types():
    pairs = [
        (_sample(True), study.ProbeSample),
        (_cos_l2(), study.CosineL2),
        (_ablations(), study.Ablations),
        (_norms_angles(), study.NormsAngles),
        (NS(c8_unit_norm_rate_last=0.0, c8_norm_spread_last=0.0), study.C8Result),
    ]
    assert stand_ins_match(pairs) == []
