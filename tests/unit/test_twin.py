"""The untrained twin (issue 32): the same architecture with fresh initial weights, judged beside the model,
never folded into its verdict."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from identifiability.book.notebook import Chapter
from identifiability.chapters.contract import by_name
from identifiability.evidence.nonidentifiability import C15Evidence
from identifiability.models.load import twin_of
from identifiability.verdicts import FAILS, HOLDS, Quantity, Verdict, render_twin, twin_difference

pytestmark = pytest.mark.unit


def test_the_twin_is_the_architecture_with_the_initialisers_weights_under_its_seed(tiny_lm):
    from transformers import AutoModel

    before = torch.random.get_rng_state()
    twin = twin_of(tiny_lm, seed=3)
    assert torch.equal(torch.random.get_rng_state(), before), "building a twin moved the chapter's random draws"
    assert twin.model.config.to_dict() == tiny_lm.model.config.to_dict() and twin.tokenizer is tiny_lm.tokenizer
    torch.manual_seed(3)
    expected = AutoModel.from_config(tiny_lm.model.config, attn_implementation="eager").state_dict()
    got = twin.model.state_dict()
    assert all(torch.equal(got[k], expected[k]) for k in expected)
    other = twin_of(tiny_lm, seed=4)
    assert not torch.equal(
        got["encoder.layer.0.attention.self.query.weight"],
        other.model.state_dict()["encoder.layer.0.attention.self.query.weight"],
    )
    # filed apart from the model: caches and results keyed by it never mix the two
    assert twin.key != tiny_lm.key and twin.content_key != other.content_key
    assert twin.provenance["seed"] == 3 and "untrained twin" in twin.name
    with torch.no_grad():
        out = twin.model(**tiny_lm.tokenizer(["a short sentence"], return_tensors="pt"))
    assert torch.isfinite(out.last_hidden_state).all()


Q = Quantity("own-token share at the last layer minus at layer 1", r"s^L - s^1")


def test_trained_minus_twin_combines_the_half_widths_in_quadrature():
    trained = Verdict("C9", HOLDS, -0.3, (-0.35, -0.25), 0.1, "", "r", "why", estimate_of=Q)
    twin = Verdict("C9", FAILS, 0.1, (0.0, 0.2), 0.1, "", "r", "why", estimate_of=Q)
    d = twin_difference(trained, twin)
    assert d.estimate == pytest.approx(-0.4)
    assert d.high - d.estimate == pytest.approx(math.hypot(0.05, 0.1))
    text = render_twin(trained, twin, "20 sentences, estimated HTA")
    assert text.startswith("*C9 on the untrained twin* (the same architecture with random initial weights, one ")
    assert "**fails**" in text and "20 sentences, estimated HTA" in text
    assert "*Trained minus twin, the learned part:* -0.400 (95% interval -0.512 to -0.288" in text
    other = Verdict("C9", FAILS, 0.1, (0.0, 0.2), 0.1, "", "r", "why", estimate_of=Quantity("another"))
    assert twin_difference(trained, other) is None and "Trained minus twin" not in render_twin(trained, other, "x")
    assert twin_difference(trained, Verdict("C9", FAILS, None, None, None, "", "r", "no estimate")) is None
    with pytest.raises(ValueError, match="C8"):
        render_twin(trained, Verdict("C8", FAILS, 0.1, (0, 0.2), None, "", "r", "w"), "x")


def _c15() -> C15Evidence:
    """C15's evidence on two inputs, enough for a verdict."""
    table = pd.DataFrame(
        {"dim_LN_T": [0, 1], "bound_T": [0, 1], "dim_LN_T1": [0, 0], "bound_T1": [0, 0],
         "kept_min_T": [0.5, 0.5], "kept_min_T1": [0.5, 0.5], "d_s": [3, 5], "layer": [1, 1], "head": [0, 0],
         "text": [0, 1]}
    )  # fmt: skip
    return C15Evidence(table, 4)


def test_a_twin_verdict_is_recorded_apart_from_the_models(tiny_lm, tmp_path):
    """judge_twin checks the verdict as judge does, and files it under ``twin_claims``: the claims page's twin
    column, never the model's own verdict."""
    ch = Chapter(by_name("nonidentifiability").stem, tiny_lm, None, {"seed": 2}, tmp_path)
    v = ch.judge_twin("C15", _c15())
    assert set(ch.results) >= {"twin_claims"} and "claims" not in ch.results
    assert ch.results["twin_claims"]["C15"]["verdict"] == v.verdict
    assert ch.twin.provenance["seed"] == 2 and ch.results["twin"]["seed"] == 2 and ch.twin is ch.twin
    with pytest.raises(KeyError, match="C4"):
        ch.judge_twin("C4", None)


def test_a_verdict_on_another_model_is_recorded_apart_and_worded_without_the_claims_anchor(tiny_lm, tmp_path):
    """judge_on checks the verdict as judge does and files it under ``other_claims`` by the other model's name;
    its sentence leaves out the anchor the page's own verdict carries (an HTML id is unique on a page)."""
    ch = Chapter(by_name("nonidentifiability").stem, tiny_lm, None, {"seed": 2}, tmp_path)
    v = ch.judge_on("C15", _c15(), "member")
    assert set(ch.results) == {"other_claims"}
    assert ch.results["other_claims"]["member"]["C15"]["verdict"] == v.verdict
    assert 'id="verdict-c15"' in ch.sentence(v) and "id=" not in ch.sentence(v, anchor_=False)
    with pytest.raises(KeyError, match="C4"):
        ch.judge_on("C4", None, "member")


def test_the_chapter_words_each_twin_verdict_beside_its_claims(tiny_lm, tmp_path):
    ch = Chapter(by_name("context_mixing").stem, tiny_lm, None, {}, tmp_path)
    trained = [Verdict(c, HOLDS, -0.3, (-0.35, -0.25), 0.1, "", "r", "why", estimate_of=Q) for c in ("C9", "C11")]
    twins = [Verdict("C11", FAILS, 0.1, (0.0, 0.2), 0.1, "", "r", "why twin", estimate_of=Q)]
    text = ch.twins_text(trained, twins, "20 sentences")
    assert (
        text.startswith("*C11 on the untrained twin*") and "C9" not in text and "*Why, on the twin:* why twin." in text
    )
    both = ch.verdicts_text(trained, twins, "20 sentences")
    assert both.index('id="verdict-c9"') < both.index('id="verdict-c11"') < both.index("*C11 on the untrained twin*")
