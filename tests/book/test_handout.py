"""A student version of a chapter runs, and its check cells reject a wrong answer with a message that says
what is wrong (the book build runs the same checks on the solutions: see every chapter's notebook test)."""

import re

import pytest

from identifiability.base import paths
from identifiability.book import handout
from identifiability.chapters.contract import CHAPTERS, by_name

from .background import every_chapter

BACKGROUND = every_chapter()


def test_a_wrong_answer_fails_its_check_with_a_message(tmp_path, monkeypatch):
    import jupytext
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    spec = by_name("model_and_data")
    nb = handout.student_version(jupytext.read(spec.source), spec.stem)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    for name, value in {**spec.quick, "results_dir": str(tmp_path / "results")}.items():
        params.source, n = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", params.source, flags=re.M)
        assert n == 1, name
    answer = next(c for c in nb.cells if "answer" in c.metadata.get("tags", []))
    answer.source += "h, key_token = -1, 'no such token'\n"
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "data"))
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    with pytest.raises(CellExecutionError) as e:
        client.execute()
    assert e.value.ename == "CheckFailed" and "h = -1 is not a head index" in e.value.evalue
    failed = next(c for c in nb.cells if any(o.get("output_type") == "error" for o in c.get("outputs", [])))
    assert "check" in failed.metadata["tags"] and 'needs(globals(), "h", "key_token")' in failed.source


def test_every_check_passed_on_the_solutions_in_the_executed_chapters(background):
    import json

    for spec in CHAPTERS.values():
        nb = json.loads(background.notebook(spec.name).read_text())
        checks = [c for c in nb["cells"] if "check" in c["metadata"].get("tags", [])]
        for c in checks:
            streams = [o["text"] for o in c.get("outputs", []) if o.get("output_type") == "stream"]
            printed = "".join("".join(t) if isinstance(t, list) else t for t in streams)
            assert "passes every check" in printed, f"{spec.stem}: a check did not pass on its solution"
        solutions = [c for c in nb["cells"] if "solution" in c["metadata"].get("tags", [])]
        assert len(checks) == len(solutions), spec.stem
        # the explorer and the comparison across models have no exercises; every other chapter teaches with them
        assert checks or spec.name in ("explore", "across_models"), f"{spec.stem}: no exercise was checked"
