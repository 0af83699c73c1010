"""The verdict machinery every claim shares (intervals, the six outcomes, part-by-part combination, amended
and robustness verdicts, the sentence and the chart a page shows). Each claim's own rule is tested on
positive and negative controls in ``test_verdict_controls_<chapter>.py``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from identifiability import verdicts as vd
from identifiability.base import stats
from identifiability.base.stats import Interval
from identifiability.chapters.contract import by_name
from identifiability.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_RUN, PARTLY
from identifiability.verdicts.core import combine_parts, interval_verdict, part_verdict
from identifiability.verdicts.nonidentifiability import judge_c2_original

R = "the rule"


def iv(est: float, low: float, high: float, n: int = 40) -> Interval:
    return Interval(est, low, high, n)


def _judged(x: Interval, threshold: float = 0.5, claim: str = "C6") -> vd.Verdict:
    v, why = interval_verdict(x, threshold, "above")
    return vd.Verdict(claim, v, x.estimate, (x.low, x.high), 0.01, "chance", R, why, threshold=threshold)


def test_interval_sides_and_units_to_settle():
    x = iv(0.88, 0.85, 0.91, n=40)
    assert x.side(0.9) == "contains" and x.side(0.8) == "above" and x.side(0.95) == "below"
    # half-width 0.03 at distance 0.02: (0.03/0.02)^2 = 2.25 times the units
    assert stats.units_to_settle(40, (0.85, 0.91), 0.88, 0.9) == 90
    assert stats.units_to_settle(40, (0.85, 0.91), 0.9, 0.9) is None
    assert "about 90 units instead of 40 would settle it" in interval_verdict(x, 0.9, "above")[1]


def test_bootstrap_is_seeded_and_covers_the_mean():
    rng = np.random.default_rng(0)
    v = rng.normal(1.0, 1.0, 200)
    a, b = stats.bootstrap_ci(v, seed=3), stats.bootstrap_ci(v, seed=3)
    assert a == b and a[0] < v.mean() < a[1] and 0.2 < a[1] - a[0] < 0.4
    assert np.isnan(stats.bootstrap_ci([2.0])).all()  # one unit: nothing to resample, no interval
    assert stats.bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)  # every resample the same
    est, lo, hi = stats.paired_ci(v + 1.0, v)
    assert est == pytest.approx(1.0) and lo == pytest.approx(1.0) and hi == pytest.approx(1.0)


@pytest.mark.parametrize("statistic", stats.AXIS_REDUCTIONS, ids=lambda f: f.__name__)
def test_a_reduction_over_all_resamples_at_once_gives_the_interval_of_one_call_per_resample(statistic):
    rng = np.random.default_rng(5)
    for n in (2, 7, 40, 301):
        v = rng.normal(0.3, 2.0, n)
        one_by_one = stats.bootstrap_ci(v, lambda x: statistic(x), seed=n)  # a lambda is called per resample
        assert stats.bootstrap_ci(v, statistic, seed=n) == one_by_one  # to the bit


def test_a_verdict_outside_the_six_is_refused():
    with pytest.raises(ValueError, match="verdict must be one of"):
        vd.Verdict("C1", "holds with caveat", None, None, None, "", R, "")
    assert vd.Verdict("C13", NOT_RUN, None, None, None, "", R, "make compare").verdict == "not run in this build"


@pytest.mark.parametrize(
    "x", [iv(0.9, 0.87, 0.92), iv(0.3, 0.25, 0.35), iv(0.5, 0.45, 0.55)], ids=["holds", "fails", "inconclusive"]
)
def test_the_rendered_sentence_states_the_verdict_and_the_numbers(x):
    verdict = _judged(x)
    assert verdict.verdict == {0.9: HOLDS, 0.3: FAILS, 0.5: INCONCLUSIVE}[x.estimate]
    text = vd.render(verdict, "Tokens stay identifiable")
    verb = "is " if verdict.verdict == INCONCLUSIVE else ""
    assert text.startswith(f"**C6.** The claim that tokens stay identifiable {verb}**{verdict.verdict}**.")
    assert f"= {vd.fmt(verdict.estimate)}" in text and f"95% interval {vd.fmt(x.low)} to {vd.fmt(x.high)}" in text
    assert verdict.reason in text and "nan" not in text.lower() and "None" not in text
    assert verdict.to_json()["verdict"] == verdict.verdict


def test_a_qualifier_shows_what_was_tested():
    v = vd.Verdict("C8", PARTLY, 0.0, (-0.01, 0.01), None, "", R, "angle holds", qualifier="angle part only")
    assert v.label == "partly holds (angle part only)"
    assert vd.render(v).startswith("**C8.** The claim **partly holds (angle part only)**.")


def test_amended_and_robustness_travel_with_the_verdict():
    current, original = _judged(iv(0.9, 0.87, 0.92)), _judged(iv(0.9, 0.87, 0.92), threshold=0.95)
    alternatives = {"threshold up": _judged(iv(0.9, 0.87, 0.92), 0.88), "unit": _judged(iv(0.9, 0.8, 0.99))}
    v = vd.amended(vd.with_robustness(current, alternatives), original)
    assert v.original.verdict == FAILS and v.robustness == (("threshold up", INCONCLUSIVE), ("unit", HOLDS))
    assert vd.robustness_summary(v) == "sensitive to threshold up"
    d = v.to_json()
    assert d["original"]["verdict"] == FAILS and d["robustness"] == [["threshold up", INCONCLUSIVE], ["unit", HOLDS]]
    assert vd.robustness_summary(d) == "sensitive to threshold up"
    assert vd.robustness_summary(vd.with_robustness(current, {"unit": current})) == "robust"
    with pytest.raises(ValueError, match="original verdict is of C7"):
        vd.amended(current, _judged(iv(0.9, 0.87, 0.92), claim="C7"))


def test_grouped_interval_resamples_whole_groups():
    rng = np.random.default_rng(1)
    groups = [rng.normal(m, 0.01, 50) for m in rng.normal(0.0, 1.0, 20)]  # groups differ, values within barely
    est, lo, hi = stats.grouped_ci(groups, np.mean, seed=0)
    pooled = stats.bootstrap_ci(np.concatenate(groups), np.mean, seed=0)
    assert lo < est < hi and (hi - lo) > 3 * (pooled[1] - pooled[0])  # 1000 values are really 20 units
    est, lo, hi = stats.grouped_ci([np.array([1.0, 2.0])])  # one sentence: an estimate, no interval
    assert est == 1.5 and np.isnan(lo) and np.isnan(hi)


def test_a_measurement_of_one_sentence_gets_no_verdict_but_inconclusive():
    """A bootstrap over one unit has zero width; judged as an interval it would pass for certainty (C10 on
    sentence pairs held with "0.824 to 0.824" from the one pair short enough for exact HTA)."""
    from identifiability.charts.verdicts import verdict_chart

    est, lo, hi = stats.grouped_ci([np.array([1.0, 1.0, 0.0, 1.0])], np.mean)
    one = Interval(est, lo, hi, n=1)
    assert not one.has_interval and iv(0.7, 0.65, 0.75).has_interval
    v = _judged(one)
    assert v.verdict == INCONCLUSIVE and "no interval" in vd.render(v) and "nan" not in vd.render(v).lower()
    spec = verdict_chart([v.to_json()]).to_dict()
    assert "NaN" not in str(spec) and "nan" not in str(spec)


def test_compound_claims_combine_part_by_part():
    good, bad, open_ = iv(-0.1, -0.15, -0.05), iv(0.1, 0.05, 0.15), iv(0.0, -0.05, 0.05)

    def parts(*xs):
        return [part_verdict("C9", f"p{i}", x, *interval_verdict(x, 0.0, "below"), R, 0.0) for i, x in enumerate(xs)]

    assert combine_parts("C9", parts(good, good), R, good, 0.1, "").verdict == HOLDS
    assert combine_parts("C9", parts(bad, good), R, good, 0.1, "").verdict == FAILS  # the core part fails
    assert combine_parts("C9", parts(good, bad), R, good, 0.1, "").verdict == PARTLY
    assert combine_parts("C9", parts(good, open_), R, good, 0.1, "").verdict == INCONCLUSIVE
    assert combine_parts("C9", parts(good, bad), R, good, 0.1, "", first_is_core=False).verdict == PARTLY
    assert combine_parts("C9", parts(bad, bad), R, good, 0.1, "", first_is_core=False).verdict == FAILS


def test_the_verdict_chart_has_one_panel_per_part_and_one_for_the_headline_with_thresholds():
    from identifiability.charts.verdicts import verdict_chart

    a, b = iv(0.3, 0.25, 0.35), iv(-0.1, -0.15, -0.05)
    p1 = part_verdict("C4", "decrease", a, *interval_verdict(a, 0.9, "below"), R, 0.9)
    p2 = part_verdict("C4", "beyond dimension counting", b, *interval_verdict(b, 0.0, "below"), R, 0.0)
    c4 = combine_parts("C4", [p1, p2], R, a, 0.5, "random subspace")
    c2 = judge_c2_original(True, 1.0, True, R)  # an exact count: its point, no interval
    chart = verdict_chart([c4.to_json(), c2.to_json()])
    assert chart.to_dict()["vconcat"]
    panels = chart.vconcat
    titles = [" ".join(t) if isinstance(t, list) else t for t in (p.title.text for p in panels)]
    assert titles == [
        "C4 · decrease — holds",
        "C4 · beyond dimension counting — holds",
        "C4: the claim that raw and effective attention diverge as dₛ grows beyond dᵥ holds",
        "C2: the claim that the threshold is dₛ - dᵥ > 1, not dₛ > dᵥ: at dₛ = dᵥ + 1 a generic head admits no "
        "alternative holds",
    ]
    thresholds = [
        float(layer.data["t"].iloc[0])
        for p in panels
        for layer in p.layer
        if isinstance(layer.data, pd.DataFrame) and "t" in layer.data
    ]
    assert thresholds == [0.9, 0.0]  # a compound headline has no single threshold


def test_an_interval_prints_for_people():
    assert str(Interval(0.28712, 0.27, 0.3049, n=16)) == "0.287 (95% interval 0.270 to 0.305, 16 units)"
    assert str(Interval(0.5, float("nan"), float("nan"), n=1)) == "0.500 (no interval: 1 unit)"
    named = Interval(0.28712, 0.27, 0.3049, n=16, unit="test sentences")
    assert str(named) == "0.287 (95% interval 0.270 to 0.305, 16 test sentences)"
    assert (
        "about 90 test sentences instead of 40"
        in interval_verdict(Interval(0.88, 0.85, 0.91, n=40, unit="test sentences"), 0.9, "above")[1]
    )


def _c1_evidence():
    """d_v = 2: no alternative at d_s = d_v + 1, one from d_v + 2 on (C1 partly holds)."""
    from identifiability.evidence.nonidentifiability import C1Evidence

    table = pd.DataFrame({"d_s": [3, 4, 5], "dim_LN_T1": [0, 1, 2], "kept_min_T1": [0.5, 0.5, 0.5]})
    return C1Evidence(table, 2)


def test_a_chapter_judges_a_claim_one_way_and_records_it(tmp_path):
    """``ch.judge`` finds the claim's entry point through the chapter contract, passes its rules from the
    claims table, records the verdict and returns it; ``ch.sentence`` leads its sentence with the anchor."""
    from identifiability.book.notebook import Chapter
    from identifiability.verdicts.claims import rules

    ch = Chapter(by_name("nonidentifiability").stem, None, None, {}, tmp_path)
    v = ch.judge("C1", _c1_evidence())
    assert v.verdict == PARTLY and v.rule == rules("C1").rule and ch.results["claims"]["C1"] == v.to_json()
    assert ch.sentence(v).startswith('<span id="verdict-c1"></span>**C1.** The claim that attention weights are not')
    assert ch.sentence(v).split("*Estimate:*")[0].endswith("**partly holds**. ")
    with pytest.raises(KeyError, match=f"not a claim of chapter {by_name('nonidentifiability').stem}"):
        ch.judge("C4", _c1_evidence())


def test_judge_refuses_a_verdict_without_its_alternatives_or_its_original(tmp_path, monkeypatch):
    from identifiability.book.notebook import Chapter
    from identifiability.verdicts import nonidentifiability

    ch = Chapter(by_name("nonidentifiability").stem, None, None, {}, tmp_path)
    bare = vd.Verdict("C1", HOLDS, 3.0, None, None, "", "another rule", "why")
    monkeypatch.setattr(nonidentifiability, "c1", lambda evidence, rules: replace(bare, rule=rules.rule))
    with pytest.raises(ValueError, match="C1 was amended: its verdict must carry its original rule's"):
        ch.judge("C1", _c1_evidence())
    with_original = lambda evidence, rules: replace(  # noqa: E731
        bare, rule=rules.rule, original=replace(bare, rule=rules.original)
    )
    monkeypatch.setattr(nonidentifiability, "c1", with_original)
    with pytest.raises(ValueError, match="robustness alternatives"):
        ch.judge("C1", _c1_evidence())
    monkeypatch.setattr(nonidentifiability, "c1", lambda evidence, rules: bare)
    with pytest.raises(ValueError, match="another rule"):
        ch.judge("C1", _c1_evidence())
    with pytest.raises(ValueError, match="was amended"):
        _ = vd.Rules("the rule in force").pre_registered
    assert "claims" not in ch.results
