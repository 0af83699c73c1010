"""`make compare`'s recorded run (identifiability.recorded.compare): gathered from a data folder of chapter 4 runs
on the held-out text (a reference, three fine-tune seeds, the random-initialisation control, built as the C13
and C14 controls build them), recorded into a temporary checkout, and read back by chapter 9's study
(studies.across_models.recorded_comparison) with the original data folder gone: C13 and C14 are judged on it
with the verdicts, reasons and numbers of the live comparison of the same folder, and the page says so with
the recorded run's caption. Integration tier: the provenance reads the checkout's git state (a subprocess)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from identifiability.base.fileio import read_json, write_json
from identifiability.chapters.contract import by_name
from identifiability.recorded import compare as record_compare
from identifiability.recorded import computed_with
from identifiability.recorded import store as recorded
from identifiability.runs import aggregate
from identifiability.studies.across_models import comparison, recorded_comparison, reference_comparison
from identifiability.text import across_models as prose
from identifiability.verdicts import NOT_RUN
from identifiability.verdicts.across_models import C13_BAND, C13_POWER, c13, c14
from identifiability.verdicts.claims import rules

from .test_verdict_controls_across_models import CORPUS, REFERENCE, _base, _file, _keys, _model_folder, _rates

TOKEN_IDENTITY = by_name("token_identity").stem

KW = dict(band=C13_BAND, power=C13_POWER)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A checkout as `make compare` leaves it: what a recorded run hashes (the package, the lock, the claims
    tables), and under data/ the models' folders (provenance only) and chapter 4's results on the held-out
    text, the models named as the Makefile names them (data/models/..., relative to the checkout)."""
    src = Path(recorded.__file__).resolve().parents[3]
    ck = tmp_path / "checkout"
    shutil.copytree(src / "src" / "identifiability", ck / "src" / "identifiability")
    (ck / "data").mkdir()
    for name in ("data/claims.csv", "data/amendments.csv", "requirements.txt"):
        shutil.copy(src / name, ck / name)
    data = ck / "data"
    rng = np.random.default_rng(3)
    n = 60
    base = _base(rng, n)
    keys = _keys(n)
    late = np.array([0, 0, 0, 0, -0.1, -0.2])  # a change in the last layers: C13 fails, C14 holds
    _file(data, REFERENCE, REFERENCE, "refkey", _rates(rng, n, base=base), keys)
    for f in range(3):
        prov = {
            "kind": "fine-tuned",
            "task": "lee-pairs",
            "seed": f,
            "identity": {"kind": "fine-tuned", "task": "lee-pairs", "seed": f, "epochs": 2},
            "base": {"name": REFERENCE, "content_key": "refkey"},
        }
        _model_folder(data, f"ft-seed{f}", prov)
        rate = _rates(rng, n, base=base, shift=late, seed_sd=0.01)
        _file(data, f"data/models/ft-seed{f}", f"ft{f}", f"ftkey{f}", rate, keys)
    prov = {"kind": "random-init", "seed": 0, "like": {"name": REFERENCE, "content_key": "refkey"}}
    _model_folder(data, "random", prov)
    _file(data, "data/models/random", "rnd", "rndkey", _rates(rng, n, base=base, shift=-0.5), keys)
    for f in (data / "results").rglob("*.json"):  # each reports what it computed with, as a chapter's kernel does
        write_json(f, {**read_json(f), computed_with.KEY: computed_with.imported()})
    return ck


def _live(data: Path | None):
    table = aggregate.build_table(data)
    return comparison(table, reference=REFERENCE, seed=0, judge_corpus=CORPUS, data_folder=data, **KW)


def _record(ck: Path, lines: list[str] | None = None) -> recorded.Recorded:
    out = [] if lines is None else lines
    return record_compare.record_compare(REFERENCE, ck / "data", checkout=ck, into=ck, seconds=3000, echo=out.append)


def _verdicts(cmp):
    return [c13(cmp.fine_tuning, rules("C13")), c14(cmp.fine_tuning, rules("C14"))]


