"""Every branch of every claim's rule on synthetic measurements, and the sentence the page renders from it."""

from __future__ import annotations

import numpy as np
import pytest

from identifiability import stats
from identifiability import verdicts as vd
from identifiability.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, PARTLY, Interval

R = "the rule"


def iv(est: float, low: float, high: float, n: int = 40) -> Interval:
    return Interval(est, low, high, n)


def test_interval_sides_and_units_to_settle():
    x = iv(0.88, 0.85, 0.91, n=40)
    assert x.side(0.9) == "contains" and x.side(0.8) == "above" and x.side(0.95) == "below"
    # half-width 0.03 at distance 0.02: (0.03/0.02)^2 = 2.25 times the units
    assert stats.units_to_settle(40, (0.85, 0.91), 0.88, 0.9) == 90
    assert stats.units_to_settle(40, (0.85, 0.91), 0.9, 0.9) is None


def test_bootstrap_is_seeded_and_covers_the_mean():
    rng = np.random.default_rng(0)
    v = rng.normal(1.0, 1.0, 200)
    a, b = stats.bootstrap_ci(v, seed=3), stats.bootstrap_ci(v, seed=3)
    assert a == b and a[0] < v.mean() < a[1] and 0.2 < a[1] - a[0] < 0.4
    assert np.isnan(stats.bootstrap_ci([2.0])).all()  # one unit: nothing to resample, no interval
    assert stats.bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)  # every resample the same
    est, lo, hi = stats.paired_ci(v + 1.0, v)
    assert est == pytest.approx(1.0) and lo == pytest.approx(1.0) and hi == pytest.approx(1.0)


@pytest.mark.parametrize(
    "below,median,paired,expected",
    [
        (True, iv(0.3, 0.25, 0.35), iv(-0.1, -0.15, -0.05), HOLDS),
        (True, iv(0.3, 0.25, 0.35), iv(0.1, 0.05, 0.15), PARTLY),
        (True, iv(0.3, 0.25, 0.35), iv(0.0, -0.05, 0.05), INCONCLUSIVE),
        (True, iv(0.95, 0.92, 0.97), iv(-0.1, -0.15, -0.05), FAILS),
        (True, iv(0.9, 0.85, 0.95), iv(-0.1, -0.15, -0.05), INCONCLUSIVE),
        (False, iv(0.3, 0.25, 0.35), iv(-0.1, -0.15, -0.05), FAILS),
    ],
)
def test_c4_is_judged_part_by_part(below, median, paired, expected):
    v = vd.judge_c4(below, median, paired, 0.5, R)
    assert v.verdict == expected and len(v.parts) == 2 and v.baseline == 0.5


def test_c5_branches():
    good, bad, edge = iv(0.2, 0.1, 0.3), iv(1.1, 1.0, 1.2), iv(0.5, 0.4, 0.6)
    below, above = iv(-0.2, -0.3, -0.1), iv(0.2, 0.1, 0.3)
    assert vd.judge_c5(good, below, "", None, None, 0.6, R).verdict == HOLDS
    assert vd.judge_c5(bad, above, "[CLS]", bad, above, 0.6, R).verdict == FAILS
    assert vd.judge_c5(edge, below, "", None, None, 0.6, R).verdict == INCONCLUSIVE
    partly = vd.judge_c5(bad, above, "[CLS]", good, below, 0.6, R)  # the paper's token no, this model's peak yes
    assert partly.verdict == PARTLY and "[CLS]" in partly.reason
    # the peak must also beat the random subspace
    assert vd.judge_c5(bad, above, "[CLS]", good, above, 0.6, R).verdict == FAILS
    assert vd.judge_c5(None, None, "", None, None, None, R).verdict == NOT_TESTABLE


@pytest.mark.parametrize(
    "rate,expected",
    [
        (iv(0.9, 0.87, 0.92), HOLDS),
        (iv(0.78, 0.75, 0.8), PARTLY),
        (iv(0.5, 0.45, 0.55), FAILS),
        (iv(0.85, 0.83, 0.88), INCONCLUSIVE),
        (iv(0.7, 0.68, 0.72), INCONCLUSIVE),
    ],
)
def test_c6(rate, expected):
    v = vd.judge_c6(rate, 0.001, R)
    assert v.verdict == expected and v.baseline == 0.001


