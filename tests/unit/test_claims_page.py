"""The claims page from a results folder: the current verdict, its robustness, and for an amended claim the
original rule's verdict, the amendment's reason and mark, and the original rule."""

from __future__ import annotations

from identifiability import pages
from identifiability.fileio import write_json
from identifiability.verdicts import HOLDS, PARTLY, Verdict, amended, with_robustness
from identifiability.verdicts.claims import load_claims

CLAIMS = {c["id"]: c for c in load_claims()}


def _write(results, chapter: str, verdicts: list[Verdict]) -> None:
    write_json(results / f"{chapter}.json", {"results": {"claims": {v.claim: v.to_json() for v in verdicts}}})


def test_the_page_shows_robustness_and_the_original_verdict_of_an_amended_claim(tmp_path):
    c1, c2 = CLAIMS["C1"], CLAIMS["C2"]
    assert c2["amendment"] is not None and c1["amendment"] is None
    v1 = with_robustness(
        Verdict("C1", PARTLY, 34.0, None, 34, "n", c1["rule"], "why one"),
        {"tolerance": Verdict("C1", PARTLY, 34.0, None, 34, "n", c1["rule"], "same")},
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
    _write(results, c1["chapter"], [v1, v2])
    (tmp_path / "book").mkdir()
    pages.write_claims_page(tmp_path, results)
    page = (tmp_path / "book" / "claims.md").read_text()
    rows = {line.split("`")[1].split(" ")[0]: line for line in page.splitlines() if line.startswith("| {doc}")}
    assert rows["C1"].endswith("| **partly holds** (robust) |")
    assert rows["C2"].endswith("| **partly holds** (sensitive to share; original rule: holds) |")
    assert "Under the original rule: **holds** (one input, no margin)." in page
    assert f"*Reason:* {c2['amendment']['reason']}" in page and "*post hoc: amended after the original" in page
    assert f"*Original rule (version 1):* {c2['original_rule']}" in page and c2["rule"] in page
    c4 = CLAIMS["C4"]  # amended twice: both versions and both reasons are on the page
    assert len(c4["amendments"]) == 2 and all(a["reason"] in page and a["rule"] in page for a in c4["amendments"])
    assert "Under the alternatives: share: holds; margin: partly holds." in page
    assert rows["C6"].endswith("| **not measured** (robustness not measured; original rule: not measured) |")