def test_the_recorded_run_is_judged_as_the_live_folder_was(checkout, tmp_path, monkeypatch):
    """Every number of C13's and C14's evidence and verdicts, read from the recording with the data folder and
    the model folders gone, equals the live comparison's; the verdicts are judged (not "not run")."""
    monkeypatch.chdir(checkout)  # where a chapter's kernel runs: the models' relative names resolve there
    live = _live(checkout / "data")
    assert sorted(live.fine_tuning.tasks) == ["lee-pairs"] and live.fine_tuning.control is not None
    rec = _record(checkout)
    where = checkout / "data" / "recorded" / "compare" / REFERENCE
    assert sorted(p.name for p in where.iterdir()) == ["provenance.json", "results.json"]
    files = rec.results["files"]
    assert len([f for f in files if f.endswith(f"{TOKEN_IDENTITY}.json")]) == 5
    assert sorted(rec.results["model_provenance"]) == [f"data/models/ft-seed{f}" for f in range(3)] + [
        "data/models/random"
    ]
    assert all(rel.startswith("models/") for rel in rec.results["model_provenance"].values())
    assert rec.provenance["target"] == "compare" and rec.provenance["claims"] == ["C13", "C14"]
    assert rec.provenance["seconds"] == 3000
    assert rec.provenance["hashes"]["unreported"] == [] and recorded.code_unknown(rec) is None
    assert "identifiability.base.stats" in rec.provenance["hashes"]["modules"]  # what the chapters reported
    assert (where / "results.json").stat().st_size < 2e6
    # nothing but the recording is left to read: the live folder holds no runs and no models, and the
    # working directory is elsewhere
    monkeypatch.chdir(tmp_path)
    for sub in ("results", "models"):
        shutil.rmtree(checkout / "data" / sub)
    empty = _live(checkout / "data")
    assert not empty.fine_tuning.tasks and [v.verdict for v in _verdicts(empty)] == [NOT_RUN, NOT_RUN]
    got, back = recorded_comparison(empty, REFERENCE, 0, CORPUS, source=checkout, **KW)
    assert back is not None and back.results == rec.results
    then, now = _verdicts(live), _verdicts(got)
    assert [v.verdict for v in now] != [NOT_RUN, NOT_RUN] and all(v.verdict != NOT_RUN for v in now)
    assert [v.to_json() for v in now] == [v.to_json() for v in then]  # verdicts, reasons, estimates, intervals
    assert [v.original.to_json() for v in now] == [v.original.to_json() for v in then]
    a, b = live.fine_tuning, got.fine_tuning
    np.testing.assert_array_equal(a.differences["lee-pairs"], b.differences["lee-pairs"])
    assert a.tasks["lee-pairs"].layers == b.tasks["lee-pairs"].layers and a.control.layers == b.control.layers
    assert (a.tasks["lee-pairs"].peak_late, a.off_ceiling) == (b.tasks["lee-pairs"].peak_late, b.off_ceiling)
    assert json.dumps(live.fine_tuning_power, sort_keys=True) == json.dumps(got.fine_tuning_power, sort_keys=True)
    for text in (prose.ceiling_text, prose.control_text):
        assert text(b) == text(a)
    assert list(got.model_table.role) == list(live.model_table.role)  # roles from the recorded provenance
    # the page: the caption beside the verdicts and above the models, never "not run in this build"
    date = rec.date
    caption = f"recorded run of {date}; `make compare` recomputes it (50 min 0 s on "
    assert got.recorded.startswith(caption) and got.recorded.endswith(" cores)")
    assert caption in prose.recorded_text(got) and caption in prose.comparison_text(got, 0)
    assert prose.recorded_text(live) == "" and live.recorded == ""


def test_a_reference_known_by_its_folder_name_alone_is_found_and_judged_as_live(checkout, monkeypatch):
    """A recorded run of a reference whose folder is not on this machine (a family member's, recorded under
    ``<name>-<10 hex digits>``) is found by the folder's name and judged as the live folder was; another name
    finds nothing."""
    monkeypatch.chdir(checkout)
    live = _live(checkout / "data")
    _record(checkout)
    where = checkout / "data" / "recorded" / "compare"
    (where / REFERENCE).rename(where / "mlm-w128-dv32-seed0-0123456789")
    assert reference_comparison("mlm-w128-dv32-seed0", 0, CORPUS, source=checkout, **KW) is not None
    for sub in ("results", "models"):
        shutil.rmtree(checkout / "data" / sub)
    got = reference_comparison("mlm-w128-dv32-seed0", 0, CORPUS, source=checkout, **KW)
    assert [v.to_json() for v in _verdicts(got)] == [v.to_json() for v in _verdicts(live)]
    assert got.recorded.startswith("recorded run of ")
    assert reference_comparison("mlm-w128-dv16-seed0", 0, CORPUS, source=checkout, **KW) is None
    assert reference_comparison("mlm-w128-dv32", 0, CORPUS, source=checkout, **KW) is None  # not a prefix match


