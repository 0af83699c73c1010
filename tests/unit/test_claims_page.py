"""The claims page from a results folder: the current verdict, its robustness, and for an amended claim the
original rule's verdict, the amendment's reason and mark, and the original rule."""

from __future__ import annotations

import re

import pytest

from identifiability.base.fileio import write_json
from identifiability.book import findings
from identifiability.book.notebook import Chapter
from identifiability.verdicts import FAILS, HOLDS, NOT_RUN, PARTLY, Quantity, Verdict, amended, with_robustness
from identifiability.verdicts.claims import load_claims, robustness_names
from identifiability.verdicts.text import math_text

CLAIMS = {c["id"]: c for c in load_claims()}


def _write(results, chapter: str, verdicts: list[Verdict]) -> None:
    write_json(results / f"{chapter}.json", {"results": {"claims": {v.claim: v.to_json() for v in verdicts}}})


def _cards(page: str) -> dict[str, str]:
    """Each claim's card on the claims page (``::::{container} claim-card`` ... ``::::``), by claim id."""
    blocks = re.findall(r"::::\{container\} claim-card\n(.*?)\n::::\n", page, flags=re.S)
    return {re.search(r">(C\d+)</a>", b).group(1): b for b in blocks}


def test_each_claim_is_a_card_that_reads_top_to_bottom(tmp_path):
    """The claim in words first, then verdict, this build's estimate, baseline and the untrained twin's verdict,
    as a definition list (``book.css`` lays it out in columns on a wide page, one under another on a phone)."""
    c4 = CLAIMS["C4"]
    v = Verdict("C4", HOLDS, -0.9, (-0.95, -0.8), 0.1, "null", c4["rule"], "why")
    twin = Verdict("C4", FAILS, 0.2, (0.1, 0.3), 0.1, "null", c4["rule"], "why")
    results = tmp_path / "results"
    write_json(
        results / f"{c4['chapter']}.json",
        {"results": {"claims": {"C4": v.to_json()}, "twin_claims": {"C4": twin.to_json()}}},
    )
    (tmp_path / "book").mkdir()
    findings.write_claims_page(tmp_path, results)
    cards = _cards((tmp_path / "book" / "claims.md").read_text())
    assert sorted(cards) == sorted(CLAIMS)
    lines = cards["C4"].splitlines()
    assert lines[0].startswith("**<a ") and math_text(c4["claim"]) in lines[0]
    terms = [line for line in lines if line and not line.startswith((":", "**"))]
    assert terms == ["verdict", "this build (95% interval)", "baseline", "untrained twin", "confirmation"]
    assert lines[lines.index("untrained twin") + 1] == ": fails"
    c1 = cards["C1"].splitlines()
    assert c1[c1.index("untrained twin") + 1] == ": —"  # no twin verdict recorded


