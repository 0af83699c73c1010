"""Chapter 10's study on a tiny model: every measure scored against both references, scores that survive a
results file, a recorded run read back, and a clear stop for a measure that does not exist."""

from types import SimpleNamespace

import numpy as np
import pytest

from identifiability.base.errors import UserError
from identifiability.evidence.measures import MAIN
from identifiability.studies import measures as study
from identifiability.text import measures as prose
from identifiability.verdicts import measures as vm
from identifiability.verdicts.core import NOT_TESTABLE, Rules

TEXTS = ["the cat sat on the mat today", "a dog barked at the old man twice", "rain fell on the quiet town"]


@pytest.fixture(scope="module")
def run(tiny_lm):
    names = ["raw", "rollout", "alti", "value_zeroing"]  # one per module that a page scores the same way
    mean = study.corpus_mean(tiny_lm, TEXTS, tiny_lm.max_positions)
    return study.score_sentences(tiny_lm, TEXTS, names, mean, seed=0, cache=False, progress=False)


def test_every_measure_is_scored_against_every_reference_at_every_layer(run, tiny_lm):
    got = {(r["measure"], r["reference"]) for r in run.scores}
    for key in ("raw", "raw@rolled", "rollout", "alti", "value_zeroing@rolled"):
        assert {(key, study.HTA), (key, study.INTERVENTION), (key, study.MASK)} <= got
    assert ("hta", study.INTERVENTION) in got and ("hta", study.HTA) not in got
    # like with like (C22 v2): the per-layer measures as they are against the one-layer references too, and
    # exact HTA of one layer against the one-layer intervention; nothing cumulative against them
    for ref in (study.HTA_LAYER, study.INTERVENTION_LAYER):
        assert {("raw", ref), ("value_zeroing", ref)} <= got
        assert not {("rollout", ref), ("alti", ref), ("raw@rolled", ref), ("hta", ref)} & got
    assert (study.HTA_LAYER, study.INTERVENTION_LAYER) in got
    assert not {(study.HTA_LAYER, r) for r in (study.HTA, study.INTERVENTION, study.MASK)} & got
    layers = {r["layer"] for r in run.scores}
    assert layers == set(range(1, tiny_lm.n_layers + 1)) and run.n_scored == len(TEXTS)
    assert set(run.seconds) >= {"raw", "hta", "intervention", "hta_layer", "intervention_layer"}
    assert all(s >= 0 for s in run.seconds.values())


def test_the_pairs_compare_like_with_like():
    keys = ["raw", "raw@rolled", "rollout", "norm_resln", "hta", "intervention", "hta_layer", "intervention_layer"]
    got = study.pairs(keys)
    assert len(got) == len(set(got))
    assert {p for p in got if p[1] == study.HTA} == {(k, "hta") for k in ("raw", "raw@rolled", "rollout", "norm_resln")}
    assert {p for p in got if p[1] == study.INTERVENTION} == {
        (k, "intervention") for k in ("raw", "raw@rolled", "rollout", "norm_resln", "hta")
    }
    assert {p for p in got if p[1] == study.HTA_LAYER} == {("raw", "hta_layer"), ("norm_resln", "hta_layer")}
    assert {p for p in got if p[1] == study.INTERVENTION_LAYER} == {
        ("raw", "intervention_layer"),
        ("norm_resln", "intervention_layer"),
        ("hta_layer", "intervention_layer"),
    }
    # without the one-layer references, the pairs of the input references alone
    assert study.pairs(keys[:6]) == [p for p in got if p[1] in (study.HTA, study.INTERVENTION)]


def test_scores_survive_a_results_file_and_a_recorded_run(run):
    back = study.scores_from_rows(run.scores)
    assert back == run.evidence.scores
    main = [s for s in back if s.variant == MAIN]
    assert all(s.stronger is not None and s.minus_stronger is not None for s in back)
    assert all(s.minus_others for s in main if s.measure != max(x.measure for x in main if x.reference == s.reference))
    rec = SimpleNamespace(key="m/c", results={"scores": run.scores, "seconds": run.seconds, "n_scored": 60})
    shown = study.shown(run, rec)
    assert shown.evidence.n_sentences == 60
    assert shown.evidence.recorded == "m/c" and len(shown.rows) == len(run.scores)


def test_too_few_sentences_is_not_testable_and_says_how_to_run_it(run):
    v = vm.c24(run.evidence, Rules("rule", "original rule"))
    assert v.verdict == NOT_TESTABLE and "make measures" in v.reason
    assert "make measures" in prose.answer_text([v])


def test_an_unknown_measure_stops_with_the_names():
    with pytest.raises(UserError, match="choose from raw, effective, rollout"):
        study.chosen("raw,rolout")
    assert study.chosen("")[:3] == ["raw", "effective", "rollout"] and "intervention" not in study.chosen("")


