"""Chapter 10's text: the measures table names each source in words, and the answer sorts the claims by
their verdicts, each claim in words before its outcome (or says that the build scored too few sentences, naming
the command)."""

from identifiability.text import measures as prose
from identifiability.verdicts.core import FAILS, HOLDS, NOT_TESTABLE, Verdict


def _v(claim: str, verdict: str) -> Verdict:
    return Verdict(claim, verdict, None, None, None, "", "rule", "why")


def test_the_measures_table_names_each_source():
    table = prose.measures_table(["raw", "alti", "integrated_gradients"])
    assert "Abnar and Zuidema (2020)" in table and "Ferrando et al. (2022)" in table and "{cite" not in table
    assert table.count("\n") == 4 and "one layer (also rolled out)" in table
    assert prose.citation("no-such-key") == "no-such-key"


def test_the_answer_sorts_claims_by_verdict_and_names_the_command_when_too_small():
    said = prose.answer_text([_v("C22", HOLDS), _v("C24", FAILS), _v("C25", HOLDS)]).splitlines()
    assert said[2].startswith("- Raw attention (C22): the claim that raw attention weights") and "**holds**" in said[2]
    assert said[3].startswith("- Gradient × input and Integrated Gradients (C25): the claim that gradient")
    assert said[4].startswith("- Norm-based attention") and said[4].endswith(" **fails**.")
    assert "make measures" in prose.answer_text([_v("C22", NOT_TESTABLE)])