def test_the_confirmation_field_reads_the_recorded_run_and_the_freeze(tmp_path, monkeypatch):
    """make confirm's verdicts beside this build's: the same or not, the two rules' agreement there, and "not
    confirmed" where the rule the run was judged under is not the frozen one; chapter 10's claims from its own
    recorded run on the same text (make measures on lee_test), each run with its caption."""
    from identifiability.recorded import confirm as record_confirm
    from identifiability.recorded import family as record_family
    from identifiability.recorded import measures as record_measures
    from identifiability.recorded import store as recorded

    now = recorded.claim_hashes()
    c4 = CLAIMS["C4"]
    there = amended(
        Verdict("C4", HOLDS, -0.5, (-0.6, -0.4), 0.1, "n", c4["rule"], "why"),
        Verdict("C4", FAILS, -0.5, None, 0.1, "n", c4["original_rule"], "why"),
    )
    rec = recorded.Recorded(
        "confirm",
        "m/lee_test",
        {
            "claims": {"C4": there.to_json(), "C6": Verdict("C6", HOLDS, 0.9, None, 0.1, "n", "r", "w").to_json()},
            "judged_under": {"C4": now["C4"], "C6": "0" * 64},
        },
        {"date": "2026-12-03T17:00:00+00:00", "target": "confirm", "seconds": 600, "machine": {}},
    )
    assert record_confirm.confirmation("C4", HOLDS, [rec]) == {
        "verdict": HOLDS,
        "label": HOLDS,
        "agrees": True,
        "rules_agree": False,
        "frozen": True,
    }
    assert record_confirm.confirmation("C4", FAILS, [rec])["agrees"] is False
    assert record_confirm.confirmation("C4", None, [rec])["agrees"] is None  # not measured in this build
    assert record_confirm.confirmation("C6", HOLDS, [rec])["frozen"] is False  # judged under another rule
    assert record_confirm.confirmation("C9", HOLDS, [rec]) is None
    c22 = Verdict("C22", FAILS, 0.01, (0.0, 0.02), 0.0, "n", CLAIMS["C22"]["rule"], "w")
    row = {"measure": "m", "reference": "r", "layer": 1, "variant": "v", "statistic": 0.5}
    chapter_10 = recorded.Recorded(
        "measures",
        "m/lee_test",
        {
            "claims": {"C22": c22.to_json()},
            "judged_under": {"C22": now["C22"]},
            "scores": [row],
            "seconds": {},
            "n_scored": 50,
        },
        {"date": "2026-12-07T18:00:00+00:00", "target": "measures", "seconds": 600, "machine": {}},
    )
    assert record_confirm.confirmation("C22", HOLDS, [None, chapter_10])["agrees"] is False
    assert record_confirm.confirmation("C22", HOLDS, [rec]) is None
    monkeypatch.setattr(record_confirm, "find", lambda model=None, corpus=None: rec)
    seen = []
    monkeypatch.setattr(record_measures, "find", lambda model=None, corpus=None, *a: seen.append(corpus) or chapter_10)
    monkeypatch.setattr(record_family, "find", lambda *a, **k: None)  # the checkout's family run: another test
    results = tmp_path / "results"
    v = Verdict("C4", HOLDS, -0.9, (-0.95, -0.8), 0.1, "null", c4["rule"], "why")
    write_json(results / f"{c4['chapter']}.json", {"results": {"claims": {"C4": v.to_json()}}})
    (tmp_path / "book").mkdir()
    findings.write_claims_page(tmp_path, results)
    text = (tmp_path / "book" / "claims.md").read_text()
    cards = _cards(text)
    assert cards["C4"].splitlines()[-1] == (": holds on lee_test; as in this build; original rule differs")
    assert cards["C6"].splitlines()[-1].startswith(": not confirmed: judged under a rule changed after the freeze")
    assert cards["C9"].splitlines()[-1] == ": —"
    assert cards["C22"].splitlines()[-1] == ": fails on lee_test"  # not measured in this build
    assert seen == ["lee_test"]
    assert "*Confirmation of chapters 2 to 6:* recorded run of 2026-12-03" in text
    assert "*Confirmation of chapter 10:* recorded run of 2026-12-07" in text and "`make confirm` recomputes it" in text


def test_the_page_shows_robustness_and_the_original_verdict_of_an_amended_claim(tmp_path):
    c3, c2 = CLAIMS["C3"], CLAIMS["C2"]
    assert c2["amendment"] is not None and c3["amendment"] is None
    v1 = with_robustness(
        Verdict("C3", PARTLY, 34.0, None, 34, "n", c3["rule"], "why one"),
        {"share": Verdict("C3", PARTLY, 34.0, None, 34, "n", c3["rule"], "same")},
    )
    original = Verdict("C2", HOLDS, 1.0, None, 1.0, "n", c2["original_rule"], "one input, no margin")
    current = Verdict("C2", PARTLY, 0.9, None, 1.0, "n", c2["rule"], "only 90% unique")
    v2 = amended(
        with_robustness(
            current,
            {
                "share": Verdict("C2", HOLDS, 0.9, None, 1, "", "", ""),
                "margin": Verdict("C2", PARTLY, 0.9, None, 1, "", "", ""),
            },
        ),
        original,
    )
    results = tmp_path / "results"
    _write(results, c3["chapter"], [v1, v2])
    (tmp_path / "book").mkdir()
    findings.write_claims_page(tmp_path, results)
    page = (tmp_path / "book" / "claims.md").read_text()
    rows = _cards(page)
    assert rows["C3"].startswith('**<a href="../notebooks/02_nonidentifiability.html#verdict-c3">C3</a>** ')
    assert "\nverdict\n: **partly holds** (robust)\n" in rows["C3"]
    assert "\nverdict\n: **partly holds** (sensitive to share; original rule: holds)\n" in rows["C2"]
    assert "Under the original rule: **holds** (one input, no margin)." in page
    m = math_text  # the page typesets the table's notation
    assert f"*Reason:* {m(c2['amendment']['reason'])}" in page and "*post hoc: amended after the original" in page
    assert f"*Original rule (version 1):* {m(c2['original_rule'])}" in page and m(c2["rule"]) in page
    c4 = CLAIMS["C4"]  # amended twice: both versions and both reasons are on the page
    assert len(c4["amendments"]) == 2 and all(m(a["reason"]) in page and m(a["rule"]) in page for a in c4["amendments"])
    assert "Under the alternatives: share: holds; margin: partly holds." in page
    assert ": **not measured** (robustness not measured; original rule: not measured)" in rows["C6"]


