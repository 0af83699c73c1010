"""Chapter 9 on the book's own results (one model): it says how to add models, judges C13 and C14 as not run
in this build (current and original rules, and every alternative) with the command that runs them, and shows
the default model's verdicts. Beside the random-initialisation control a build makes (``build.control_runs``)
it compares the two on the held-out text: both curves in one chart with no menu of a single option, the
control's change per layer with its intervals, and still no verdict on C13 or C14."""

import json
import os
from pathlib import Path

from identifiability.base import paths
from identifiability.base.fileio import read_json, write_json
from identifiability.book import build
from identifiability.chapters.contract import by_name
from identifiability.chapters.execution import run_notebook
from identifiability.recorded import compare as record_compare
from identifiability.verdicts.claims import load_claims, robustness_names

from .background import TinyModel, call, chapter


def test_across_models_page_on_one_model(background):
    # after the chapters it reads (the contract's reads): the table of the chapters run in this build
    r = background.chapter("across_models")["results"]
    page = background.notebook("across_models").read_text()
    if _judged_on_the_recording(r, page):
        return
    assert r["models"] == 1 and r["table_rows"] > 0
    assert r["fine_tuning_power"] == {}  # no fine-tune: no power to state
    claims = {c["id"]: c for c in load_claims()}
    for cid in ("C13", "C14"):
        v = r["claims"][cid]
        assert v["verdict"] == "not run in this build" and "make compare" in v["reason"]
        assert v["original"]["verdict"] == "not run in this build"
        assert [name for name, _ in v["robustness"]] == robustness_names(claims[cid])
        assert {label for _, label in v["robustness"]} == {"not run in this build"}
    assert "Nothing to compare" in page and "no interval to show" not in page


def _judged_on_the_recording(results: dict, page: str) -> bool:
    """Whether the checkout ships `make compare`'s recorded run of the default model, and if so that C13 and
    C14 were judged on it (as tests/integration/test_recorded_compare.py checks number by number) with its
    caption on the page; without one the page's own results are checked."""
    if record_compare.find(paths.DEFAULT_MODEL) is None:
        return False
    assert all(results["claims"][c]["verdict"] != "not run in this build" for c in ("C13", "C14"))
    assert "recorded run of" in page and "recomputes it" in page
    return True


def _outputs(notebook) -> tuple[list[dict], str]:
    """(Vega-Lite specs, Markdown and text) of an executed notebook's outputs."""
    nb = json.loads(notebook.read_text())
    data = [o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", [])]
    specs = [v for d in data for k, v in d.items() if k.startswith("application/vnd.vegalite")]
    text = "\n".join("".join(d.get(k, "")) for d in data for k in ("text/markdown", "text/plain"))
    return specs, text


def beside_the_control(folder: str, reference: str) -> None:
    """The random-initialisation control of ``reference`` made twice (the second time reused) and chapter 9
    run beside it, in ``folder`` (data/, results/, notebooks/, report.json: what the two calls returned and
    left): a background job (tests/book/background.py). The reference: a tiny random model (chapter 4 costs
    seconds on it, and no recorded run of it exists, so the page is judged on what this build made)."""
    data = Path(folder) / "data"
    os.environ[paths.DATA_ENV] = str(data)
    small = {**by_name("token_identity").quick, "second_corpus": ""}
    first = build.control_runs(reference, "lee_heldout", 0, small)
    made = sorted(p.name for p in (data / "models").iterdir())
    again = build.control_runs(reference, "lee_heldout", 0, small)
    runs = len(list((data / "sweeps").rglob("run.json")))
    write_json(Path(folder) / "report.json", {"first": first, "made": made, "again": again, "runs": runs})
    params = {"model": reference, "pretrained": "", "results_dir": f"{folder}/results", "data_folder": str(data)}
    run_notebook(by_name("across_models").source, Path(folder) / "notebooks", params, progress=False)


REFERENCE = TinyModel(5, "tiny-reference")
CONTROL = call(beside_the_control, REFERENCE)
BACKGROUND = (chapter("across_models"), CONTROL)


def test_across_models_page_beside_the_random_initialisation_control(background, tiny_model_folder):
    """The control is made once and reused, and both are compared."""
    folder = background.result(CONTROL)
    stem = by_name("across_models").stem
    report = read_json(folder / "report.json")
    assert report["first"] == [] and report["made"] == ["tiny-reference-random-seed0"]
    assert report["again"] == [] and report["runs"] == 2  # reused, not rerun
    reference = tiny_model_folder(REFERENCE.seed, REFERENCE.name)
    notebook = folder / "notebooks" / f"{stem}.ipynb"
    r = read_json(folder / "results" / f"{stem}.json")["results"]
    specs, text = _outputs(notebook)
    assert record_compare.find(str(reference)) is None
    assert r["models"] == 2 and set(r["fine_tuning_power"]) == {"random init"}
    assert {r["claims"][c]["verdict"] for c in ("C13", "C14")} == {"not run in this build"}
    assert "No fine-tuned model has results" in text and "random-initialisation control against the reference" in text
    assert "no interval to show" not in text and "Nothing to compare" not in text
    curves = next(s for s in specs if "layer (0 = input embedding x)" in json.dumps(s))
    assert "params" not in curves  # one corpus and one quantity: no menu
    drawn = {row["model"] for rows in curves["datasets"].values() for row in rows}
    assert drawn == {"pre-trained", "random init"}
    change = next(s for s in specs if "Change per layer, 95% CI" in json.dumps(s))
    rows = [row for rows in change["datasets"].values() for row in rows if "low" in row]
    assert {row["model"] for row in rows} == {"random init"} and all(row["low"] <= row["high"] for row in rows)
    assert len(specs) == 2  # C13 and C14 not run: no verdict chart with nothing to draw
