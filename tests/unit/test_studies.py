"""The study result base: recorded fields, per-unit data kept out, and the schema derived from field types."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from identifiability.studies import Study, data, kind_of, schema_of


@dataclass(frozen=True)
class _Example(Study):
    n: int
    rate: float | None
    ok: bool
    name: str
    curve: list[float]
    table: dict[str, float]
    per_unit: object = data(default=None)


def test_record_keeps_recorded_fields_and_drops_per_unit_data():
    r = _Example(3, None, True, "x", [0.1], {"a": 1.0}, per_unit=[1, 2, 3])
    assert r.record() == {"n": 3, "rate": None, "ok": True, "name": "x", "curve": [0.1], "table": {"a": 1.0}}
    with pytest.raises(AttributeError):
        r.n = 4  # frozen


def test_schema_is_derived_from_field_types():
    assert schema_of(_Example) == {
        "n": "number",
        "rate": "number",
        "ok": "bool",
        "name": "str",
        "curve": "list",
        "table": "dict",
    }
    assert kind_of(int | str) == "any"


def test_a_name_recorded_with_two_kinds_is_refused():
    @dataclass(frozen=True)
    class _Other(Study):
        n: str

    with pytest.raises(TypeError, match="'n' is recorded as number and as str"):
        schema_of(_Example, _Other)