def _recordable(claim: dict) -> Verdict:
    """A verdict of ``claim`` that its chapter's ``ch.judge`` accepts (its rule, alternatives, original)."""
    v = Verdict(claim["id"], HOLDS, 0.5, (0.4, 0.6), None, "", claim["rule"], "why")
    v = with_robustness(v, {name: v for name in robustness_names(claim)})
    if claim["amendment"] is not None:
        v = amended(v, Verdict(claim["id"], HOLDS, 0.5, None, None, "", claim["original_rule"], "why"))
    return v


def test_each_claim_links_to_the_anchor_its_chapter_gives_the_verdict(tmp_path):
    """The claims page links ``../notebooks/<chapter>.html#<anchor>``; ``ch.sentence`` leads the verdict's
    sentence on that chapter's page with an element of that id. Checked for every claim of the table."""
    results = tmp_path / "results"
    by_chapter: dict[str, dict[str, str]] = {}
    for c in CLAIMS.values():
        ch = Chapter(c["chapter"], None, None, {}, results)
        by_chapter.setdefault(c["chapter"], {})[c["id"]] = ch.sentence(_recordable(c))
        _write(results, c["chapter"], [_recordable(x) for x in CLAIMS.values() if x["chapter"] == c["chapter"]])
    (tmp_path / "book").mkdir()
    findings.write_claims_page(tmp_path, results)
    page = (tmp_path / "book" / "claims.md").read_text()
    links = re.findall(r'<a href="\.\./notebooks/([\w]+)\.html#([\w-]+)">(C\d+)</a>', page)
    # each claim twice: its row of the overview table and its card
    assert sorted(c for _, _, c in links) == sorted(2 * list(CLAIMS))
    for chapter, target, claim in links:
        shown = by_chapter[chapter][claim]  # the chapter whose ch.sentence shows the claim
        assert f'<span id="{target}"></span>' in shown, (claim, shown[:80])
        assert all(f'id="{target}"' not in s for c, s in by_chapter[chapter].items() if c != claim)


def test_the_page_names_each_estimate_and_baseline_and_typesets_its_math(tmp_path):
    c7, c13 = CLAIMS["C7"], CLAIMS["C13"]
    rate = Quantity("naive rate at the last layer minus at layer 1", r"r^{L} - r^{1}")
    chance = Quantity("chance rate, one over the tokens of a sentence", "1/d_s")
    v7 = with_robustness(
        Verdict(
            "C7",
            HOLDS,
            -0.28712,
            (-0.3, -0.27),
            0.05,
            "chance",
            c7["rule"],
            "why",
            estimate_of=rate,
            baseline_of=chance,
        ),
        {n: Verdict("C7", HOLDS, 0, None, None, "", "", "") for n in robustness_names(c7)},
    )
    not_run = Verdict("C13", NOT_RUN, None, None, None, "", c13["rule"], "no fine-tune; `make compare` runs them")
    v13 = amended(
        with_robustness(not_run, {n: not_run for n in robustness_names(c13)}),
        Verdict("C13", NOT_RUN, None, None, None, "", c13["original_rule"], "no fine-tune"),
    )
    results = tmp_path / "results"
    _write(results, c7["chapter"], [v7])
    _write(results, c13["chapter"], [v13])
    (tmp_path / "book").mkdir()
    findings.write_claims_page(tmp_path, results)
    page = (tmp_path / "book" / "claims.md").read_text()
    row = _cards(page)["C7"]
    assert (
        "\nverdict\n: **holds** (robust)\n\nthis build (95% interval)\n: $r^{L} - r^{1}$ = -0.287 (-0.300 to -0.270)"
        "\n\nbaseline\n: $1/d_s$ = 0.0500 (another quantity)\n" in row
    )
    assert "naive rate at the last layer minus at layer 1, $r^{L} - r^{1}$ = -0.287" in page  # in words below
    row13 = _cards(page)["C13"]
    assert "not run in this build: `make compare`" in row13 and "not testable" not in row13
    assert "**C13.** The claim that fine-tuning leaves token identifiability" in page
    assert "model's was **not run in this build**. Nothing was measured: " in page
    # the claims table's ASCII notation is MyST math, like every other page
    assert "$d_s > d_v$" in page and r"$\mathrm{softmax}(QK^\top/\sqrt{d_q})$" in page
    assert r"$\dim \mathrm{LN}([T,1]) \geq  1$" in page
    outside = re.sub(r"\$[^$]*\$|`[^`]*`", "", page)
    assert not re.search(r"\bd_[svqlL1]\b|>=|<=|sqrt\(", outside), re.findall(r".{30}(?:\bd_[svq]\b|>=).{10}", outside)[
        :3
    ]
    assert all(line.count("$") % 2 == 0 for line in page.splitlines())