@pytest.mark.parametrize(
    "diff,expected", [(iv(-0.2, -0.3, -0.1), HOLDS), (iv(0.1, 0.05, 0.2), FAILS), (iv(0.02, -0.1, 0.1), INCONCLUSIVE)]
)
def test_c7(diff, expected):
    v = vd.judge_c7(diff, 0.05, R)
    assert v.verdict == expected
    if expected == INCONCLUSIVE:
        assert "about 1000 units instead of 40 would settle it" in v.reason
    assert "would not settle it" in vd.judge_c7(iv(0.0, -0.1, 0.1), 0.05, R).reason


def test_c8_branches():
    angle_ok, angle_bad = iv(0.0, -0.01, 0.01), iv(-0.2, -0.25, -0.15)
    norm_chance, norm_informative = iv(0.0, -0.01, 0.02), iv(0.3, 0.25, 0.35)
    assert vd.judge_c8(angle_ok, norm_chance, 0.01, None, R).verdict == HOLDS  # magnitude not testable
    assert vd.judge_c8(angle_bad, norm_chance, 0.01, None, R).verdict == FAILS
    assert vd.judge_c8(angle_ok, norm_informative, 0.3, iv(0.0, -0.01, 0.01), R).verdict == FAILS
    assert vd.judge_c8(angle_ok, norm_chance, 0.3, iv(0.0, -0.01, 0.01), R).verdict == HOLDS
    assert vd.judge_c8(angle_ok, norm_chance, 0.3, iv(0.2, 0.1, 0.3), R).verdict == PARTLY  # the norm adds identity
    assert vd.judge_c8(iv(-0.02, -0.04, 0.0), norm_chance, 0.3, iv(0.0, -0.01, 0.01), R).verdict == INCONCLUSIVE
    assert "not testable" in vd.judge_c8(angle_ok, norm_chance, 0.01, None, R).reason


def test_c9_branches():
    down, up, flat = iv(-0.1, -0.15, -0.05), iv(0.05, 0.02, 0.08), iv(0.0, -0.02, 0.02)
    assert vd.judge_c9([down, down], down, 0.05, R).verdict == HOLDS
    assert vd.judge_c9([down, up], down, 0.05, R).verdict == PARTLY
    assert vd.judge_c9([down, flat], down, 0.05, R).verdict == INCONCLUSIVE
    assert vd.judge_c9([up, up], up, 0.05, R).verdict == FAILS
    assert "rises at layer(s) [3]" in vd.judge_c9([down, up], down, 0.05, R).reason


@pytest.mark.parametrize(
    "share,expected",
    [
        (iv(0.7, 0.65, 0.75), HOLDS),
        (iv(0.95, 0.9, 0.99), FAILS),
        (iv(0.3, 0.25, 0.35), FAILS),
        (iv(0.85, 0.8, 0.9), INCONCLUSIVE),
        (iv(0.55, 0.5, 0.6), INCONCLUSIVE),
    ],
)
def test_c10(share, expected):
    assert vd.judge_c10(share, 0.05, R).verdict == expected


def test_c11_branches():
    pos, neg, zero = iv(0.1, 0.05, 0.15), iv(-0.1, -0.15, -0.05), iv(0.0, -0.05, 0.05)
    assert vd.judge_c11([pos, pos], pos, 0.1, R).verdict == HOLDS
    assert vd.judge_c11([pos, pos], neg, 0.1, R).verdict == PARTLY
    assert vd.judge_c11([neg, pos], neg, 0.1, R).verdict == FAILS
    assert vd.judge_c11([pos, pos], zero, 0.1, R).verdict == INCONCLUSIVE


def test_a_verdict_outside_the_five_is_refused():
    with pytest.raises(ValueError, match="verdict must be one of"):
        vd.Verdict("C1", "holds with caveat", None, None, None, "", R, "")


