"""Controls for C22-C27 (chapter 10): every branch of each rule in force (C22 version 2: the paired difference
from the stronger null above a margin) and of the original rule, on evidence whose truth is known by
construction, through the real verdict functions; and the whole path (per-sentence agreement, intervals,
verdict) on measures that are the reference, a noisy copy of it, unrelated to it, or the null itself."""

import numpy as np
import pytest

from identifiability.base.stats import Interval
from identifiability.contributions.agreement import agreement
from identifiability.evidence.measures import MAIN, LayerScore, MeasuresEvidence
from identifiability.studies.measures import summarise
from identifiability.verdicts import measures as vm
from identifiability.verdicts.core import FAILS, HOLDS, INCONCLUSIVE, NOT_RUN, NOT_TESTABLE, PARTLY, Rules

L = 6
RULES = Rules("the rule", "the original rule")


def _iv(x: float, half: float = 0.02) -> Interval:
    return Interval(x, x - half, x + half, 60, "sentences")


def score(measure, layer, stat, reference="hta", null=0.1, minus_raw=None, half=0.02, stronger=True):
    """A score with the statistic ``stat`` and both nulls at ``null`` (paired gaps stat - null); without
    ``stronger``, as a run recorded before C22 version 2 reads back (no stronger null)."""
    raw = None if minus_raw is None else _iv(minus_raw, half)
    new = {"stronger": _iv(null), "minus_stronger": _iv(stat - null, half)} if stronger else {}
    return LayerScore(measure, reference, layer, MAIN, _iv(stat, half), _iv(null), _iv(null),
                      _iv(stat - null, half), _iv(stat - null, half), raw, **new)  # fmt: skip


def evidence(per: dict[str, list[float]], reference="hta", n=60, **kw) -> MeasuresEvidence:
    scores = [score(m, k + 1, s, reference, **kw) for m, stats in per.items() for k, s in enumerate(stats)]
    return MeasuresEvidence(tuple(scores), n, L)


# with both nulls at 0.1 the margin is 0.25 x (1 - 0.1) = 0.225 over the null, at a statistic of 0.325:
HIGH, LOW, EDGE = 0.8, 0.2, 0.325  # tracks; does not track; undecided (the interval contains the margin)


def test_the_margin_is_a_share_of_the_gap_between_the_stronger_null_and_one():
    s = score("m", 1, 0.9, null=0.6)
    assert vm.margin(s) == pytest.approx(0.25 * (1 - 0.6))
    assert vm.margin(s, vm.MEASURES_MARGIN_LOW) == pytest.approx(0.1 * 0.4)
    assert vm.margin(s, vm.MEASURES_MARGIN_HIGH) == pytest.approx(0.5 * 0.4)
    assert vm.margin(score("m", 1, 0.9, stronger=False)) is None


def test_state_tracks_not_and_undecided():
    assert vm.state(score("m", 1, HIGH)) == vm.TRACKS
    assert vm.state(score("m", 1, LOW)) == vm.NOT_TRACKS
    assert vm.state(score("m", 1, EDGE)) == vm.UNDECIDED
    assert vm.state(score("m", 1, HIGH, null=0.9)) == vm.NOT_TRACKS  # below a null, however high
    assert vm.state(score("m", 1, 0.6, null=0.6)) == vm.NOT_TRACKS  # the stronger null itself
    assert vm.state(None) == vm.UNDECIDED
    assert vm.state(score("m", 1, HIGH, stronger=False)) == vm.UNDECIDED  # recorded before the stronger null


def test_just_above_the_null_but_below_the_margin_does_not_track_where_the_original_rule_tracked():
    """The amendment's point: 0.05 over a stronger null of 0.6 (interval 0.04 to 0.06, above 0) is below the
    margin 0.25 x 0.4 = 0.1, though the statistic's interval (0.64 to 0.66) lies above the old bar 0.5."""
    s = score("m", 1, 0.65, null=0.6, half=0.01)
    assert s.minus_stronger.low > 0 and vm.state(s) == vm.NOT_TRACKS
    assert vm.state_original(s) == vm.TRACKS
    assert vm.state(s, vm.MEASURES_MARGIN_LOW) == vm.TRACKS  # a share 0.1: margin 0.04, below the interval


@pytest.mark.parametrize(
    "stats, expected",
    [
        ([LOW] * 3 + [HIGH] * 3, HOLDS),  # not tracked at half of the layers
        ([HIGH] * 6, FAILS),
        ([LOW] + [HIGH] * 5, PARTLY),
        ([EDGE] * 6, INCONCLUSIVE),
    ],
)
def test_c22_every_branch(stats, expected):
    assert vm.c22(evidence({"raw": stats, "raw@rolled": stats}), RULES).verdict == expected


def test_the_original_rules_verdict_is_computed_beside_the_rule_in_force():
    ev = evidence({"raw": [0.65] * 6, "raw@rolled": [0.65] * 6}, null=0.6, half=0.01)
    v = vm.c22(ev, Rules("in force", "original"))
    assert (v.verdict, v.rule) == (HOLDS, "in force")  # above the null by less than the margin everywhere
    assert (v.original.verdict, v.original.rule) == (FAILS, "original")  # above 0.5 and both nulls everywhere
    assert v.threshold == pytest.approx(0.1) and v.estimate == pytest.approx(0.05)
    assert v.original.threshold == vm.MEASURES_TAU and v.original.estimate == pytest.approx(0.65)


