"""What each chapter's results file holds: every key a chapter records, with the kind of its value.

A chapter whose sections are studies (:mod:`identifiability.studies`) has its keys derived from the recorded
fields of its study result types (``STUDY_MODULES`` names the module; its ``RESULTS`` tuple lists the types),
plus ``COMMON``. The others are still declared by hand in ``RESULTS``.
``Chapter.save`` checks the results against this before writing, so a misspelt or undeclared key stops the
chapter with a one-line error instead of producing a file that readers, tests and the claims page cannot
find their fields in. A value may always be None (NaN and infinity are written as null). Bump
``SCHEMA_VERSION`` when a key changes meaning; the version is written into every results file.
"""

from __future__ import annotations

import importlib

from .studies import schema_of

SCHEMA_VERSION = 1
KINDS = {"number": (int, float), "bool": (bool,), "str": (str,), "list": (list,), "dict": (dict,), "any": (object,)}

RESULTS: dict[str, dict[str, str]] = {
    "01_model_and_data": {
        "corpus_sentences": "number",
        "example": "str",
        "example_row_sums_max_error": "number",
        "example_tokens": "list",
        "max_tokens_seen": "number",
        "mean_tokens": "number",
        "median_tokens": "number",
        "sampled": "number",
        "share_longer_than_d_head": "number",
    },
    "07_explore": {
        "hta_rows_sum_to_one": "number",
        "max_abs_HTA_contribution_c": "number",
        "max_abs_effective_attention": "number",
        "max_abs_raw_attention_A": "number",
        "tokens": "list",
    },
    "08_across_models": {"claims": "dict", "models": "number", "table_rows": "number"},
}


# Keys every chapter may record outside its studies: verdicts (Chapter.verdict), run time and page weight.
COMMON = {"claims": "dict", "runtime_s": "number", "page_bytes": "dict"}
# chapter -> module of identifiability.studies whose RESULTS tuple lists the chapter's result types
STUDY_MODULES: dict[str, str] = {
    "03_effective_attention": "effective",
    "02_nonidentifiability": "nonidentifiability",
    "04_token_identity": "identity",
    "05_angle_magnitude": "geometry",
    "06_context_mixing": "context_mixing",
}


def declared(chapter: str) -> dict[str, str]:
    """Every key ``chapter`` may record, with its kind."""
    if chapter in STUDY_MODULES:
        module = importlib.import_module(f"identifiability.studies.{STUDY_MODULES[chapter]}")
        return {**COMMON, **schema_of(*module.RESULTS)}
    if chapter in RESULTS:
        return RESULTS[chapter]
    raise SchemaError(f"no results schema for chapter {chapter!r}: add its studies to identifiability.schema")


class SchemaError(ValueError):
    """Results that do not match the chapter's declared keys; the message names the key."""


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
