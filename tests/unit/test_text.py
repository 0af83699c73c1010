"""Every text function is tested word by word: each public function of ``identifiability.text.<chapter>`` is
called in ``tests/unit/test_text_<chapter>.py``, which tests each of its wordings from numbers on each side of
the branch that chooses it. The stand-ins those tests pass for study results carry only fields the study
types have (:func:`stand_ins_match`)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import identifiability.text

HERE = Path(__file__).parent


def text_functions() -> dict[str, list[str]]:
    """{chapter module name: its public functions}, for every module of the text package."""
    out = {}
    for m in pkgutil.iter_modules(identifiability.text.__path__):
        module = importlib.import_module(f"identifiability.text.{m.name}")
        out[m.name] = sorted(
            n
            for n, f in vars(module).items()
            if inspect.isfunction(f) and f.__module__ == module.__name__ and n[0] != "_"
        )
    return out


def untested(functions: dict[str, list[str]], tests: Path) -> list[str]:
    """'module.function' for each function its module's test file (``test_text_<module>.py`` in ``tests``) never
    calls, and 'module' for a module without one."""
    out = []
    for module, names in functions.items():
        f = tests / f"test_text_{module}.py"
        if not f.exists():
            out.append(f"{module} (no {f.name})")
            continue
        source = f.read_text()
        out += [f"{module}.{n}" for n in names if not re.search(rf"\b{n}\(", source)]
    return out


def test_every_text_function_is_called_in_its_chapters_test():
    functions = text_functions()
    assert set(functions) >= {"model_and_data", "nonidentifiability", "effective_attention", "across_models"}
    assert sum(map(len, functions.values())) >= 50
    assert untested(functions, HERE) == []


def test_the_coverage_check_can_fail(tmp_path):
    (tmp_path / "test_text_a.py").write_text("def test_x():\n    assert prose.said(1)\n    assert 'unsaid' in x\n")
    assert untested({"a": ["said", "unsaid"], "b": ["any"]}, tmp_path) == ["a.unsaid", "b (no test_text_b.py)"]


def stand_ins_match(pairs) -> list[str]:
    """For each (stand-in, study type) the stand-in's fields that the type has neither as a field nor as an
    attribute (a property): a renamed field of a study must fail the text tests, not only a real run."""
    out = []
    for fake, kind in pairs:
        known = {f.name for f in dataclasses.fields(kind)} | set(dir(kind))
        out += [f"{kind.__name__}.{n}" for n in sorted(set(vars(fake)) - known)]
    return out


def test_the_stand_in_check_can_fail():
    from types import SimpleNamespace

    from identifiability.studies.model_and_data import ExampleSentence

    assert stand_ins_match([(SimpleNamespace(example="a", renamed=1), ExampleSentence)]) == ["ExampleSentence.renamed"]
