"""What the replication found, at a glance (identifiability.book.findings; issue 53): the introduction's
findings table, the claims page's overview table and a chapter's summary, each read from the verdicts the
chapters recorded, each naming the claim before its outcome."""

from __future__ import annotations

import re

import pytest

from identifiability.base.fileio import write_json
from identifiability.book import findings
from identifiability.book.notebook import Chapter
from identifiability.chapters.contract import by_name
from identifiability.recorded.store import Recorded
from identifiability.verdicts import FAILS, HOLDS, NOT_RUN, PARTLY, Verdict
from identifiability.verdicts.claims import load_claims, load_names
from identifiability.verdicts.text import math_text

CLAIMS = {c["id"]: c for c in load_claims()}
pytestmark = pytest.mark.unit


def _verdict(claim: str, verdict: str = HOLDS, estimate: float = 0.5) -> Verdict:
    return Verdict(
        claim, verdict, estimate, (estimate - 0.1, estimate + 0.1), 0.0, "null", CLAIMS[claim]["rule"], "why"
    )


def _results(folder, chapter: str, results: dict) -> None:
    write_json(folder / f"{chapter}.json", {"results": results})


def test_every_claim_has_a_short_name_and_plain_words_without_notation():
    """data/claim_names.csv names every claim of data/claims.csv and no other; the names are what a student reads
    first, so no notation, no registry key and nothing the page would set as math."""
    names = load_names()
    assert sorted(names, key=lambda c: int(c[1:])) == list(CLAIMS)
    for claim, n in names.items():
        assert 0 < len(n["short"].split()) <= 5, (claim, n["short"])
        assert n["plain"].endswith(".") and len(n["plain"]) < 160, (claim, n["plain"])
        for text in n.values():
            assert not re.search(r"[$_^\\=<>]|\bd_|\bLN\b", text), (claim, text)
            assert math_text(text) == text, f"{claim}: {text!r} would be set as math"


def test_the_intro_table_groups_claims_by_chapter_and_reads_claim_then_verdict(tmp_path):
    results = tmp_path / "results"
    c4, c6 = CLAIMS["C4"], CLAIMS["C6"]
    _results(results, c4["chapter"], {"claims": {"C4": _verdict("C4").to_json()}})
    rec = {"target": "compare", "date": "2026-12-04"}
    _results(results, c6["chapter"], {"claims": {"C6": _verdict("C6", FAILS).to_json()}, "recorded_from": {"C6": rec}})
    text = findings.intro_table(findings.findings(results))
    rows = [line for line in text.splitlines() if re.match(r"\| <a href", line)]
    assert len(rows) == len(CLAIMS)  # one row per claim
    c4_row = next(r for r in rows if ">C4</a>" in r)
    cells = [c.strip() for c in c4_row.strip("|").split(" | ")]
    assert cells[0].endswith(CLAIMS["C4"]["plain"]) and cells[1] == "**holds**"
    assert cells[2] == "0.500 (0.400 to 0.600)"  # the estimate with its interval
    c6_row = next(r for r in rows if ">C6</a>" in r)
    assert "**fails** (recorded run of 2026-12-04)" in c6_row
    # a chapter that did not run in this build says so in every row of its table
    c1_row = next(r for r in rows if ">C1</a>" in r)
    assert "**not run in this build**" in c1_row
    # one group per chapter, each under its chapter's link, in the book's order
    groups = re.findall(r"\{doc\}`\.\./notebooks/(\w+)`", text)
    assert groups == sorted({c["chapter"] for c in CLAIMS.values()})
    assert text.startswith(f"Of the {len(CLAIMS)} claims (")
    assert f"1 holds, 1 fails and {len(CLAIMS) - 2} are not run in this build." in text.splitlines()[0]


def test_the_tally_counts_each_verdict_with_its_verb():
    f = findings.findings
    rows = [r for r in f("/nonexistent")][:5]
    rows = [
        findings.Finding(**{**r.__dict__, "verdict": v})
        for r, v in zip(rows, [HOLDS, HOLDS, PARTLY, "holds (post hoc)", FAILS])
    ]
    assert findings.tally(rows).endswith(", 3 hold, 1 partly holds and 1 fails.")


