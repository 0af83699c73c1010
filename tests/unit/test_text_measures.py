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


def test_the_steps_table_marks_the_default_and_says_whether_it_meets_the_bound():
    from identifiability.contributions.gradients import COMPLETENESS_BOUND, DEFAULT_STEPS, StepsGap

    rows = [StepsGap(8, 1.02, 0.5), StepsGap(DEFAULT_STEPS, 0.45, 0.2), StepsGap(4 * DEFAULT_STEPS, 7e-4, 0.0)]
    said = prose.steps_table(rows)
    assert f"| {DEFAULT_STEPS} (default) | 0.45 | 0.20 |" in said and f"from {4 * DEFAULT_STEPS} steps" in said
    assert f"at most {COMPLETENESS_BOUND:g} of its total. The default ({DEFAULT_STEPS} steps) does not meet it on " \
           "this sentence: its shares above carry the quadrature's error" in said  # fmt: skip
    met = prose.steps_table([StepsGap(DEFAULT_STEPS, COMPLETENESS_BOUND / 2, 0.0)])
    assert met.endswith("meets it on this sentence.") and "not meet" not in met and "error" not in met
    assert prose.steps_table(rows[:1]).endswith(f"The default ({DEFAULT_STEPS} steps) was not tried here.")


def test_the_answer_sorts_claims_by_verdict_and_names_the_command_when_too_small():
    said = prose.answer_text([_v("C22", HOLDS), _v("C24", FAILS), _v("C25", HOLDS)]).splitlines()
    assert said[2].startswith("- Raw attention (C22): the claim that raw attention weights") and "**holds**" in said[2]
    assert said[3].startswith("- Gradient × input and Integrated Gradients (C25): the claim that gradient")
    assert said[4].startswith("- Norm-based attention") and said[4].endswith(" **fails**.")
    assert "make measures" in prose.answer_text([_v("C22", NOT_TESTABLE)])


def _ranked(n_sentences: int = 20, layers: int = 3):
    """Evidence of three measures against exact HTA on synthetic sentences: GlobEnc is the reference, ALTI the
    reference with noise far below any rank change, raw attention rolled out unrelated to it."""
    import numpy as np

    from identifiability.contributions.agreement import agreement
    from identifiability.evidence.measures import MeasuresEvidence
    from identifiability.studies.measures import names_of, summarise

    rng = np.random.default_rng(0)
    per = {}
    for k in range(n_sentences):
        d = int(rng.integers(6, 10))
        r = rng.dirichlet(np.ones(d), size=(layers + 1, d))
        r[0] = np.eye(d)
        made = {
            "globenc": r,
            "alti": r + rng.normal(0, 1e-9, r.shape),
            "raw@rolled": rng.dirichlet(np.ones(d), (layers + 1, d)),
        }
        for m, c in made.items():
            per.setdefault((m, "hta"), []).append(agreement(c, r, seed=k))
    scores = summarise(per)
    return MeasuresEvidence(scores, n_sentences, layers, names=names_of(scores))


def test_the_top_group_holds_the_measures_the_sentences_cannot_tell_apart():
    ev = _ranked()
    for layer in (1, 2, 3):
        assert set(ev.top_group("hta", layer)) == {"globenc", "alti"}
        d = ev.difference("raw@rolled", "globenc", "hta", layer)
        assert d.high < 0 and ev.difference("globenc", "raw@rolled", "hta", layer).low == -d.high


def test_the_ranking_names_the_top_group_in_words_per_layer():
    table = prose.ranking_table(_ranked()).splitlines()
    assert table[0] == "| layer | against exact HTA |" and len(table) == 2 + 3
    assert all(row.endswith("| GlobEnc and ALTI |") for row in table[2:])
    assert "globenc" not in "\n".join(table) and "rolled" not in "\n".join(table)


def test_a_run_recorded_before_the_ranking_says_what_to_run():
    from dataclasses import replace

    ev = _ranked()
    old = replace(ev, scores=tuple(replace(s, minus_others=()) for s in ev.scores))
    assert old.top_group("hta", 1) is None and "make measures" in prose.ranking_table(old)


def test_the_recorded_run_note_says_whose_scores_the_page_shows_and_why():
    """Issue 53 item 4: chapter 10's note on its page, one line: the recorded run's sentences against the page's
    own, and the run's caption (no platform string)."""
    from identifiability.recorded.store import Recorded
    from identifiability.verdicts.measures import MEASURES_MIN_SENTENCES

    rec = Recorded(
        "measures", "m/lee", {"n_scored": 50},
        {"date": "2026-12-07T10:00:00+00:00", "target": "measures", "seconds": 600,
         "machine": {"cpus": 2, "platform": "Linux-x"}, "hashes": {}},
    )  # fmt: skip
    note = prose.recorded_note(rec, 3)
    assert note.startswith("*Scores and verdicts below are from `make measures`' run on 50 sentences (this page ")
    assert f"scored 3 itself, parameter `n_sentences`, fewer than the {MEASURES_MIN_SENTENCES} the rules need)" in note
    assert "recorded run of 2026-12-07; `make measures` recomputes it (10 min 0 s on 2 cores)" in note
    assert "Linux" not in note and note.endswith(".*") and "\n" not in note
