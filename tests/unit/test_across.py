"""The comparison across models: roles from provenance, comparable rows, the original (unpaired) rules of the
fine-tuning claims C13 and C14 on synthetic results tables whose answer is known, and the page's text about
C13's power and the reference model. The amended, paired rules are run on controls in
``test_verdict_controls_across_models.py``."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from identifiability.base.stats import Interval, unpaired_difference
from identifiability.chapters.contract import by_name
from identifiability.runs import aggregate, model_comparison
from identifiability.text.across_models import claims_markdown
from identifiability.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_RUN, PARTLY
from identifiability.verdicts.across_models import judge_c13_original, judge_c14_original
from identifiability.verdicts.claims import load_claims

RULES = {c["id"]: c["original_rule"] for c in load_claims()}


def test_difference_combines_half_widths_in_quadrature():
    d = unpaired_difference(Interval(0.9, 0.87, 0.93), Interval(0.8, 0.76, 0.84))
    assert d.estimate == pytest.approx(0.1) and d.high - d.estimate == pytest.approx(math.hypot(0.03, 0.04))


def _iv(x: float, h: float = 0.01) -> Interval:
    return Interval(x, x - h, x + h)


@pytest.mark.parametrize(
    "diffs, expected",
    [
        ({"a": _iv(0.01), "b": _iv(-0.02)}, HOLDS),
        ({"a": _iv(0.01), "b": _iv(-0.2)}, FAILS),
        ({"a": _iv(0.045)}, INCONCLUSIVE),
        ({}, NOT_RUN),
    ],
)
def test_c13_original(diffs, expected):
    v = judge_c13_original(diffs, _iv(-0.5), RULES["C13"])
    assert v.verdict == expected and v.rule == RULES["C13"]
    if diffs:
        assert len(v.parts) == len(diffs) and v.baseline == -0.5


def _layers(values, h=0.01):
    return [_iv(x, h) for x in values]


@pytest.mark.parametrize(
    "values, expected",
    [
        ([0.0, 0.01, 0.02, 0.1, 0.3, 0.4], HOLDS),  # grows to the last layer
        ([0.4, 0.3, 0.1, 0.02, 0.01, 0.0], FAILS),  # the first layers change most
        ([0.1, 0.0, 0.0, 0.5, 0.0, 0.05], PARTLY),  # peak late, but the last layer changes less than the first
        ([0.10, 0.5, 0.0, 0.0, 0.0, 0.105], INCONCLUSIVE),  # last vs first within noise, peak early
    ],
)
def test_c14_original(values, expected):
    v = judge_c14_original({"ft": _layers(values)}, _layers([0.5] * 6), RULES["C14"])
    assert v.verdict == expected, v.reason
    assert judge_c14_original({}, None, RULES["C14"]).verdict == NOT_RUN


def _model(folder, kind, task=None):
    folder.mkdir()
    (folder / "provenance.json").write_text(json.dumps({"kind": kind, **({"task": task} if task else {})}))
    return str(folder)


def _doc(model: str, key: str, rates: list[float], c6: float, n_sentences: int = 10) -> dict:
    return {
        "chapter": by_name("token_identity").stem,
        "params": {"model": model, "corpus": "lee", "seed": 0, "n_sentences": n_sentences},
        "provenance": {"key": key, "content_key": key},
        "results": {
            "claims": {"C6": {"estimate": c6, "ci95": [c6 - 0.01, c6 + 0.01], "verdict": "holds", "parts": []}},
            "linear_cos_cos_by_layer": rates,
            "linear_cos_cos_ci95_by_layer": [[r - 0.01, r + 0.01] for r in rates],
        },
    }


def test_quadrature_inputs_from_a_results_table(tmp_path):
    ft = _model(tmp_path / "ft", "fine-tuned", "sentiment")
    rnd = _model(tmp_path / "rnd", "random-init")
    docs = [
        _doc("all-MiniLM-L6-v2", "ref", [1.0, 1.0, 0.99, 0.95], 0.95),
        _doc(ft, "ft", [1.0, 1.0, 0.98, 0.85], 0.86),
        _doc(rnd, "rnd", [1.0, 0.5, 0.2, 0.1], 0.1),
        _doc(ft, "ft", [0.0, 0.0, 0.0, 0.0], 0.0, n_sentences=3),  # other parameters: not compared
    ]
    rows = pd.DataFrame([r for i, d in enumerate(docs) for r in aggregate.rows_of(d, "sweep", f"run{i}")])
    comparable = model_comparison.comparable(rows)
    assert set(comparable.run) == {"run0", "run1", "run2"}
    models = model_comparison.models_of(comparable)
    assert list(models.role) == ["pre-trained", "fine-tuned: sentiment", "random init"]
    inputs = model_comparison.quadrature_inputs(comparable, models, "lee")
    assert inputs["last"]["ft"].estimate == pytest.approx(-0.09)
    assert [d.estimate for d in inputs["layers"]["ft"]] == pytest.approx([0.0, -0.01, -0.10])  # layers 1..3
    assert inputs["control_last"].estimate == pytest.approx(-0.85)
    assert judge_c13_original(inputs["last"], inputs["control_last"], RULES["C13"]).verdict == FAILS
    assert judge_c14_original(inputs["layers"], inputs["control_layers"], RULES["C14"]).verdict == HOLDS
    curves = model_comparison.curves(comparable, models)
    assert set(curves[curves.curve == "identity"].layer) == {0, 1, 2, 3}
    md = claims_markdown(model_comparison.claims(comparable, models), models)
    head, _, c6 = md.splitlines()
    assert head == "| claim | corpus | pre-trained | fine-tuned: sentiment | random init |"  # a column per model
    assert c6.startswith("| C6 | lee | **holds** 0.950 (0.940 to 0.960) |")  # 3 significant digits
    assert c6.count("**holds**") == 3
    assert "nan" not in md.lower()
    two = pd.concat([models, models.assign(model_key="other-key", role="fine-tuned: sentiment")])
    assert list(model_comparison.labels(two).values()) == ["pre-trained", "ft", "random init", "other-key"]


def test_the_curves_open_on_the_corpus_most_models_have():
    """The page's first view must show the comparison: the book's own corpus has the reference model only."""
    from identifiability.charts.across_models import curves_chart

    rows = [
        {"model": m, "role": r, "corpus": c, "curve": "identity", "label": "rate", "layer": la, "value": 0.5}
        for m, r, corpora in (("pre-trained", "pre-trained", ("lee", "lee_heldout")),
                              ("ft", "fine-tuned: x", ("lee_heldout",)))
        for c in corpora
        for la in range(3)
    ]  # fmt: skip
    params = {p["name"]: p for p in curves_chart(pd.DataFrame(rows), "t").to_dict()["params"]}
    assert params["corpus"]["value"] == "lee_heldout" and params["corpus"]["bind"]["options"] == ["lee", "lee_heldout"]


def test_separator_curves_by_role_whatever_the_tokenizer_calls_it():
    """Chapter 3's mass curves are keyed by role: a model whose tokenizer spells the separator </s> gets
    separator curves, and one whose tokenizer adds no separator is named in one sentence."""
    from identifiability.studies.effective_attention import mass_by_category
    from identifiability.text.across_models import no_separator_text

    from .test_studies_effective_attention import with_tokenizer

    texts = ["The cat sat on the mat.", "Birds sang in the trees all day."]
    docs = []
    for family in ("roberta", "gpt2"):
        lm = with_tokenizer(family)
        results = mass_by_category(lm, texts, progress=False).record()
        docs.append({
            "chapter": by_name("effective_attention").stem,
            "params": {"model": f"tiny-{family}", "corpus": "lee", "seed": 0, "n_sentences": 2},
            "provenance": {"key": f"tiny-{family}", "content_key": f"tiny-{family}"},
            "results": results,
        })  # fmt: skip
    rows = pd.DataFrame([r for i, d in enumerate(docs) for r in aggregate.rows_of(d, "sweep", f"run{i}")])
    models = model_comparison.models_of(model_comparison.comparable(rows))
    curves = model_comparison.curves(rows, models)
    seps = curves[curves.curve.isin(["sep_raw", "sep_effective"])]
    assert set(seps.model) == {"tiny-roberta"} and len(seps) == 2 * 2  # two curves, layers 1..2
    assert set(curves[curves.curve == "cls_raw"].model) == {"tiny-roberta"}
    assert model_comparison.without_separator(rows, models) == ["tiny-gpt2"]
    sentence = no_separator_text(["tiny-gpt2"])
    assert "**tiny-gpt2**" in sentence and "adds no separator" in sentence and no_separator_text([]) == ""


def _curve_rows(corpora_by_model: dict, labels=("rate",)) -> pd.DataFrame:
    roles = {"pre-trained": "pre-trained", "random init": "random init"}
    return pd.DataFrame(
        [
            {"model": m, "role": roles.get(m, "fine-tuned: x"), "corpus": c, "curve": lab, "label": lab,
             "layer": la, "value": 0.5}
            for m, corpora in corpora_by_model.items()
            for c in corpora
            for lab in labels
            for la in range(3)
        ]
    )  # fmt: skip


def test_a_curves_menu_is_shown_only_where_it_offers_a_choice():
    """A plain build compares the reference and its control on one corpus and one quantity: no menu then (a
    menu of one option changes nothing), the quantity names the axis and the corpus the subtitle; with two
    quantities the quantity menu returns, and both curves are drawn either way."""
    from identifiability.charts.across_models import curves_chart

    one = curves_chart(_curve_rows({"pre-trained": ["lee_heldout"], "random init": ["lee_heldout"]}), "t").to_dict()
    assert "params" not in one and one["encoding"]["y"]["title"] == "rate"
    assert one["title"]["subtitle"] == "on lee_heldout"
    two = _curve_rows({"pre-trained": ["lee_heldout"], "random init": ["lee_heldout"]}, labels=("rate", "share"))
    params = {p["name"]: p for p in curves_chart(two, "t").to_dict()["params"]}
    assert set(params) == {"quantity"} and params["quantity"]["bind"]["options"] == ["rate", "share"]


def test_only_corpora_two_models_share_are_compared():
    """The book's own corpus has the reference alone: once another corpus has two models, its curves go."""
    plain = model_comparison.compared(
        _curve_rows({"pre-trained": ["lee", "lee_heldout"], "random init": ["lee_heldout"]})
    )
    assert set(plain.corpus) == {"lee_heldout"} and set(plain.model) == {"pre-trained", "random init"}
    alone = _curve_rows({"pre-trained": ["lee"]})
    assert model_comparison.compared(alone).equals(alone)  # nothing shared: the one model's curves stay
