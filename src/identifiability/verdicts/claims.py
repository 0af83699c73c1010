"""The claims table (``data/claims.csv``: the paper's and the review's claims with their pre-registered
rules, each claim's constants and robustness alternatives), its amendments (``data/amendments.csv``: a
later rule, dated, with its reason and the mark *post hoc*), and each claim beside the verdict its chapter
recorded.

A pre-registered rule is never rewritten: an amendment adds a version, and the verdict of the original
rule is computed and shown beside the current one."""

from __future__ import annotations

import csv
from pathlib import Path

from ..base import paths
from ..base.fileio import read_json
from ..base.results import RECORDED_FROM
from ..chapters.contract import results_file
from .core import Rules


def _read(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def load_amendments() -> list[dict]:
    """Every amendment (data/amendments.csv), in file order: id, version, date, rule, reason, mark."""
    return _read(paths.claims_file().with_name("amendments.csv"))


NAMES = "claim_names.csv"  # data/<NAMES>: each claim's short name and its statement in plain words


def load_names() -> dict[str, dict]:
    """{claim id: {"short": a name of a few words, "plain": the claim in plain words, no notation}} from
    data/claim_names.csv: what the findings tables show. Kept apart from data/claims.csv, whose rows are the
    pre-registered rules: naming a claim for readers never touches a rule."""
    return {r["id"]: {"short": r["short"], "plain": r["plain"]} for r in _read(paths.claims_file().with_name(NAMES))}


def load_claims() -> list[dict]:
    """The paper's and the review's claims, one dict per row of data/claims.csv, with the rule in force:
    ``rule`` is the latest amendment's where the claim was amended (``original_rule`` keeps the pre-registered
    one; ``amendment`` holds the latest amendment's date, reason and mark, or None; ``amendments`` every
    version in order), and its names for readers (``short``, ``plain``: :func:`load_names`)."""
    by_id: dict[str, list[dict]] = {}
    for a in sorted(load_amendments(), key=lambda a: int(a["version"])):
        by_id.setdefault(a["id"], []).append(a)
    names = load_names()
    rows = []
    for c in _read(paths.claims_file()):
        history = by_id.get(c["id"], [])
        a = history[-1] if history else None
        rule = a["rule"] if a else c["rule"]
        if c["id"] not in names:
            raise KeyError(f"{c['id']} has no row in data/{NAMES}: add its short name and its plain statement")
        rows.append(
            {**c, **names[c["id"]], "original_rule": c["rule"], "rule": rule, "amendment": a, "amendments": history}
        )
    return rows


def rules_of(claim: dict) -> Rules:
    """The rules a row of :func:`load_claims` is judged under: the rule in force and, if it was amended, the
    pre-registered one."""
    return Rules(claim["rule"], claim["original_rule"] if claim["amendment"] is not None else None)


def rules(claim_id: str) -> Rules:
    """The rules claim ``claim_id`` is judged under (:func:`rules_of` of its row)."""
    found = [c for c in load_claims() if c["id"] == claim_id]
    if not found:
        raise KeyError(f"no claim {claim_id!r} in data/claims.csv")
    return rules_of(found[0])


def robustness_names(claim: dict) -> list[str]:
    """The alternatives a claim's row names (``robustness``: 'name: change; name: change')."""
    text = claim.get("robustness") or ""
    return [item.split(": ", 1)[0].strip() for item in text.split("; ") if item.strip()]


def constants(claim: dict) -> dict[str, float]:
    """The named constants of a claim's rules (``constants``: 'NAME=value; NAME=value')."""
    out = {}
    for item in (claim.get("constants") or "").split(";"):
        if item.strip():
            name, value = item.split("=")
            out[name.strip()] = float(value)
    return out


def claims_table(results_dir: str | Path) -> list[dict]:
    """Each claim with the verdict its chapter recorded in ``results_dir``: the fields of
    :class:`identifiability.verdicts.Verdict` (``verdict`` is "not measured" where the chapter has not run),
    the row's fields, ``alternatives``: the row's text of its robustness alternatives, and ``twin``: the verdict
    (as recorded) of the same claim on the model's untrained twin, where the chapter judged it there (results key
    ``twin_claims``), else None, and ``recorded_from``: {"target", "date"} of the recorded run the verdict was
    judged on (results key ``recorded_from``), else None."""
    rows = []
    for claim in load_claims():
        path = results_file(results_dir, claim["chapter"])  # or the chapter's file of an older build
        results = read_json(path)["results"] if path.is_file() else {}
        measured = results.get("claims", {}).get(claim["id"])
        twin = results.get("twin_claims", {}).get(claim["id"])  # the same claim on the untrained twin
        source = (results.get(RECORDED_FROM) or {}).get(claim["id"])
        # the csv's fields win (a verdict's own ``claim`` field is its id), except ``robustness``: the verdict's
        # (alternative, verdict) pairs; the row's text of the alternatives becomes ``alternatives``
        fixed = {k: v for k, v in claim.items() if k != "robustness"}
        rows.append(
            {
                **(measured or {"verdict": "not measured"}),
                **fixed,
                "alternatives": claim["robustness"],
                "twin": twin,
                "recorded_from": source,
            }
        )
    return rows
