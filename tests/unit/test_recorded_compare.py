"""Chapter 9 without fine-tuned results and without a recorded `make compare` run: C13 and C14 stay "not run
in this build", naming `make compare`; a recorded run's files are written back below the data folder only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from identifiability.chapters.contract import by_name
from identifiability.recorded import compare as record_compare
from identifiability.runs import aggregate
from identifiability.studies.across_models import comparison, recorded_comparison
from identifiability.text import across_models as prose
from identifiability.verdicts import NOT_RUN
from identifiability.verdicts.across_models import C13_BAND, C13_POWER, c13, c14
from identifiability.verdicts.claims import rules

KW = dict(band=C13_BAND, power=C13_POWER)


def test_without_fine_tunes_or_a_recording_c13_and_c14_are_not_run_naming_make_compare(tmp_path):
    table = pd.DataFrame(columns=aggregate.COLUMNS)
    live = comparison(table, "all-MiniLM-L6-v2", 0, "lee_heldout", tmp_path, **KW)
    got, rec = recorded_comparison(live, "all-MiniLM-L6-v2", 0, "lee_heldout", source=tmp_path, **KW)
    assert rec is None and got is live and got.recorded == "" and prose.recorded_text(got) == ""
    for v in (c13(got.fine_tuning, rules("C13")), c14(got.fine_tuning, rules("C14"))):
        assert v.verdict == NOT_RUN and "`make compare`" in v.reason, v.reason


def test_a_recorded_file_is_written_below_the_data_folder_only(tmp_path):
    ok = {"files": {f"results/m/c/{by_name('token_identity').stem}.json": {"chapter": by_name("token_identity").stem}}}
    record_compare.materialise(ok, tmp_path / "data")
    assert (tmp_path / "data" / "results" / "m" / "c" / f"{by_name('token_identity').stem}.json").is_file()
    for bad in ("../outside.json", "/abs.json"):
        with pytest.raises(ValueError, match="not below the data folder"):
            record_compare.materialise({"files": {bad: {}}}, tmp_path / "data")
    assert not (tmp_path / "outside.json").exists()


def test_a_recorded_run_names_each_models_provenance_by_the_name_its_runs_were_made_under():
    results = {"files": {"models/ft/provenance.json": {"kind": "fine-tuned"}}, "model_provenance": {}}
    results["model_provenance"]["data/models/ft"] = "models/ft/provenance.json"
    assert record_compare.provenances(results) == {"data/models/ft": {"kind": "fine-tuned"}}
    assert Path(record_compare.model_folder("data/models/ft", Path("/ck"))) == Path("/ck/data/models/ft")


def test_the_chapter_runs_of_a_recorded_run_are_its_files_but_manifests_and_model_provenances():
    files = {f: {} for f in ("sweeps/m/lee/s/04_x.json", "sweeps/m/lee/s/run.json", "results/r/04_x.json")}
    results = {
        "files": {**files, "models/ft/provenance.json": {}},
        "model_provenance": {"ft": "models/ft/provenance.json"},
    }
    assert record_compare.chapter_runs(results) == ["results/r/04_x.json", "sweeps/m/lee/s/04_x.json"]