def test_a_changed_source_file_marks_the_recording_stale(checkout):
    _record(checkout)
    empty = _live(checkout / "nothing")
    module = checkout / "src" / "identifiability" / "base" / "stats.py"
    module.write_text(module.read_text() + "\n# a comment\n")  # not code: the recording stays fresh
    got, _ = recorded_comparison(empty, REFERENCE, 0, CORPUS, source=checkout, **KW)
    assert got.recorded.endswith(" cores)")
    module.write_text(module.read_text() + "\nCHANGED = 1\n")
    got, _ = recorded_comparison(empty, REFERENCE, 0, CORPUS, source=checkout, **KW)
    assert got.recorded.endswith(" cores); computed before a change to base/stats.py")


def test_live_fine_tunes_take_precedence_over_the_recording(checkout, monkeypatch):
    monkeypatch.chdir(checkout)
    _record(checkout)
    live = _live(checkout / "data")
    got, rec = recorded_comparison(live, REFERENCE, 0, CORPUS, source=checkout, **KW)
    assert got is live and rec is None
    # a reader's own sweep of other models (no fine-tunes) keeps its live page: the recording stands in only
    # for what a plain book build has (the reference and its random control)
    empty = _live(checkout / "nothing")
    others = dataclasses.replace(
        empty,
        model_table=pd.DataFrame({"model_key": ["a", "b"], "model": ["a", "b"], "role": ["pre-trained", "other"]}),
    )
    got, rec = recorded_comparison(others, REFERENCE, 0, CORPUS, source=checkout, **KW)
    assert got is others and rec is None
    alone = dataclasses.replace(others, model_table=others.model_table.assign(role=["pre-trained", "random init"]))
    assert recorded_comparison(alone, REFERENCE, 0, CORPUS, source=checkout, **KW)[1] is not None


def test_a_second_recording_of_the_same_data_is_identical_and_a_moved_value_is_named(checkout):
    first: list[str] = []
    _record(checkout, first)
    assert not any("identical" in line for line in first) and "recorded 9 files" in first[-1]
    second: list[str] = []
    _record(checkout, second)
    assert second[0].startswith("identical to the recorded run of ") and second[0].endswith("(tolerance 1e-09)")
    run = checkout / "data" / "results" / "ft1" / CORPUS / f"{TOKEN_IDENTITY}.json"
    doc = json.loads(run.read_text())
    doc["results"]["linear_rate_by_sentence"]["rate"][0][0][5] += 0.25
    run.write_text(json.dumps(doc))
    third: list[str] = []
    _record(checkout, third)
    assert third[0].startswith("1 value(s) moved since the recorded run of ")
    path = f"files.results/ft1/lee_heldout/{TOKEN_IDENTITY}.json.results.linear_rate_by_sentence.rate[0][0][5]"
    assert third[1].startswith(f"  {path}: ")


def test_a_folder_without_fine_tunes_records_nothing(checkout):
    for sub in ("results", "models"):
        shutil.rmtree(checkout / "data" / sub)
    with pytest.raises(record_compare.NothingToRecord, match=r"no fine-tuned model .* run `make compare` first"):
        _record(checkout)


def test_the_command_records_a_sweep_run_with_its_manifest_and_the_sweeps_span(checkout, monkeypatch, capsys):
    """A fine-tune's run filed as the sweep files it (``sweeps/.../run.json`` beside it): recorded with its
    manifest's chapter only, the duration read from the manifests when not given, and the recorded comparison
    still the live one."""
    from identifiability import cli

    monkeypatch.chdir(checkout)
    data = checkout / "data"
    old = data / "results" / "ft2" / CORPUS / f"{TOKEN_IDENTITY}.json"
    run = data / "sweeps" / "ft2" / CORPUS / by_name("token_identity").stem / "seed0-abc"
    run.mkdir(parents=True)
    old.rename(run / old.name)
    manifest = {"chapter": by_name("token_identity").stem, "seconds": 100.0, "finished": "2026-12-03T10:00:00Z"}
    (run / "run.json").write_text(json.dumps(manifest))
    live = _live(data)
    argv = ["record-compare", "--data", str(data), "--checkout", str(checkout), "--into", str(checkout)]
    assert cli.main(argv) == 0
    assert "recorded 10 files (4 model provenances)" in capsys.readouterr().out
    rec = recorded.load("compare", REFERENCE, "compare", checkout)
    rel = f"sweeps/ft2/lee_heldout/{TOKEN_IDENTITY}/seed0-abc"
    assert rec.results["files"][f"{rel}/run.json"] == {"chapter": by_name("token_identity").stem}
    assert rec.provenance["seconds"] == 100.0 and "sweep runs" in rec.provenance["seconds_from"]
    empty = _live(checkout / "nothing")
    got, _ = recorded_comparison(empty, REFERENCE, 0, CORPUS, source=checkout, **KW)
    assert [v.to_json() for v in _verdicts(got)] == [v.to_json() for v in _verdicts(live)]
