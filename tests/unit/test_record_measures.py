"""`make measures`' recording (identifiability.recorded.measures): the provenance names the checkout as it was
when the chapter started, not as it is when the 40-minute run ends; a run too small to judge is refused."""

from __future__ import annotations

import pytest

from identifiability.base import paths
from identifiability.base.fileio import write_json
from identifiability.chapters import execution
from identifiability.chapters.contract import by_name
from identifiability.models import keys
from identifiability.recorded import measures as record_measures
from identifiability.recorded import store as recorded


@pytest.fixture
def stubbed(tmp_path, monkeypatch):
    """No cluster, no kernel: the chapter 'run' writes a results file of ``state["n"]`` sentences and moves
    the checkout to another commit, as a commit made during a real run would."""
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "data"))
    monkeypatch.setattr(recorded, "root", lambda source=None: tmp_path / "recorded")
    monkeypatch.setattr(record_measures, "sample_texts", lambda *a, **k: ["a b c"])
    monkeypatch.setattr(record_measures.corpus_hta, "uncached", lambda model, texts: [])
    monkeypatch.setattr(record_measures.corpus_hta, "on_cluster", lambda *a, **k: None)
    state = {"commit": "start", "n": 50, "report": {"computed_with": {"identifiability.studies.kernel_only": "f"}}}
    monkeypatch.setattr(recorded, "git_state", lambda source: (state["commit"], False))

    def fake_run(source, out, params, progress=True):
        path = keys.target(params["model"], params["corpus"]).results_dir / f"{by_name('measures').stem}.json"
        results = {"scores": [], "seconds": {"raw": 0.1}, "n_scored": state["n"], "unsupported": {}, "claims": {}}
        write_json(path, {"params": params, "results": results, **state["report"]})
        state["commit"] = "during"

    monkeypatch.setattr(execution, "run_notebook", fake_run)
    return state


def test_the_provenance_is_the_checkouts_when_the_chapter_started(stubbed):
    rec = record_measures.record_measures(echo=lambda s: None)
    assert rec.provenance["commit"] == "start" and rec.provenance["claims"] == [f"C{i}" for i in range(22, 28)]
    assert rec.provenance["seconds"] >= 0 and rec.results["n_scored"] == 50


def test_the_modules_are_the_jobs_and_those_chapter_10s_kernel_reported(stubbed):
    h = record_measures.record_measures(echo=lambda s: None).provenance["hashes"]
    assert (
        h["modules"]["identifiability.studies.kernel_only"] == "f" and "identifiability.runs.corpus_hta" in h["modules"]
    )
    assert h["unreported"] == []
    stubbed["report"] = {}  # a kernel from before kernels reported
    rec = record_measures.record_measures(echo=lambda s: None)
    assert rec.provenance["hashes"]["unreported"] == [f"results/{rec.key}/{by_name('measures').stem}.json"]


def test_a_run_of_fewer_sentences_than_the_rules_need_is_not_recorded(stubbed):
    stubbed["n"] = 49
    with pytest.raises(record_measures.NothingToRecord, match="run make measures"):
        record_measures.record_measures(echo=lambda s: None)


def test_on_the_confirmation_text_the_record_is_make_confirms(stubbed, monkeypatch):
    """Chapter 10 on lee_test is make confirm's second step: its record, its caption and a partial record's line
    name `make confirm`, and the claims page finds it there; on any other corpus they name `make measures`."""
    from identifiability.recorded import confirm

    assert confirm.measures_target(confirm.CORPUS) == "confirm" and confirm.measures_target("lee") == "measures"
    rec = record_measures.record_measures(corpus=confirm.CORPUS, echo=lambda s: None, make_target="confirm")
    assert rec.target == "confirm" and rec.key.endswith("/lee_test")
    assert "`make confirm` recomputes it" in recorded.caption(rec)
    assert "`make confirm` records it" in record_measures.partial(rec)  # no scores: partial
    [(found, why), (found_10, why_10)] = confirm.records()
    assert found is None and why is None and found_10.results == rec.results and "make confirm" in why_10
    assert record_measures.record_measures(echo=lambda s: None).target == "measures"
