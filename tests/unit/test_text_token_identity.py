"""Chapter 4's words (identifiability.text.token_identity): each wording, from numbers on each side of the
branch that chooses it."""

from __future__ import annotations

import math
from types import SimpleNamespace as NS

import pandas as pd
import pytest
import torch

from identifiability.base.stats import Interval
from identifiability.studies import token_identity as study
from identifiability.text import token_identity as prose
from identifiability.verdicts.token_identity import C6Evidence

from .test_text import stand_ins_match

NO_BOUNDS = Interval(0.5, math.nan, math.nan, 1)


def test_probe_table_writes_epochs_as_a_range_and_no_negative_zero():
    overview = pd.DataFrame(
        {
            "mapping": ["linear", "mlp"],
            "loss": ["cos", "l2"],
            "probes": [13.0, 13.0],
            "stopped_early": [12.0, 13.0],
            "epochs_run": [20.5, 31.0],
            "best_epoch_min": [4.0, 7.0],
            "best_epoch_max": [4.0, 19.0],
            "val_loss_first": [-0.0001, 0.25],
            "val_loss_last": [0.1234, 0.5],
        }
    ).set_index(["mapping", "loss"])
    html = prose.probe_table(overview).to_html()
    assert ">4<" in html and ">7–19<" in html  # one epoch kept, or a range
    assert ">0.000<" in html and "-0.000" not in html and ">0.123<" in html
    assert ">20.5<" in html and ">13<" in html and "epoch kept" in html


def test_model_text_says_bidirectional_or_causal():
    assert prose.model_text("bert", False) == "bert is bidirectional: every $e_i^l$ can draw on the whole sentence."
    causal = prose.model_text("gpt2", True)
    assert causal.startswith("**This model is causal (gpt2).** The question and the candidate set are unchanged")


def test_sample_text_counts_the_split():
    r = NS(
        n_sentences_used=60,
        n_tokens_all=900,
        hs=NS(special=torch.tensor([True, False, True])),
        n_layers=6,
        split_sizes={"train": {"sentences": 40, "tokens": 500}, "test": {"sentences": 20, "tokens": 280}},
        split_sentence_overlap=0,
    )
    assert prose.sample_text(r) == (
        "60 sentences, 900 tokens (2 special), 7 hidden states each; split (sentences/tokens, special tokens left "
        "out): train 40/500, test 20/280; 0 sentences in both train and test."
    )


def _probes(at_cap: int, levels_off: int | None) -> NS:
    return NS(
        probes_stopped_early=26 - at_cap,
        probes_trained=26,
        patience=5,
        epoch_cap=60,
        probes_at_cap=at_cap,
        levels_off_at_cap=levels_off,
        level_tol=0.005,
    )


def test_training_text_says_whether_capped_probes_levelled_off():
    done = prose.training_text(_probes(0, None))
    assert done == (
        "Early stopping triggered for 26 of the 26 trained probes (5 epochs without a better validation loss, within "
        "the cap of 60 epochs). Every probe was trained until its validation loss stopped improving."
    )
    levelled = prose.training_text(_probes(3, 55))  # 55 = cap - patience: still levelled off
    assert "**3 reached the cap** before their validation loss stopped improving; the chart below" in levelled
    assert "stay within 0.5% of their last value from epoch 55 on at the latest" in levelled
    for moving in (prose.training_text(_probes(3, 56)), prose.training_text(_probes(3, None))):
        assert (
            "and their validation rate had not levelled off either (it still moved by more than 0.5% in the last 5 "
            "epochs" in moving
        )


def _c6(over: Interval) -> NS:
    return NS(rate=Interval(0.9, 0.85, 0.95, 20), over_position=over, position_rate=0.2, shuffled_rate=0.1, chance=0.05)


def _claims(over: Interval, seeds: list[bool]) -> NS:
    return NS(
        c6=_c6(over),
        c6_seed_rates=[0.88, 0.92, 0.9],
        seed_training={"stopped early": seeds} if seeds else {},
        unseen=Interval(0.7, 0.6, 0.8, 20),
        c6_unseen_tokens=42,
        last_rate=Interval(0.9, 0.85, 0.95, 20),
    )


def test_c6_text_places_the_probe_above_or_below_the_position_lookup():
    up = prose.c6_text(_claims(Interval(0.7, 0.65, 0.75, 20), [True, False]))
    assert up.startswith(
        "At the last layer the linear cosine probe identifies 90.0% of a test sentence's tokens on average (its 3 "
        "training seeds: 88.0% to 92.0%)."
    )
    assert (
        "The probe lies 70.0% above the position-only lookup per sentence (95% interval of the difference +65.0% to "
        "+75.0%)." in up
    )
    assert up.endswith(" Early stopping triggered for 1 of the 2 probes of the extra seeds.")
    down = prose.c6_text(_claims(Interval(-0.1, math.nan, math.nan, 1), []))
    assert "The probe lies 10.0% below the position-only lookup per sentence (no interval)." in down
    assert "extra seeds" not in down


def test_unseen_text_gives_the_interval_when_there_is_one():
    text = prose.unseen_text(_claims(Interval(0.7, 0.65, 0.75, 20), []))
    assert text == (
        "On the 42 test tokens whose word type never occurs in the training sentences the same probe identifies 70.0% "
        "(95% interval 60.0% to 80.0%), against 90.0% on all test tokens."
    )
    few = _claims(Interval(0.7, 0.65, 0.75, 20), [])
    few.unseen = NO_BOUNDS
    assert "(too few sentences for an interval)" in prose.unseen_text(few)


