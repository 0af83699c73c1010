"""A recorded run is replaced only by a run that covers it (issue 52): each record-* job refuses, in one line and
before any work, a run of a smaller design than the one recorded at its location (fewer sentences or members,
chapter results missing, another seed), and an --n below the rules' least for the checkout's record; a pilot goes
elsewhere with --into DIR. The committed records are copied into tmp_path, never touched."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from identifiability import cli
from identifiability.base import paths
from identifiability.base.fileio import read_json, write_json
from identifiability.chapters import execution
from identifiability.chapters.contract import by_name
from identifiability.models import keys
from identifiability.recorded import measures as record_measures
from identifiability.recorded import store as recorded
from identifiability.verdicts.measures import MEASURES_MIN_SENTENCES

COMMITTED = Path(__file__).resolve().parents[2] / "data" / "recorded"


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A copy of the committed records as this checkout's data/recorded (``--into DIR`` names another
    checkout's), an empty data folder, and a fixed git state."""
    copy = tmp_path / "checkout" / "data" / "recorded"
    shutil.copytree(COMMITTED, copy)
    monkeypatch.setattr(recorded, "root", lambda source=None: (source or copy.parents[1]) / "data" / "recorded")
    monkeypatch.setattr(recorded, "git_state", lambda source: ("abc", False))
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "data"))
    return copy


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def no_work(monkeypatch):
    """Chapter 10's recording with every piece of work stubbed to fail: a refusal must come first."""

    def work(*a, **k):
        raise AssertionError("the job started work before refusing")

    monkeypatch.setattr(record_measures, "sample_texts", work)
    monkeypatch.setattr(execution, "run_notebook", work)


def test_shortfall_names_what_a_run_lacks():
    old = {"n": 50, "members": ["a", "b"], "corpus": "lee"}
    assert recorded.shortfall(old, {"n": 50, "members": ["b", "a", "c"], "corpus": "lee"}) == []
    lacks = recorded.shortfall(old, {"n": 1, "members": ["a"], "corpus": "lee_test"})
    assert lacks == ["n 1, fewer than 50", "no members b", "corpus 'lee_test', not 'lee'"]


def test_measures_n_below_the_rules_least_is_refused_for_the_checkouts_record(checkout, no_work, capsys):
    before = _tree(checkout)
    assert cli.main(["record-measures", "--n", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"fewer than the {MEASURES_MIN_SENTENCES} sentences" in err and "--into DIR" in err
    assert _tree(checkout) == before


def test_measures_smaller_than_the_recorded_run_is_refused_even_above_the_least(checkout, no_work, monkeypatch):
    key = keys.target(paths.DEFAULT_MODEL, paths.DEFAULT_CORPUS).key
    rec = recorded.find(record_measures.JOB, key, "")
    results = {**rec.results, "n_scored": MEASURES_MIN_SENTENCES + 10}  # a larger run recorded there
    recorded.write(record_measures.JOB, key, results, rec.provenance)
    with pytest.raises(recorded.SmallerDesign, match=f"n_scored {MEASURES_MIN_SENTENCES}, fewer than"):
        record_measures.record_measures(n=MEASURES_MIN_SENTENCES, echo=lambda s: None)


def _stub_chapter_10(monkeypatch, n: int) -> None:
    monkeypatch.setattr(record_measures, "sample_texts", lambda *a, **k: ["a b c"])
    monkeypatch.setattr(record_measures.corpus_hta, "uncached", lambda model, texts: [])
    monkeypatch.setattr(record_measures.corpus_hta, "on_cluster", lambda *a, **k: None)

    def fake_run(source, out, params, progress=True):
        path = keys.target(params["model"], params["corpus"]).results_dir / f"{by_name('measures').stem}.json"
        results = {"scores": [], "seconds": {"raw": 0.1}, "n_scored": n, "unsupported": {}, "claims": {}}
        write_json(path, {"params": params, "results": results})

    monkeypatch.setattr(execution, "run_notebook", fake_run)


def test_a_pilot_goes_elsewhere_with_into(checkout, tmp_path, monkeypatch):
    _stub_chapter_10(monkeypatch, 1)
    before = _tree(checkout)
    pilot = tmp_path / "pilot"
    rec = record_measures.record_measures(n=1, echo=lambda s: None, into=pilot)
    assert rec.results["n_scored"] == 1 and (recorded.folder(rec.job, rec.key, pilot) / recorded.RESULTS).is_file()
    assert _tree(checkout) == before


def test_family_of_one_member_without_chapter_results_is_refused(checkout, tmp_path, capsys):
    data = tmp_path / "data"
    member = "mlm-w128-dv32-seed0"
    write_json(data / "models" / member / "provenance.json", {"kind": "pretrained-mlm", "member": {"name": member}})
    before = _tree(checkout)
    assert cli.main(["record-family", "--data", str(data)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no members mlm-w128-dv16-seed0" in err and "--into DIR" in err, err
    assert _tree(checkout) == before
    assert cli.main(["record-family", "--data", str(data), "--into", str(tmp_path / "pilot")]) == 0
    assert read_json(tmp_path / "pilot" / "data" / "recorded" / "family" / "lee" / "results.json")["members"]


@pytest.mark.parametrize("what", ["missing", "file"])
def test_family_data_that_is_no_folder_is_named(what, checkout, tmp_path, capsys):
    data = tmp_path / "nowhere"
    if what == "file":
        data.write_text("x")
    assert cli.main(["record-family", "--data", str(data)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"--data {data} is not a folder" in err


def test_confirm_missing_chapters_is_refused_before_they_run(checkout, monkeypatch):
    from identifiability.recorded import confirm

    monkeypatch.setattr(confirm, "run_chapters", lambda *a, **k: pytest.fail("ran before refusing"))
    key = keys.target(paths.DEFAULT_MODEL, confirm.CORPUS).key
    rec = recorded.find(confirm.JOB, key, "")
    more = {**rec.results, "params": {**rec.results["params"], "99_extra": {}}}  # a chapter the job does not run
    recorded.write(confirm.JOB, key, more, rec.provenance)
    with pytest.raises(recorded.SmallerDesign, match="no chapters 99_extra"):
        confirm.record_confirm(echo=lambda s: None)


def test_moved_values_are_a_screen_with_the_full_list_in_a_file(tmp_path, monkeypatch):
    monkeypatch.setattr(recorded, "root", lambda source=None: tmp_path / "recorded")
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "data"))
    old = {"scores": list(range(500)), "claims": {"C22": "holds"}}
    recorded.write("job", "k", old, {"date": "2024-01-01"})
    lines: list[str] = []
    new = {"scores": [x + 1 for x in range(500)], "claims": {"C22": "fails"}}
    recorded.record("job", "k", new, {"target": "job"}, 0.0, echo=lines.append)
    assert lines[0].startswith("501 value(s) moved") and len(lines) <= recorded.SHOWN + 3
    assert "scores: 500" in lines[1] and str(recorded.moved_file("job", "k")) in lines[-1]
    assert len(recorded.moved_file("job", "k").read_text().splitlines()) == 501
