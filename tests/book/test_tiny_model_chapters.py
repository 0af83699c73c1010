"""The chapters that judge claims run end to end on a tiny random-weight model (another depth, width and head
size than the embedded one): every claim gets a verdict with all of its fields, whatever the verdict is."""

from __future__ import annotations

import pytest

from identifiability import paths
from identifiability.cli import run_notebook
from identifiability.results import load_claims, read_json
from identifiability.verdicts import VERDICTS

pytestmark = [pytest.mark.notebooks]


@pytest.fixture(scope="module")
def tiny_folder(tiny_model_folder):
    return tiny_model_folder(3)


@pytest.mark.parametrize("chapter", ["02_nonidentifiability", "03_effective_attention", "06_context_mixing"])
def test_chapter_judges_its_claims_on_a_tiny_random_model(chapter, tiny_folder, tmp_path, quick_params):
    params = {**quick_params[chapter], "model": str(tiny_folder), "results_dir": str(tmp_path / "results")}
    run_notebook(paths.source_root() / "notebooks" / f"{chapter}.md", tmp_path / "nb", params, progress=False)
    out = read_json(tmp_path / "results" / f"{chapter}.json")
    assert out["provenance"]["content_key"] and out["params"]["model"] == str(tiny_folder)
    claims = out["results"]["claims"]
    expected = {c["id"] for c in load_claims() if c["chapter"] == chapter}
    assert set(claims) == expected
    for v in claims.values():
        assert v["verdict"] in VERDICTS and v["rule"] and v["reason"]
        assert {"estimate", "ci95", "baseline", "baseline_note", "parts"} <= set(v)
        assert v["baseline"] is not None or v["baseline_note"]  # a missing baseline says why none applies
