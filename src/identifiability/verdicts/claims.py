"""The claims table (``data/claims.csv``: the paper's and the review's claims with their pre-registered
rules), and each claim beside the verdict its chapter recorded."""

from __future__ import annotations

import csv
from pathlib import Path

from .. import paths
from ..fileio import read_json


def load_claims() -> list[dict]:
    """The paper's and the review's claims (data/claims.csv), one dict per row."""
    with open(paths.claims_file(), newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def claims_table(results_dir: str | Path) -> list[dict]:
    """Each claim of data/claims.csv with the verdict its chapter recorded in ``results_dir``: the fields of
    :class:`identifiability.verdicts.Verdict` (``verdict`` is "not measured" where the chapter has not run)."""
    rows = []
    for claim in load_claims():
        path = Path(results_dir) / f"{claim['chapter']}.json"
        measured = read_json(path)["results"].get("claims", {}).get(claim["id"]) if path.is_file() else None
        # the csv's fields win: a verdict's own ``claim`` field is its id, not the claim's text
        rows.append({**(measured or {"verdict": "not measured"}), **claim})
    return rows