def test_a_run_recorded_before_the_stronger_null_is_not_run_and_names_make_measures():
    ev = evidence({"raw": [HIGH] * 6, "raw@rolled": [HIGH] * 6}, stronger=False)
    v = vm.c22(ev, Rules("in force", "original"))
    assert v.verdict == NOT_RUN and "make measures" in v.reason and "stronger null" in v.reason
    assert v.original.verdict == FAILS  # the original rule reads what was recorded
    assert {verdict for _, verdict in v.robustness} == {NOT_RUN}


@pytest.mark.parametrize("claim", ("C22", "C23", "C24", "C25", "C26", "C27"))
def test_the_robustness_rows_are_those_the_claims_table_names(claim):
    from identifiability.verdicts.claims import load_claims, robustness_names

    row = next(c for c in load_claims() if c["id"] == claim)
    v = getattr(vm, claim.lower())(evidence({"raw": [HIGH] * 6}), Rules("in force", "original"))
    assert [name for name, _ in v.robustness] == robustness_names(row)


def test_a_one_layer_reference_not_computed_is_not_run_and_named():
    """The one-layer references (exact HTA of layer l alone, the one-layer intervention) come with another
    change of the study: until a build scores them, the rows that need them say what is missing."""
    ev = evidence({"raw": [LOW] * 6, "raw@rolled": [LOW] * 6})
    v = vm.c22(ev, RULES)
    assert v.verdict == HOLDS and dict(v.robustness)["one layer"] == NOT_RUN
    assert "exact HTA of layer l alone" in v.reason and "not run" in v.reason
    with_layer = MeasuresEvidence(ev.scores + evidence({"raw": [HIGH] * 6}, reference="hta_layer").scores, 60, L)
    assert dict(vm.c22(with_layer, RULES).robustness)["one layer"] == FAILS
    c26 = vm.c26(evidence({"hta": [HIGH] * 6}, reference="intervention"), RULES)
    assert dict(c26.robustness)["one layer"] == NOT_RUN and "the one-layer intervention" in c26.reason
    c27 = vm.c27(evidence({"value_zeroing@rolled": [HIGH] * 6}), RULES)
    assert dict(c27.robustness)["as it is"] == NOT_RUN and "exact HTA of layer l alone" in c27.reason


def test_not_run_and_not_testable():
    empty = MeasuresEvidence((), 0, L)
    assert vm.c22(empty, RULES).verdict == NOT_RUN
    assert vm.c22(evidence({"raw": [LOW] * 6}, n=49), RULES).verdict == NOT_TESTABLE
    ev = MeasuresEvidence(evidence({"alti": [HIGH] * 6}).scores, 60, L, (("alti", "gpt2 is not post-LN"),))
    v = vm.c24(ev, RULES)
    assert v.verdict == NOT_TESTABLE and "gpt2" in v.reason


def _c23(rollout_gap, flow_gap, last=HIGH):
    """C23 with each measure's gap to raw attention (one value, or one per layer 1..L)."""
    per = []
    for m, gap in (("rollout", rollout_gap), ("flow", flow_gap)):
        gaps = gap if isinstance(gap, list) else [gap] * L
        per += [score(m, k, last if k == L else 0.6, minus_raw=gaps[k - 1]) for k in range(1, L + 1)]
    per += [score("raw", k, 0.3) for k in range(1, L + 1)]
    return vm.c23(MeasuresEvidence(tuple(per), 60, L), RULES).verdict


def test_c23_every_branch():
    assert _c23(0.2, 0.2) == HOLDS
    assert _c23(0.2, -0.2) == FAILS  # flow below raw attention at every deeper layer
    assert _c23(0.2, 0.2, last=LOW) == FAILS  # neither tracks at the last layer
    assert _c23(0.2, [0.0, 0.2, 0.0, 0.0, 0.0, 0.0]) == PARTLY  # flow above raw attention at layer 2 only
    assert _c23(0.2, 0.0) == INCONCLUSIVE  # flow above raw attention nowhere, below nowhere
    assert _c23(0.0, 0.0) == INCONCLUSIVE


@pytest.mark.parametrize(
    "alti, expected",
    [
        ([HIGH] * 6, HOLDS),
        ([LOW] * 3 + [HIGH] * 3, FAILS),
        ([LOW] + [HIGH] * 5, PARTLY),
        ([EDGE] + [HIGH] * 5, INCONCLUSIVE),
    ],
)
def test_c24_every_branch(alti, expected):
    ev = evidence({"norm_resln@rolled": [HIGH] * 6, "globenc": [HIGH] * 6, "alti": alti})
    assert vm.c24(ev, RULES).verdict == expected


