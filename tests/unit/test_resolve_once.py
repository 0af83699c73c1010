"""A command resolves its model and its corpus once, at its entry (identifiability.models.keys.target); every
layer below receives what it resolved and never resolves the name again.

The counter wraps every function of ``keys`` that takes a model or a corpus by name, wherever a module holds
it, and counts the outermost calls that get a name rather than something resolved already (a function that
calls another of them counts once). Files are hashed into a content key at most once per command too."""

from __future__ import annotations

import functools
import sys
from collections import Counter

import pytest

from identifiability import cli
from identifiability.base import paths
from identifiability.base.fileio import write_json
from identifiability.chapters import execution
from identifiability.chapters.contract import MEASURES, by_name, by_role
from identifiability.models import fingerprint, keys
from identifiability.recorded import store as recorded
from identifiability.runs import corpus_hta, sweep

# function name: the positions of its model and of its corpus argument (None: it takes no such argument)
_BY_NAME = {
    "resolve": (0, None),
    "model_key": (0, None),
    "content_key_of": (0, None),
    "model_ref": (0, None),
    "results_dir": (0, 1),
    "build_dir": (0, 1),
    "target": (0, 1),
    "corpus_key": (None, 0),
    "corpus_identity": (None, 0),
    "corpus_ref": (None, 0),
}


def _resolved(value) -> bool:
    return isinstance(value, (getattr(keys, "ModelRef", ()), getattr(keys, "CorpusRef", ())))


@pytest.fixture
def resolutions(monkeypatch):
    """Counter of ``model``/``corpus`` names resolved, and ``hashed`` content keys computed, from then on."""
    count: Counter = Counter()
    depth = [0]

    def counted(name: str, fn):
        model_at, corpus_at = _BY_NAME[name]

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if depth[0] == 0:
                for kind, at in (("model", model_at), ("corpus", corpus_at)):
                    if at is not None and at < len(args) and not _resolved(args[at]):
                        count[kind] += 1
            depth[0] += 1
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1

        return wrapper

    def hashed(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            count["hashed"] += 1
            return fn(*args, **kwargs)

        return wrapper

    wrapped = {id(f): counted(n, f) for n in _BY_NAME if (f := getattr(keys, n, None)) is not None}
    wrapped[id(fingerprint.content_key)] = hashed(fingerprint.content_key)
    for module in [m for n, m in sys.modules.items() if n.startswith("identifiability") and m is not None]:
        for attr, value in list(vars(module).items()):
            if callable(value) and id(value) in wrapped:
                monkeypatch.setattr(module, attr, wrapped[id(value)])
    return count


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "data"))
    monkeypatch.setattr(paths, "build_root", lambda: tmp_path / "_build")
    monkeypatch.setattr(recorded, "root", lambda source=None: tmp_path / "recorded")
    monkeypatch.setattr(recorded, "git_state", lambda source: ("abc", False))
    return tmp_path / "data"


def _results(corpus: str) -> object:
    """The default model's results folder on ``corpus``, spelled out (the counter must not count it)."""
    return paths.results_root() / paths.DEFAULT_MODEL / corpus


def _once(count: Counter) -> None:
    assert (count["model"], count["corpus"] <= 1, count["hashed"] <= 1) == (1, True, True), dict(count)


def test_record_measures_resolves_its_model_and_corpus_once(data, resolutions, monkeypatch):
    from identifiability.recorded import measures

    stem = by_role(MEASURES).stem
    monkeypatch.setattr(measures, "sample_texts", lambda *a, **k: ["a b c"])
    monkeypatch.setattr(corpus_hta, "on_cluster", lambda *a, **k: None)

    def chapter(source, out, params, progress=True):
        results = {"scores": [], "seconds": {}, "n_scored": 50, "unsupported": {}, "claims": {}}
        write_json(_results("lee") / f"{stem}.json", {"params": params, "results": results})

    monkeypatch.setattr(execution, "run_notebook", chapter)
    measures.record_measures(echo=lambda s: None)
    _once(resolutions)


def test_record_confirm_resolves_its_model_and_corpus_once(data, resolutions, monkeypatch):
    from identifiability.recorded import confirm
    from identifiability.verdicts.core import HOLDS, Verdict

    v = Verdict("C6", HOLDS, 1.0, None, 0.0, "n", "r", "w")
    doc = {"results": {"claims": {"C6": v.to_json()}}}
    write_json(_results(confirm.CORPUS) / f"{by_name('token_identity').stem}.json", doc)
    confirm.record_confirm(run=False, echo=lambda s: None)
    _once(resolutions)


def test_run_resolves_its_model_and_corpus_once(data, resolutions, monkeypatch):
    monkeypatch.setattr(cli, "run_notebook", lambda nb, out, params, strict: out / nb.name)
    assert cli.main(["run", str(paths.source_root() / "notebooks" / f"{by_name('model_and_data').stem}.md")]) == 0
    _once(resolutions)


def test_hta_resolves_its_model_once(data, resolutions, monkeypatch):
    monkeypatch.setattr(corpus_hta, "on_cluster", lambda *a, **k: 0)
    assert cli.main(["hta", "--n", "2", "--max-tokens", "16"]) == 0
    _once(resolutions)


def test_a_sweeps_plan_resolves_each_model_and_corpus_once(data, resolutions):
    runs, problems = sweep.plan([paths.DEFAULT_MODEL], ["lee"], [0, 1], ["01", "02"], {})
    assert len(runs) == 4 and not problems
    _once(resolutions)
