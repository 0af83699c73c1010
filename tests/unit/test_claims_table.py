"""The claims table is the contract of the verdicts: every constant the verdicts package uses is written in
it (with the number its rules state), amendments keep the original rule and say why, and the chapters' prose
states no outcome that the data did not generate."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from identifiability.base import stats
from identifiability.chapters.contract import CHAPTERS
from identifiability.verdicts.claims import constants, load_amendments, load_claims, robustness_names

CLAIMS = load_claims()
JUDGING = tuple(c for c in CHAPTERS.values() if "verdicts" in c.layers)
MODULES = tuple(importlib.import_module(c.module("verdicts")) for c in JUDGING)
ROOT = Path(__file__).resolve().parents[2]


def _spellings(value: float) -> set[str]:
    """How a rule may write a number: 0.85, 85%, 85 points, 1e-8, 3 (times)."""
    out = {f"{value:g}", f"{value:.2f}", f"{100 * value:g}%", f"{100 * value:g} points"}
    mant, exp = f"{value:.0e}".split("e")
    out.add(f"{mant}e{int(exp)}")
    return out


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c["id"])
def test_every_constant_of_a_claim_is_the_package_value_and_stated_in_its_rules(claim):
    text = " ".join([claim["rule"], claim["original_rule"], claim["robustness"]])
    for name, value in constants(claim).items():
        module_values = [getattr(m, name) for m in MODULES if hasattr(m, name)]
        assert module_values, f"{claim['id']}: {name} is in data/claims.csv but not in the verdicts package"
        assert all(v == pytest.approx(value) for v in module_values), f"{name}: package {module_values} != {value}"
        assert any(s in text for s in _spellings(value)), f"{claim['id']}: {name} = {value:g} appears in no rule"


def test_every_numeric_constant_of_the_verdicts_package_is_in_the_claims_table():
    listed = {name for c in CLAIMS for name in constants(c)}
    used = {
        name
        for m in MODULES
        for name, value in vars(m).items()
        if name.isupper()
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
        and not hasattr(stats, name)  # the interval level and resample count, imported from stats
    }
    assert used - listed == set(), "constants missing from data/claims.csv's constants column"


def test_amendments_keep_the_original_rule_and_say_why():
    ids = {c["id"] for c in CLAIMS}
    for a in load_amendments():
        assert a["id"] in ids and int(a["version"]) >= 2
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", a["date"])
        assert a["mark"] == "post hoc: amended after the original verdict was seen"
        assert len(a["reason"]) > 80 and a["rule"] != next(c["original_rule"] for c in CLAIMS if c["id"] == a["id"])
    amended = {c["id"] for c in CLAIMS if c["amendment"]}
    assert amended == {a["id"] for a in load_amendments()}


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c["id"])
def test_every_claim_names_distinct_robustness_alternatives(claim):
    names = robustness_names(claim)
    assert names and len(names) == len(set(names))


# Phrases that state a finding. In a chapter's prose (outside code cells) they would be fixed text, true or
# not for the model a reader runs; findings come from text functions fed by results.
OUTCOME = [
    r"\bwe (?:find|found|see|observe)\b",
    r"\bindeed\b",
    r"\bconfirm(?:s|ed)\b",
    r"\brefut(?:es|ed)\b",
    r"\bas expected\b",
    r"\bturns out\b",
    r"\bclearly\b",
    r"\bC\d+\b[^.\n]{0,40}\b(?:holds|fails)\b(?! if)",
    r"holds with equality",
    r"much further",
    r"must read",
    r"\bunbiased\b",
    r"a median of \d+",
    r"of all-MiniLM",
]


@pytest.mark.parametrize("stem", list(CHAPTERS))
def test_chapter_prose_states_no_outcome(stem):
    md = re.sub(r"```\{code-cell\}.*?```", "", (ROOT / "notebooks" / f"{stem}.md").read_text(), flags=re.S)
    found = [m.group(0) for p in OUTCOME for m in re.finditer(p, md, flags=re.I)]
    assert not found, f"{stem}: fixed outcome phrases {found}: generate them from results (text/<chapter>.py)"


def test_every_claim_is_judged_by_its_chapters_entry_point():
    """One way: ``verdicts.<chapter name>.c<N>`` (the shape is checked in ``test_layout.py``)."""
    for claim in CLAIMS:
        module = next(m for m, c in zip(MODULES, JUDGING) if c.stem == claim["chapter"])
        assert callable(getattr(module, claim["id"].lower(), None)), claim["id"]
