"""What each chapter's results file holds: every key a chapter records, with the kind of its value.

The keys are derived, never declared by hand: a chapter's contract entry (:mod:`identifiability.chapters.contract`)
names its module of :mod:`identifiability.studies`, whose ``RESULTS`` tuple lists the chapter's result types;
every recorded field of those types is a key, with the kind of its annotation, plus ``COMMON``.
``Chapter.save`` checks the results against this before writing, so a misspelt or undeclared key stops the
chapter with a one-line error instead of producing a file that readers, tests and the claims page cannot
find their fields in. A value may always be None (NaN and infinity are written as null). Bump
``SCHEMA_VERSION`` when a key changes meaning; the version is written into every results file.
"""

from __future__ import annotations

import importlib

from ..base.results import ADOPTED, RECORDED_FROM
from ..chapters.contract import CHAPTERS
from ..studies import schema_of

SCHEMA_VERSION = 1
KINDS = {"number": (int, float), "bool": (bool,), "str": (str,), "list": (list,), "dict": (dict,), "any": (object,)}
# Keys every chapter may record outside its studies: verdicts (Chapter.judge; on the untrained twin
# Chapter.judge_twin, with the twin's provenance and parameters; on another model, Chapter.judge_on), the
# verdicts adopted from a recorded run (Chapter.recorded), the recorded run each verdict was judged on, run
# time and page weight.
COMMON = {
    "claims": "dict",
    "twin_claims": "dict",
    "other_claims": "dict",
    ADOPTED: "dict",
    RECORDED_FROM: "dict",
    "twin": "dict",
    "runtime_s": "number",
    "page_bytes": "dict",
}


class SchemaError(ValueError):
    """Results that do not match the chapter's declared keys; the message names the key."""


def declared(chapter: str) -> dict[str, str]:
    """Every key ``chapter`` may record, with its kind."""
    spec = CHAPTERS.get(chapter)
    if spec is None:
        raise SchemaError(
            f"no results schema for chapter {chapter!r}: it is not a chapter of "
            "identifiability.chapters.contract.CHAPTERS"
        )
    module = importlib.import_module(spec.module("studies"))
    return {**COMMON, **schema_of(*module.RESULTS)}


def check(chapter: str, results: dict) -> None:
    """Raise SchemaError if ``results`` holds a key ``chapter`` does not declare, or a value of another kind."""
    keys = declared(chapter)
    for key, value in results.items():
        if key not in keys:
            raise SchemaError(f"{chapter} records {key!r}, which no study result type of the chapter declares")
        kind = keys[key]
        ok = value is None or (isinstance(value, KINDS[kind]) and not (kind == "number" and isinstance(value, bool)))
        if not ok:
            raise SchemaError(f"{chapter}: {key!r} should be {kind}, got {type(value).__name__}")
