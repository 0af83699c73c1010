"""Every key a chapter records is declared, with its kind; an undeclared key stops the chapter."""

from __future__ import annotations

import ast
import importlib

import jupytext
import pytest

from identifiability.book import schema
from identifiability.chapters.contract import CHAPTERS, by_name, chapter_sources
from identifiability.studies import recorded_fields


def _recorded_keys(source) -> set[str]:
    keys = set()
    for cell in jupytext.read(source).cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "record":
                keys |= {kw.arg for kw in node.keywords if kw.arg}
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "verdict":
                keys.add("claims")
    return keys


@pytest.mark.parametrize("source", chapter_sources(), ids=lambda s: s.stem)
def test_every_key_a_chapter_records_is_declared(source):
    missing = _recorded_keys(source) - set(schema.declared(source.stem))
    assert not missing, f"{source.stem} records undeclared keys {sorted(missing)}"


def test_undeclared_keys_and_wrong_kinds_are_named():
    schema.check(by_name("effective_attention").stem, {"d_v": 32, "pearson_min_below_dv": None, "claims": {}})
    with pytest.raises(schema.SchemaError, match="records 'pearson_minimum'"):
        schema.check(by_name("effective_attention").stem, {"pearson_minimum": 0.5})
    with pytest.raises(schema.SchemaError, match="'d_v' should be number, got str"):
        schema.check(by_name("effective_attention").stem, {"d_v": "32"})
    with pytest.raises(schema.SchemaError, match="should be number, got bool"):
        schema.check(by_name("effective_attention").stem, {"d_v": True})
    with pytest.raises(schema.SchemaError, match="no results schema"):
        schema.check("99_unknown", {})


@pytest.mark.parametrize("spec", CHAPTERS.values(), ids=lambda s: s.stem)
def test_every_chapter_derives_its_keys_from_its_study_types(spec):
    keys = schema.declared(spec.stem)
    module = importlib.import_module(spec.module("studies"))
    fields = {f.name for cls in module.RESULTS for f in recorded_fields(cls)}
    assert fields and set(keys) == fields | set(schema.COMMON)
