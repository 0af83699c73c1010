"""Verdicts that cannot be read backwards (issue 53): every claim's sentence, for every outcome, names the claim
in words before its outcome (the id first, for the anchor and the browser check); so do the untrained twin's
sentence, chapter 10's answer and a verdict chart's headline, whose subtitle says what its axis measures and
where the rule's line lies."""

from __future__ import annotations

import re

import pytest

from identifiability.charts.verdicts import verdict_chart
from identifiability.text import measures as prose
from identifiability.verdicts.claims import load_claims
from identifiability.verdicts.core import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_RUN,
    VERDICTS,
    Verdict,
    render,
    render_twin,
    statement,
)
from identifiability.verdicts.text import Quantity

CLAIMS = load_claims()
# the words each outcome reads as after the claim (its verb outside the bold, the outcome inside)
READS = {
    "holds": "**holds**",
    "partly holds": "**partly holds**",
    "fails": "**fails**",
    "inconclusive": "is **inconclusive**",
    "not testable on this model": "is **not testable on this model**",
    "not run in this build": "was **not run in this build**",
}


def _verdict(claim: str, outcome: str, estimate: float | None = 0.599) -> Verdict:
    ci = None if estimate is None else (estimate - 0.05, estimate + 0.05)
    q = Quantity("median per-row Spearman correlation with exact HTA")
    return Verdict(claim, outcome, estimate, ci, None, "", "rule", "raw attention tracks exact HTA", estimate_of=q)


@pytest.mark.parametrize("outcome", VERDICTS)
def test_every_claims_sentence_names_the_claim_before_its_outcome(outcome):
    assert set(READS) == set(VERDICTS)
    for c in CLAIMS:
        text = render(_verdict(c["id"], outcome, None if outcome == NOT_RUN else 0.599), c["claim"])
        lead = f"**{c['id']}.** The claim that {statement(c['claim'])} "
        assert text.startswith(lead), (c["id"], text[:120])
        assert text[len(lead) :].startswith(READS[outcome] + "."), (c["id"], text[len(lead) : len(lead) + 60])
        first_bold_after_id = re.findall(r"\*\*([^*]+)\*\*", text)[1]
        assert first_bold_after_id == outcome, c["id"]  # the browser check reads the outcome there


def test_a_claims_first_letter_is_lower_cased_unless_it_is_an_acronym_a_token_or_a_name():
    texts = {c["id"]: c["claim"] for c in CLAIMS}
    assert statement(texts["C22"]).startswith("raw attention weights are a poor guide")
    assert statement(texts["C12"]).startswith("[CLS] and [SEP]")
    assert statement(texts["C27"]).startswith("Value Zeroing, rolled out")
    assert statement("HTA agrees.") == "HTA agrees" and statement("GlobEnc tracks") == "GlobEnc tracks"
    assert statement(texts["C26"]).startswith("exact HTA, a gradient measure")  # an acronym second is no name
    assert statement(texts["C4"]) == "raw and effective attention diverge as $d_s$ grows beyond $d_v$"


def test_the_twins_sentence_says_the_claim_before_its_outcome():
    text = render_twin(_verdict("C22", FAILS), _verdict("C22", INCONCLUSIVE, 0.4), "20 sentences")
    assert "): the claim is **inconclusive**;" in text


def test_chapter_10s_answer_names_each_claim_before_its_outcome():
    texts = {c["id"]: c["claim"] for c in CLAIMS}
    said = prose.answer_text([_verdict("C22", FAILS), _verdict("C24", INCONCLUSIVE), _verdict("C25", HOLDS)])
    lines = [x for x in said.splitlines() if x.startswith("- ")]
    assert [x.split(" (")[0] for x in lines] == [
        "- Gradient × input and Integrated Gradients",  # holds first, then fails, then the undecided
        "- Raw attention",
        "- Norm-based attention with residual and LayerNorm, GlobEnc and ALTI",
    ]
    assert lines[1] == f"- Raw attention (C22): the claim that {statement(texts['C22'])} **fails**."
    assert lines[2].endswith(" is **inconclusive**.") and "It fails for" not in said


def test_a_verdict_charts_headline_names_the_claim_first_and_its_subtitle_the_axis_and_the_rules_line():
    panel = verdict_chart([{**_verdict("C22", FAILS).to_json(), "threshold": 0.5}]).vconcat[0]
    title = " ".join(panel.title.text)
    claim = "raw attention weights are a poor guide to how input tokens mix into hidden tokens"
    assert title == f"C22: the claim that {claim} fails"
    assert panel.title.subtitle == [
        "axis: median per-row Spearman correlation with exact HTA",
        "dashed line: the rule's threshold, 0.5",
    ]
    # a long claim is cut, its outcome never
    long = verdict_chart([_verdict("C20", HOLDS).to_json()]).vconcat[0].title.text
    assert long[0].startswith("C20: the claim that beyond dimension counting") and long[-1].endswith("… holds")