def test_the_overview_has_one_short_row_per_claim_and_six_columns(tmp_path):
    results = tmp_path / "results"
    c4 = CLAIMS["C4"]
    twin = _verdict("C4", FAILS, 0.1).to_json()
    _results(results, c4["chapter"], {"claims": {"C4": _verdict("C4").to_json()}, "twin_claims": {"C4": twin}})
    table = findings.overview_table(findings.findings(results), {"C4": "holds, as here"})
    lines = table.splitlines()[1:-1]  # inside its container (book.css makes it compact)
    assert len(lines) == 2 + len(CLAIMS)
    assert all(len(line.strip("|").split(" | ")) == 6 for line in lines if not line.startswith("|---"))
    c4_row = [c.strip() for c in next(r for r in lines if ">C4</a>" in r).strip("|").split(" | ")]
    assert c4_row[1:] == [CLAIMS["C4"]["short"], "**holds**", "0.500 (0.400 to 0.600)", "fails", "holds, as here"]


def test_the_claims_page_opens_with_the_overview_before_the_cards(tmp_path):
    results = tmp_path / "results"
    (tmp_path / "book").mkdir()
    findings.write_claims_page(tmp_path, results)
    page = (tmp_path / "book" / "claims.md").read_text()
    assert page.index("| id | claim | verdict |") < page.index("claim-card")
    opening = page[: page.index("| id | claim |")]
    assert len(opening.split()) < 120, "the page opens with a long paragraph again"


def test_the_confirmation_in_a_few_words():
    short = findings.confirmation_short
    assert short(None) == "—"
    assert short({"frozen": False, "label": "holds", "agrees": True}) == "not confirmed"
    assert short({"frozen": True, "label": "fails", "agrees": False}) == "fails, unlike here"
    assert short({"frozen": True, "label": "holds", "agrees": None}) == "holds"
    assert short({"frozen": True, "label": NOT_RUN, "agrees": False}) == "not run on the held-out text"


def test_a_chapter_summary_names_each_claim_before_its_outcome(tmp_path):
    c4 = CLAIMS["C4"]
    results = {
        "claims": {"C18": _verdict("C18").to_json(), "C4": _verdict("C4", FAILS).to_json()},
        "twin_claims": {"C4": _verdict("C4", HOLDS).to_json()},
        "recorded_from": {"C18": {"target": "compare", "date": "2026-12-04"}},
    }
    text = findings.chapter_summary(results, c4["chapter"])
    items = [line for line in text.splitlines() if line.startswith("- ")]
    assert [re.match(r"- \*\*(C\d+):\*\*", i).group(1) for i in items] == ["C4", "C18"]  # the csv's order
    c4_item = items[0]
    assert c4_item.index("The claim that") < c4_item.index("**fails**") < c4_item.index("untrained twin: **holds**")
    assert "trained minus twin, the learned part: 0" in c4_item  # both 0.5 (0.4 to 0.6): the difference is 0
    assert "judged on the recorded run of 2026-12-04" in items[1]
    assert findings.chapter_summary({}, c4["chapter"]) == "This run judged none of the chapter's claims."


def test_the_build_writes_the_findings_into_the_introduction_and_fails_without_its_marker(tmp_path):
    (tmp_path / "book").mkdir()
    intro = tmp_path / "book" / "intro.md"
    intro.write_text(f"# Intro\n\n{findings.FINDINGS_MARKER}\n\nmore\n")
    findings.write_findings(tmp_path, tmp_path / "results")
    text = intro.read_text()
    assert findings.FINDINGS_MARKER not in text and text.count("| <a href") == len(CLAIMS)
    intro.write_text("# Intro\n")
    with pytest.raises(ValueError, match="lost its marker"):
        findings.write_findings(tmp_path, tmp_path / "results")


def test_a_verdict_judged_on_a_recorded_run_says_which(tmp_path, monkeypatch):
    """Chapter.judge(..., recorded=rec) and Chapter.recorded(..., rec) file the run's target and date under
    ``recorded_from``, which the findings tables show; a verdict judged on this run's numbers files nothing."""
    import identifiability.book.notebook as nb

    rec = Recorded("family", "lee", {}, {"date": "2026-12-04T10:00:00+00:00", "target": "family"})
    ch = Chapter(by_name("effective_attention").stem, None, None, {}, tmp_path)
    monkeypatch.setattr(Chapter, "_judged", lambda self, claim, evidence: _verdict(claim))
    ch.judge("C4", None)
    assert "recorded_from" not in ch.results
    ch.judge("C18", None, recorded=rec)
    assert ch.results["recorded_from"] == {"C18": {"target": "family", "date": "2026-12-04"}}
    assert nb.RECORDED_FROM == "recorded_from"
    ch7 = Chapter(by_name("head_width").stem, None, None, {}, tmp_path)
    v = _verdict("C19")
    ch7.recorded("C19", v.to_json(), rec)
    assert ch7.results["recorded_from"]["C19"]["date"] == "2026-12-04"