def test_c26_reads_the_intervention_and_its_mask_alternative():
    ev = evidence({"hta": [HIGH] * 6}, reference="intervention")
    v = vm.c26(ev, RULES)
    assert v.verdict == HOLDS and dict(v.robustness)["mask"] == NOT_RUN  # no [MASK] scores in this build


def test_c25_and_c27_read_their_measures():
    assert vm.c25(evidence({"grad_input": [HIGH] * 6, "integrated_gradients": [LOW] * 6}), RULES).verdict == FAILS
    per = (
        evidence({"value_zeroing@rolled": [HIGH] * 6}).scores
        + evidence({"value_zeroing": [LOW] * 6}, "hta_layer").scores
    )
    v = vm.c27(MeasuresEvidence(per, 60, L), RULES)
    assert v.verdict == HOLDS and dict(v.robustness)["as it is"] == FAILS


# ---- the whole path on measures whose truth is known by construction ----


def _sentences(n_sentences=60, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_sentences):
        d = int(rng.integers(6, 14))
        ref = rng.dirichlet(np.ones(d), size=(L + 1, d))
        ref[0] = np.eye(d)
        out.append(ref)
    return out


def _path(make, seed=0):
    refs = _sentences(seed=seed)
    rng = np.random.default_rng(seed + 1)
    rows = [agreement(make(r, rng), r, seed=k) for k, r in enumerate(refs)]
    ev = MeasuresEvidence(summarise({("m", "hta"): rows}), len(refs), L)
    return vm.judge_every_layer("C24", ev, ["m"], "hta", "rule")


def test_the_reference_itself_tracks_at_every_layer():
    assert _path(lambda r, rng: r).verdict == HOLDS


def test_a_noisy_copy_tracks_and_an_unrelated_measure_fails():
    assert _path(lambda r, rng: r + rng.normal(0, 0.02, r.shape)).verdict == HOLDS
    assert _path(lambda r, rng: rng.dirichlet(np.ones(r.shape[-1]), size=r.shape[:2])).verdict == FAILS


def test_the_distance_baseline_itself_does_not_beat_the_distance_null():
    from identifiability.contributions.agreement import distance_baseline

    v = _path(lambda r, rng: distance_baseline(r.shape[-1], L))
    assert v.verdict == FAILS and "does not track at layers 1, 2, 3, 4, 5, 6" in v.reason


def test_just_above_the_distance_null_is_not_enough():
    """References that mostly fall with distance (the distance baseline times noise), and a measure that is the
    distance baseline with its ties (tokens i - 1 and i + 1) broken by the reference: above the stronger null in
    every sentence by less than a quarter of the gap to 1, so it does not track anywhere, where the original
    rule (statistic above 0.5, above both nulls) said it tracks everywhere."""
    from identifiability.contributions.agreement import distance_baseline

    rng = np.random.default_rng(0)
    refs = []
    for _ in range(60):
        d = int(rng.integers(6, 14))
        r = distance_baseline(d, L) * np.exp(rng.normal(0, 0.5, (L + 1, d, d)))
        r[0] = np.eye(d)
        refs.append(r)
    rows = [agreement(distance_baseline(r.shape[-1], L) + 1e-6 * r, r, seed=k) for k, r in enumerate(refs)]
    ev = MeasuresEvidence(summarise({("m", "hta"): rows}), len(refs), L)
    scores = ev.of("m", "hta").values()
    assert all(s.minus_stronger.low > 0 for s in scores)  # above the null ...
    assert all(vm.state(s) == vm.NOT_TRACKS for s in scores)  # ... but below the margin
    assert all(vm.state_original(s) == vm.TRACKS for s in scores)


def test_rows_recorded_before_the_stronger_null_read_back_and_every_claim_says_not_run():
    """A recorded run's rows without the fields C22 version 2 added (stronger null, pairs) read back without
    error; every claim is then 'not run in this build' naming `make measures`, and its original rule's verdict
    is still judged on what was recorded; the scores chart marks them 'not recorded'."""
    from identifiability.charts.measures import NOT_RECORDED, scores_chart
    from identifiability.studies.measures import score_rows, scores_from_rows
    from identifiability.verdicts.claims import rules

    keys = ["raw", "raw@rolled", "rollout", "flow", "norm_resln@rolled", "globenc", "alti", "grad_input"]
    keys += ["integrated_gradients", "value_zeroing@rolled"]
    new = evidence(dict.fromkeys(keys, [HIGH] * 6)).scores + evidence({"hta": [HIGH] * 6}, "intervention").scores
    rows = [{k: v for k, v in r.items() if k not in ("stronger", "minus_stronger", "minus_others")}
            for r in score_rows(new)]  # fmt: skip
    ev = MeasuresEvidence(scores_from_rows(rows), 60, L)
    for claim in ("C22", "C23", "C24", "C25", "C26", "C27"):
        v = getattr(vm, claim.lower())(ev, rules(claim))
        assert v.verdict == NOT_RUN and "make measures" in v.reason, claim
        assert v.original is not None and v.original.verdict not in (NOT_RUN, NOT_TESTABLE), claim
    table = next(iter(scores_chart(rows, 60).to_dict()["datasets"].values()))
    assert {r["state"] for r in table} == {NOT_RECORDED}