def _ident(drop: int | None, best_mapping: str = "linear") -> NS:
    return NS(
        n_layers=6,
        chance_sentence=0.05,
        chance_all=0.0004,
        linear_cos_cos_last=0.9,
        paper_last_layer=0.93,
        mlp_cos_cos_last=0.85,
        naive_cos_last=0.6,
        naive_l2_last=0.5,
        naive_cos_first_layer_below_99=drop,
        test_tokens=500,
        linear_cos_cos_last_all=0.8,
        best_last={"mapping": best_mapping, "loss": "cos", "lookup": "cos", "rate": 0.91},
        mean_train_test_gap=0.02,
        max_train_test_gap=0.05,
    )


def test_last_layer_caption_states_both_chances():
    assert prose.last_layer_caption(_ident(3)) == (
        "Test identifiability at the last layer (6); chance 0.050 (same sentence) and 0.00040 (all tokens)."
    )


@pytest.mark.parametrize(
    ("drop", "words"),
    [
        (3, "The identity map is above 99 % up to layer 2 and drops from layer 3 on. "),
        (None, "The identity map is above 99 % at every layer. "),
        (0, "The identity map is below 99 % already at layer 0. "),
    ],
)
def test_identification_text_says_where_the_identity_map_drops(drop, words):
    assert words in prose.identification_text(_ident(drop))


def test_identification_text_names_the_best_probe():
    assert "The best last-layer combination is linear / cos loss / cos lookup (91.0%)." in prose.identification_text(
        _ident(3)
    )
    naive = prose.identification_text(_ident(3, best_mapping="naive"))
    assert "The best last-layer combination is the identity map with cos lookup (91.0%)." in naive


def test_generalisation_text_states_the_three_averages():
    r = NS(
        gen_linear_cos_diag_mean=0.9,
        gen_linear_cos_neighbour_mean=0.7,
        gen_linear_cos_offdiag_mean=0.3,
        gen_linear_cos_last_on_first=0.2,
        gen_linear_cos_first_on_last=0.1,
    )
    text = prose.generalisation_text(r)
    assert text.startswith(
        "For the linear cosine probe the diagonal (trained and tested on the same layer) averages 90.0%, the adjacent "
        "layers 70.0% and all off-diagonal cells 30.0%."
    )
    assert "embeddings finds 20.0%; the layer-0 probe applied to the last layer 10.0%." in text


def _neighbours(same: float) -> NS:
    return NS(
        linear_cos_last_miss=0.2,
        adjacent=0.5,
        linear_cos_last_miss_within_3=0.15,
        adjacent_uniform=0.1,
        uniform_misses_by_offset={-1: 0.05, 1: 0.05, 2: 0.1},
        position_only_adjacent=0.3,
        linear_cos_last_miss_same_word=same,
    )


def test_neighbour_text_says_whether_the_misses_are_the_same_word():
    mostly = prose.neighbour_text(_neighbours(0.6))
    assert "Of these misses 50% land on an immediate neighbour ($k=\\pm1$) and 75% within three positions" in mostly
    assert mostly.endswith(
        "60% of the misses retrieve **the same word at another position** of the sentence (a repeated 'the', ',' or "
        "'to'): what the last layer loses is mostly the position, not the word."
    )
    rarely = prose.neighbour_text(_neighbours(0.4))
    assert rarely.endswith("40% of the misses retrieve **the same word at another position** of the sentence.")


def test_second_corpus_text_says_whether_the_curves_keep_their_shape():
    second = NS(
        second_corpus_name="wiki",
        second_sentences=40,
        second_test_tokens=300,
        second_linear_cos_cos_last=0.85,
        second_transfer_linear_cos_cos_last=0.8,
    )
    close = prose.second_corpus_text(second, _ident(3), "lee")
    assert close.startswith(
        "On `wiki` (40 sentences, 300 test tokens) the linear cosine probe identifies 85.0% at the last layer when "
        "trained on it and 80.0% when trained on `lee` (there: 90.0%)."
    )
    assert close.endswith("The curves keep their shape across corpora, as in the paper's appendix.")
    second.second_linear_cos_cos_last = 0.7  # 0.2 from the first corpus's 0.9
    assert prose.second_corpus_text(second, _ident(3), "lee").endswith(
        "The corpora differ noticeably here; the smaller training set of the second corpus is one reason."
    )


def test_the_stand_ins_have_the_fields_of_the_study_types():
    pairs = [
        (_probes(0, None), study.ProbesResult),
        (_c6(NO_BOUNDS), C6Evidence),
        (_claims(NO_BOUNDS, []), study.ClaimsResult),
        (_ident(3), study.IdentificationResult),
        (_neighbours(0.5), study.NeighbourResult),
        (
            NS(n_sentences_used=1, n_tokens_all=1, hs=None, n_layers=1, split_sizes={}, split_sentence_overlap=0),
            study.SampleResult,
        ),
        (NS(gen_linear_cos_diag_mean=0.0, gen_linear_cos_first_on_last=0.0), study.GeneralisationResult),
        (NS(second_corpus_name="", second_transfer_linear_cos_cos_last=0.0), study.SecondCorpusResult),
    ]
    assert stand_ins_match(pairs) == []