@pytest.mark.parametrize("value", [0.0395, 0.49])
def test_a_bare_number_is_never_a_cell(tmp_path, value):
    c11 = CLAIMS["C11"]
    q = Quantity("far contribution's growth", r"\Delta c")
    v = Verdict("C11", HOLDS, value, (value - 0.01, value + 0.01), 0.0, "uniform", c11["rule"], "w", estimate_of=q)
    _write(tmp_path / "r", c11["chapter"], [v])
    (tmp_path / "book").mkdir()
    findings.write_claims_page(tmp_path, tmp_path / "r")
    card = _cards((tmp_path / "book" / "claims.md").read_text())["C11"]
    cells = [line[2:] for line in card.splitlines() if line.startswith(": ")]
    assert cells[1].startswith(r"$\Delta c$ = ") and cells[2] == "0 (same quantity)"


def test_a_claim_of_a_renumbered_chapter_is_read_from_an_older_builds_file(tmp_path):
    """C13 belongs to 09_across_models now; a data folder from a build before the head-width chapter holds its
    verdict in 08_across_models.json (chapters.RENAMED). A build that did not run the chapter shows that
    verdict, not "not measured"; where the new file exists, the new file is read."""
    from identifiability.verdicts.claims import claims_table

    assert CLAIMS["C13"]["chapter"] == "09_across_models"
    results = tmp_path / "results"
    old = Verdict("C13", FAILS, 0.2, (0.1, 0.3), 0.0, "null", CLAIMS["C13"]["rule"], "old build")
    _write(results, "08_across_models", [old])
    assert {r["id"]: r["verdict"] for r in claims_table(results)}["C13"] == FAILS
    _write(results, "09_across_models", [Verdict("C13", HOLDS, 0.0, (-0.01, 0.01), 0.0, "null", "r", "new")])
    assert {r["id"]: r["verdict"] for r in claims_table(results)}["C13"] == HOLDS


def test_the_confirmation_counts_the_verdicts_on_the_family_and_marks_a_changed_rule():
    from identifiability.recorded import store as recorded

    now = recorded.claim_hashes()
    members = {
        f"m{i}": {"chapters": {"x": {"claims": {"C6": {"verdict": v}}}}} for i, v in enumerate([HOLDS, HOLDS, FAILS])
    }
    rec = recorded.Recorded("family", "lee", {"members": members, "judged_under": {"C6": now["C6"]}}, {})
    assert findings.family_confirmation("C6", rec) == "on the family: holds on 2 of 3 members, fails on 1 of 3 members"
    assert findings.family_confirmation("C7", rec) == "" and findings.family_confirmation("C6", None) == ""
    stale = recorded.Recorded("family", "lee", {"members": members, "judged_under": {"C6": "0" * 64}}, {})
    assert "not confirmed" in findings.family_confirmation("C6", stale)
    # an undertrained member is reported on chapter 7's page, never counted here
    members["m3"] = {"provenance": {"trained_enough": False}, "chapters": {"x": {"claims": {"C6": {"verdict": FAILS}}}}}
    rec = recorded.Recorded("family", "lee", {"members": members, "judged_under": {"C6": now["C6"]}}, {})
    assert findings.family_confirmation("C6", rec) == "on the family: holds on 2 of 3 members, fails on 1 of 3 members"
