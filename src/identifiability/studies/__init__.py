"""Studies: one function per chapter section, from a loaded model, texts and parameters to a typed result.

A study returns a frozen dataclass derived from :class:`Study`. Its fields are of two kinds:

- *recorded* quantities (plain numbers, strings, lists and dicts of them): what the chapter's results file
  holds, under the field's name; the results schema (:mod:`identifiability.book.schema`) is derived from these
  fields, so a new quantity is declared once, by adding a field;
- *per-unit data* (tables, tensors, intervals) made with :func:`data`: what the charts draw and the
  verdict functions take, kept out of the results file.

The notebook cell then reads: compute (the study call, visible) -> judge -> chart -> generated text, and
``ch.record(**result.record())`` files the recorded fields. Modules here compute; they import neither
charts nor notebook helpers.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field


def data(**kwargs):
    """A field for per-unit data (tables, tensors, intervals): kept on the result, not recorded."""
    return field(metadata={"record": False}, **kwargs)


@dataclass(frozen=True)
class Study:
    """Base of every study result (a frozen dataclass)."""

    def record(self) -> dict[str, object]:
        """The recorded fields by name: what goes into the chapter's results file."""
        return {f.name: getattr(self, f.name) for f in recorded_fields(type(self))}


def recorded_fields(cls: type[Study]) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if f.metadata.get("record", True)]


_KINDS = {int: "number", float: "number", bool: "bool", str: "str", list: "list", tuple: "list", dict: "dict"}


def kind_of(annotation) -> str:
    """The schema kind ('number', 'bool', 'str', 'list', 'dict', 'any') of a field's type annotation.

    ``X | None`` is the kind of X (a value may always be None); a union of several kinds is 'any'."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        kinds = {kind_of(a) for a in typing.get_args(annotation) if a is not type(None)}
        if kinds <= {"number"}:
            return "number"
        return kinds.pop() if len(kinds) == 1 else "any"
    base = origin or annotation
    return _KINDS.get(base, "any")


def schema_of(*classes: type[Study]) -> dict[str, str]:
    """Every recorded field of ``classes`` with its kind; a name recorded by two classes must agree."""
    out: dict[str, str] = {}
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for f in recorded_fields(cls):
            kind = kind_of(hints[f.name])
            if out.get(f.name, kind) != kind:
                raise TypeError(f"{f.name!r} is recorded as {out[f.name]} and as {kind} ({cls.__name__})")
            out[f.name] = kind
    return out