def test_the_corpus_mean_covers_every_position_of_every_layer_input(tiny_lm):
    import torch

    from identifiability.contributions.intervention import mean_embedding
    from identifiability.models.trace import trace_sentences

    mean = study.corpus_mean(tiny_lm, TEXTS, 40)
    assert mean.shape == (tiny_lm.n_layers, 40, tiny_lm.d_model) and np.isfinite(mean.numpy()).all()
    # entry 0 is the input embedding's mean, filled past the longest sentence by x's mean: the same bytes
    traces = trace_sentences(tiny_lm, TEXTS, progress=False)
    x_mean = mean_embedding(traces)
    fill = torch.cat([t.x for t in traces]).mean(0, keepdim=True).expand(40 - x_mean.shape[0], -1)
    assert torch.equal(mean[0], torch.cat([x_mean, fill]))
    assert float((mean[1] - mean[0]).abs().max()) > 1e-3  # layer 1's states are not the input's
    with pytest.raises(UserError, match="corpus_mean"):  # a mean of the input alone says what to pass
        study.measure_sentence(tiny_lm, traces[0], ["raw"], mean[0], cache=False)


def test_the_charts_carry_every_sentence_measure_and_score(run):
    from identifiability.charts import measures as charts

    spec = charts.matrices_chart(run.sentences()).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert {r["s"] for r in rows} == {0, 1, 2} and "Exact HTA" in {r["m"] for r in rows}
    assert {p["name"] for p in spec["params"]} == {"sentence", "layer"}
    # one row per matrix c[l] (flattened in the browser), and at most MATRIX_SENTENCES sentences offered
    first = run.sentences()[0]
    one = [r for r in rows if r["s"] == 0 and r["m"] == "Exact HTA"]
    assert len(one) == len(first[2]["Exact HTA"]) - 1 and len(one[0]["w"]) == len(first[1]) ** 2
    many = charts.matrices_chart(run.sentences() * 4).to_dict()
    assert {r["s"] for r in next(iter(many["datasets"].values()))} == set(range(charts.MATRIX_SENTENCES))
    scores = charts.scores_chart(run.scores, run.n_scored).to_dict()
    table = next(iter(scores["datasets"].values()))
    assert {r["state"] for r in table} <= {"tracks", "does not track", "undecided"} and len(table) == len(run.scores)
    assert charts.cost_chart(run.seconds_table).to_dict()["mark"]["type"] == "circle"


def test_a_measured_sentence_is_cached_as_it_is_made_and_read_back_without_computing(tiny_lm, tmp_path, monkeypatch):
    """A run stopped after some sentences loses none of them: each measure's array (and its seconds, as
    measured when made) comes back from the cache, nothing recomputed; another corpus mean is another entry."""
    from identifiability.base import paths
    from identifiability.models.trace import trace_sentences

    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path))
    tr = trace_sentences(tiny_lm, TEXTS[:1], progress=False)[0]
    mean = study.corpus_mean(tiny_lm, TEXTS, tiny_lm.max_positions)
    first, secs, _ = study.measure_sentence(tiny_lm, tr, ["raw", "alti"], mean)
    calls = []
    monkeypatch.setattr(study, "compute", lambda *a, **k: calls.append(a) or 1 / 0)
    monkeypatch.setattr(study, "token_replacement", lambda *a, **k: calls.append(a) or 1 / 0)
    monkeypatch.setattr(study, "hta_layer", lambda *a, **k: calls.append(a) or 1 / 0)
    monkeypatch.setattr(study, "intervention_layer", lambda *a, **k: calls.append(a) or 1 / 0)
    again, secs_again, _ = study.measure_sentence(tiny_lm, tr, ["raw", "alti"], mean)
    assert calls == [] and secs_again == secs and set(again) == set(first)
    for k in first:
        np.testing.assert_array_equal(again[k], first[k])
    with pytest.raises(ZeroDivisionError):  # another mean: the intervention is computed again
        study.measure_sentence(tiny_lm, tr, ["raw"], mean + 1)


def test_a_raised_measure_version_recomputes_that_measure_alone(tiny_lm, tmp_path, monkeypatch):
    """A measure whose numbers changed (Integrated Gradients' default steps) is filed under a new version:
    its cached arrays are computed again, every other measure's are read back as they were."""
    from dataclasses import replace

    from identifiability.base import paths
    from identifiability.contributions import MEASURES
    from identifiability.models.trace import trace_sentences

    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path))
    tr = trace_sentences(tiny_lm, TEXTS[:1], progress=False)[0]
    study.measure_sentence(tiny_lm, tr, ["raw", "alti"], None)
    monkeypatch.setitem(MEASURES, "alti", replace(MEASURES["alti"], version=2))
    real, calls = study.compute, []
    monkeypatch.setattr(study, "compute", lambda lm, t, name: calls.append(name) or real(lm, t, name))
    study.measure_sentence(tiny_lm, tr, ["raw", "alti"], None)
    assert calls == ["alti"]
    assert MEASURES["integrated_gradients"].version > 1  # 32 steps of Captum's default -> 256
