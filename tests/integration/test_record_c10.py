"""C10's recorded run end to end on a tiny model: the sample drawn, exact HTA on a local Dask cluster, the
per-sentence numbers recorded with their provenance in a checkout of the test's own, read back, and a second
run that finds every sentence cached and reports itself identical to the first."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from identifiability.models import keys
from identifiability.recorded import proportional
from identifiability.recorded import store as recorded
from identifiability.recorded.c10 import record_c10


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    src = Path(recorded.__file__).resolve().parents[3]
    shutil.copytree(src / "src" / "identifiability", tmp_path / "src" / "identifiability")
    (tmp_path / "data").mkdir()
    for name in ("data/claims.csv", "data/amendments.csv", "requirements.txt"):
        shutil.copy(src / name, tmp_path / name)
    return tmp_path


def test_record_c10_draws_computes_and_records_a_loadable_run(tiny_model_folder, module_data_folder, checkout):
    model = str(tiny_model_folder())
    said: list[str] = []
    rec = record_c10(model, "lee", n=3, workers=1, progress=False, echo=said.append, source=checkout)
    back = recorded.load("c10", rec.key, "record-c10", checkout)
    r = back.results
    assert back == rec and r["n"] == 3 and len(r["draws"]) == 3 and set(map(str, r["draws"])) == set(r["sentences"])
    assert r["eligible"]["max_tokens"] >= max(row["tokens"] for row in r["sentences"].values())
    for row in r["sentences"].values():
        assert row["words"] + row["special"] == row["tokens"] and row["share"] == row["top_self"] / row["tokens"]
    # the verdict's numbers are rebuilt from the per-sentence ones
    got = proportional.shares({int(k): v for k, v in r["sentences"].items()}, r["draws"], r["seed"])
    assert r["summary"]["all"] == [got["all"].estimate, got["all"].low, got["all"].high]
    assert back.target == f"record-c10 MODEL={model} CORPUS=lee" and recorded.stale(back, checkout) == []
    assert keys.target(model, "lee").key == rec.key and "0 cached" in said[0]
    said.clear()
    record_c10(model, "lee", n=3, workers=1, progress=False, echo=said.append, source=checkout)
    assert "3 cached" in said[0] and said[1] == f"identical to the recorded run of {rec.date} (tolerance 1e-06)"