@pytest.mark.parametrize(
    "verdict",
    [
        vd.judge_c6(iv(0.9, 0.87, 0.92), 0.001, R),
        vd.judge_c6(iv(0.78, 0.75, 0.8), 0.001, R),
        vd.judge_c6(iv(0.5, 0.45, 0.55), 0.001, R),
        vd.judge_c7(iv(0.0, -0.1, 0.1), 0.05, R),
    ],
    ids=lambda v: v.verdict,
)
def test_the_rendered_sentence_states_the_verdict_and_the_numbers(verdict):
    text = vd.render(verdict, "Tokens stay identifiable")
    assert text.startswith(f"**{verdict.claim} — {verdict.verdict}.** Tokens stay identifiable.")
    if verdict.estimate is not None:
        assert f"{verdict.estimate:.3g}" in text
    if verdict.ci95 is not None and verdict.ci95[0] != verdict.ci95[1]:
        assert f"95% interval {verdict.ci95[0]:.3g} to {verdict.ci95[1]:.3g}" in text
    assert verdict.reason in text and "nan" not in text.lower() and "None" not in text
    assert verdict.to_json()["verdict"] == verdict.verdict


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
    verdicts = [
        vd.judge_c6(one, 0.001, R),
        vd.judge_c7(one, 0.05, R),
        vd.judge_c10(Interval(0.7, lo, hi, n=1), 0.05, R),  # inside C10's band, as a point
        vd.judge_c13({"m": one}, None, R),
    ]
    for v in verdicts:
        assert v.verdict == INCONCLUSIVE, (v.claim, v.verdict)
        text = vd.render(v)
        assert "no interval" in text and "nan" not in text.lower(), text
    spec = verdict_chart([v.to_json() for v in verdicts]).to_dict()
    assert "NaN" not in str(spec) and "nan" not in str(spec)


def test_c12_branches():
    below, above, zero = iv(-0.2, -0.3, -0.1), iv(0.1, 0.05, 0.15), iv(0.0, -0.05, 0.05)
    assert vd.judge_c12(below, above, 0.05, R).verdict == HOLDS
    assert vd.judge_c12(below, iv(-0.1, -0.15, -0.05), 0.05, R).verdict == PARTLY
    assert vd.judge_c12(iv(0.2, 0.1, 0.3), iv(-0.1, -0.15, -0.05), 0.05, R).verdict == FAILS
    assert vd.judge_c12(zero, above, 0.05, R).verdict == INCONCLUSIVE
    only_pos = vd.judge_c12(None, above, 0.05, R)  # no special tokens: judged on the other part alone
    assert only_pos.verdict == HOLDS and "no special tokens" in only_pos.reason
    assert vd.judge_c12(None, None, 0.05, R).verdict == NOT_TESTABLE


def test_the_verdict_chart_has_one_panel_per_interval_with_its_threshold():
    from identifiability.charts.verdicts import verdict_chart

    c4 = vd.judge_c4(True, iv(0.3, 0.25, 0.35), iv(-0.1, -0.15, -0.05), 0.5, R)
    c2 = vd.judge_c2_original(True, 1.0, True, R)  # an exact count: no interval, no panel
    chart = verdict_chart([c4.to_json(), c2.to_json()])
    assert chart.to_dict()["vconcat"]
    panels = chart.vconcat
    assert len(panels) == 2  # C4's two parts (C4's own interval is the first part's)
    assert [p.title.text for p in panels] == ["C4.decorrelation — holds", "C4.beyond dimension counting — holds"]
    thresholds = [float(layer.data["t"].iloc[0]) for p in panels for layer in p.layer if "t" in layer.data]
    assert thresholds == [0.9, 0.0]


def test_an_interval_prints_for_people():
    from identifiability.verdicts import Interval

    assert str(Interval(0.28712, 0.27, 0.3049, n=16)) == "0.287 (95% interval 0.27 to 0.305, 16 units)"
    assert str(Interval(0.5, float("nan"), float("nan"), n=1)) == "0.5 (no interval: 1 unit(s))"
