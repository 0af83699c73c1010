"""A page never crashes on a record (issue 52, item 2): each chapter that reads a recorded run, given one with
missing or partial numbers, says so in one line ("not run in this build" and the command) and goes on. The
records are copies of the committed ones, cut down in memory; the chapters' own code paths are called (the
notebooks cannot run in the unit tier)."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import pytest

from identifiability.base.fileio import write_json
from identifiability.recorded import store as recorded

COMMITTED = Path(__file__).resolve().parents[2] / "data" / "recorded"


def _committed(job: str) -> recorded.Recorded:
    """The first committed record of ``job``, read as it is (never written back)."""
    results = sorted((COMMITTED / job).rglob(recorded.RESULTS))[0]
    key = results.parent.relative_to(COMMITTED / job).as_posix()
    prov = json.loads((results.parent / recorded.PROVENANCE).read_text())
    return recorded.Recorded(job, key, json.loads(results.read_text()), prov)


def _cut(rec: recorded.Recorded, **results) -> recorded.Recorded:
    r = copy.deepcopy(rec.results)
    for k, v in results.items():
        if v is None:
            r.pop(k, None)
        else:
            r[k] = v
    return recorded.Recorded(rec.job, rec.key, r, rec.provenance)


def _one_line(text: str | None, make: str) -> None:
    assert text and "\n" not in text and "not run in this build" in text and f"`make {make}" in text, text


# chapter 10 -----------------------------------------------------------------------------------------


def test_chapter_10_says_a_record_of_one_sentence_is_partial_and_judges_its_none_bounds_undecided():
    from identifiability.recorded import measures
    from identifiability.studies.measures import scores_from_rows
    from identifiability.verdicts import measures as rules

    rec = _committed("measures")
    assert measures.partial(rec) is None
    # what `record-measures --n 1` wrote: one sentence, intervals without bounds
    kinds = ("statistic", "minus_shuffled", "minus_distance", "stronger", "minus_stronger")
    rows = [{**row, **{k: [row[k][0], None, None, 1] for k in kinds
                       if row[k] is not None}} for row in rec.results["scores"]]  # fmt: skip
    small = _cut(rec, n_scored=1, scores=rows)
    _one_line(measures.partial(small), "measures")
    _one_line(measures.partial(_cut(rec, scores=None)), "measures")
    _one_line(measures.partial(_cut(rec, n_scored=None)), "measures")
    score = scores_from_rows(rows[:1])[0]
    assert rules.state(score) == rules.UNDECIDED  # was: TypeError '>' between NoneType and float


def test_chapter_10s_rules_judge_a_record_without_bounds_without_crashing():
    from identifiability.evidence.measures import MeasuresEvidence
    from identifiability.studies.measures import scores_from_rows
    from identifiability.verdicts import measures as rules
    from identifiability.verdicts.claims import rules as rules_of

    rec = _committed("measures")
    # every interval without bounds, the stronger null (C22 version 2) included where the record predates it
    named = ("statistic", "minus_shuffled", "minus_distance", "minus_raw", "stronger", "minus_stronger")
    rows = [{**row, **{k: None if row.get(k, row["statistic"]) is None else
                       [row.get(k, row["statistic"])[0], None, None, 50] for k in named}}
            for row in rec.results["scores"]]  # fmt: skip
    scores = scores_from_rows(rows)
    ev = MeasuresEvidence(scores, 50, max(s.layer for s in scores), ())
    for judge, claim in ((rules.c22, "C22"), (rules.c23, "C23"), (rules.c24, "C24")):
        v = judge(ev, rules_of(claim))
        assert v.verdict == v.original.verdict == rules.INCONCLUSIVE


# chapter 7 ------------------------------------------------------------------------------------------


def test_chapter_7_says_a_family_record_without_chapter_results_is_partial():
    from identifiability.recorded import family

    rec = _committed("family")
    assert family.partial(rec) is None and set(family.head_width_claims(rec)) == {"C19", "C20", "C21"}
    one = {"mlm-w128-dv32-seed0": {"provenance": rec.results["members"]["mlm-w128-dv32-seed0"]["provenance"]}}
    stopped = _cut(rec, head_width=None, members=one)  # what `make family` stopped early recorded
    _one_line(family.partial(stopped), "family")
    assert family.head_width_claims(stopped) == {}
    assert family.member_verdicts(stopped, "C6") == {} and family.claims_across(one).empty
    head = copy.deepcopy(rec.results["head_width"])
    del head["results"]["claims"]["C20"]
    cut = _cut(rec, head_width=head)
    assert "no C20" in family.partial(cut) and set(family.head_width_claims(cut)) == {"C19", "C21"}
    assert family.member_verdicts(_cut(rec, members={"x": {"chapters": None}}), "C6") == {}


# chapter 9 ------------------------------------------------------------------------------------------


def test_chapter_9_says_a_compare_record_without_chapter_results_is_partial(tmp_path):
    from identifiability.recorded import compare
    from identifiability.studies.across_models import reference_comparison

    rec = _committed("compare")
    assert compare.partial(rec) is None
    files = {k: v for k, v in rec.results["files"].items() if k in compare.provenances(rec.results).values()}
    _one_line(compare.partial(_cut(rec, files=files)), "compare")
    broken = {k: ({"chapter": v.get("chapter")} if "params" in v else v) for k, v in rec.results["files"].items()}
    _one_line(compare.partial(_cut(rec, files=broken)), "compare")
    # the pre-trained reference's section: a partial record is no comparison, never a traceback
    name = "mlm-w128-dv32-seed0"
    recorded.write(compare.JOB, f"{name}-0123456789", {**rec.results, "files": files}, rec.provenance, tmp_path)
    assert reference_comparison(name, 0, "lee_heldout", band=0.05, power=0.8, source=tmp_path) is None


# chapter 6 ------------------------------------------------------------------------------------------


def test_chapter_6_says_a_c10_record_without_its_per_sentence_numbers_is_partial():
    from identifiability.recorded import proportional

    rec = _committed("c10")
    assert proportional.partial(rec) is None
    _one_line(proportional.partial(_cut(rec, sentences={})), "record-c10")
    _one_line(proportional.partial(_cut(rec, draws=None)), "record-c10")
    _one_line(proportional.partial(_cut(rec, eligible={})), "record-c10")


# the claims page ------------------------------------------------------------------------------------


def test_the_claims_page_says_a_confirmation_record_without_verdicts_is_partial(tmp_path, monkeypatch):
    from identifiability.book import findings
    from identifiability.recorded import confirm
    from identifiability.recorded import family as record_family

    rec = _committed("confirm")
    assert confirm.partial(rec) is None
    claims = {c: {"estimate": v.get("estimate")} for c, v in rec.results["claims"].items()}  # verdicts cut off
    cut = _cut(rec, claims=claims)
    _one_line(confirm.partial(cut), "confirm")
    assert confirm.confirmation("C4", None, [cut]) is None
    monkeypatch.setattr(confirm, "find", lambda model=None, corpus=None: cut)
    monkeypatch.setattr(record_family, "find", lambda *a, **k: None)
    (tmp_path / "book").mkdir()
    write_json(tmp_path / "results" / "x.json", {})
    findings.write_claims_page(tmp_path, tmp_path / "results")
    assert confirm.partial(cut) in (tmp_path / "book" / "claims.md").read_text()


# a record whose results do not match its provenance's hash ------------------------------------------


def _tampered(job: str, source: Path, key: str | None = None) -> recorded.Recorded:
    """The committed record of ``job`` written into the checkout ``source`` (under ``key``), then its results
    edited by hand: :func:`recorded.find` raises RecordMissing ("unreadable") on it."""
    rec = _committed(job)
    written = recorded.write(job, key or rec.key, rec.results, rec.provenance, source)
    path = recorded.folder(job, written.key, source) / recorded.RESULTS
    path.write_text(path.read_text().replace("{", "{ ", 1))
    return written


def test_an_unreadable_record_is_one_line_on_its_page_and_the_page_goes_on(tmp_path, monkeypatch):
    from identifiability.book import findings
    from identifiability.models import keys
    from identifiability.recorded import confirm, family, measures
    from identifiability.studies.across_models import reference_comparison
    from identifiability.verdicts.measures import MEASURES_MIN_SENTENCES

    for job, make in (("c10", "record-c10"), ("family", "family"), ("measures", "measures")):
        rec = _tampered(job, tmp_path)
        with pytest.raises(recorded.RecordMissing, match="unreadable"):
            recorded.find(job, rec.key, make, tmp_path)
        # chapters 6 and 7 read theirs through this, as the claims page and chapters 9 and 10 below
        found, why = recorded.for_page(functools.partial(recorded.find, job, rec.key, make, tmp_path), str)
        assert found is None
        _one_line(why, make)

    # chapter 10: its own run cannot be judged, and the record it would show is unreadable
    m = _tampered("measures", tmp_path, "m/lee")
    monkeypatch.setattr(
        measures, "find", lambda model, corpus, *a: recorded.find("measures", m.key, "measures", tmp_path)
    )
    shown, why = measures.to_show(MEASURES_MIN_SENTENCES - 1, "short", keys.target(None, "lee"))
    assert shown is None
    _one_line(why, "measures")

    # chapter 9's pre-trained reference: no comparison, never a traceback
    name = "mlm-w128-dv32-seed0"
    _tampered("compare", tmp_path, f"{name}-0123456789")
    assert reference_comparison(name, 0, "lee_heldout", band=0.05, power=0.8, source=tmp_path) is None

    # the claims page: the confirmation's and the family's lines, and the table
    c, f = _tampered("confirm", tmp_path), _tampered("family", tmp_path, "f")
    monkeypatch.setattr(
        confirm, "find", lambda model=None, corpus=None: recorded.find("confirm", c.key, "confirm", tmp_path)
    )
    monkeypatch.setattr(family, "find", lambda *a, **k: recorded.find("family", f.key, "family", tmp_path))
    (tmp_path / "book").mkdir()
    write_json(tmp_path / "results" / "x.json", {})
    findings.write_claims_page(tmp_path, tmp_path / "results")
    page = (tmp_path / "book" / "claims.md").read_text()
    for job in ("confirm", "family"):
        assert f"unreadable (its results do not match its provenance): not run in this build; `make {job}`" in page
    assert "C4" in page  # the table goes on


@pytest.mark.parametrize("job", ["c10", "compare", "confirm", "family", "measures"])
def test_every_committed_record_is_whole(job):
    """The committed records themselves are read whole by their chapters (no partial line on the page)."""
    from identifiability.recorded import compare, confirm, family, measures, proportional

    partial = {"c10": proportional.partial, "compare": compare.partial, "confirm": confirm.partial,
               "family": family.partial, "measures": measures.partial}[job]  # fmt: skip
    assert partial(_committed(job)) is None


def test_chapter_10_shows_a_record_only_when_its_own_run_cannot_be_judged(monkeypatch):
    from identifiability.models import keys
    from identifiability.recorded import measures
    from identifiability.verdicts.measures import MEASURES_MIN_SENTENCES

    whole, cut = object(), object()
    target = keys.target(None, "lee")
    for rec, why in ((whole, None), (cut, "partial: not run in this build; make measures records it"), (None, None)):
        monkeypatch.setattr(measures, "find", lambda model, corpus, rec=rec: rec)
        monkeypatch.setattr(measures, "partial", lambda r, why=why: why)
        few = MEASURES_MIN_SENTENCES - 1
        assert measures.to_show(few, "short", target) == ((None, why) if why else (rec, None))
        assert measures.to_show(MEASURES_MIN_SENTENCES, "short", target) == (None, None)  # its own run judges
        assert measures.to_show(few, "proportional", target) == (None, None)  # the job's own run: never carried
