"""Controls for C22-C27 (chapter 10): every branch of each rule, on evidence whose truth is known by
construction, through the real verdict functions; and the whole path (per-sentence agreement, intervals,
verdict) on measures that are the reference, a noisy copy of it, or unrelated to it."""

import numpy as np
import pytest

from identifiability.base.stats import Interval
from identifiability.contributions.agreement import agreement
from identifiability.evidence.measures import MAIN, LayerScore, MeasuresEvidence
from identifiability.studies.measures import summarise
from identifiability.verdicts import measures as vm
from identifiability.verdicts.core import FAILS, HOLDS, INCONCLUSIVE, NOT_RUN, NOT_TESTABLE, PARTLY, Rules

L = 6
RULES = Rules("the rule")


def _iv(x: float, half: float = 0.02) -> Interval:
    return Interval(x, x - half, x + half, 60, "sentences")


def score(measure, layer, stat, reference="hta", null=0.1, minus_raw=None, half=0.02):
    """A score with the statistic ``stat`` and both nulls at ``null`` (paired gaps stat - null)."""
    raw = None if minus_raw is None else _iv(minus_raw, half)
    return LayerScore(measure, reference, layer, MAIN, _iv(stat, half), _iv(null), _iv(null),
                      _iv(stat - null, half), _iv(stat - null, half), raw)  # fmt: skip


def evidence(per: dict[str, list[float]], reference="hta", n=60, **kw) -> MeasuresEvidence:
    scores = [score(m, k + 1, s, reference, **kw) for m, stats in per.items() for k, s in enumerate(stats)]
    return MeasuresEvidence(tuple(scores), n, L)


HIGH, LOW, EDGE = 0.8, 0.2, 0.5  # tracks; does not track; undecided (the interval contains the threshold)


def test_state_tracks_not_and_undecided():
    assert vm.state(score("m", 1, HIGH)) == vm.TRACKS
    assert vm.state(score("m", 1, LOW)) == vm.NOT_TRACKS
    assert vm.state(score("m", 1, EDGE)) == vm.UNDECIDED
    assert vm.state(score("m", 1, HIGH, null=0.9)) == vm.NOT_TRACKS  # below a null, however high
    assert vm.state(None) == vm.UNDECIDED


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
    assert v.verdict == HOLDS and dict(v.robustness)["mask"] == INCONCLUSIVE  # no [MASK] scores: undecided


def test_c25_and_c27_read_their_measures():
    assert vm.c25(evidence({"grad_input": [HIGH] * 6, "integrated_gradients": [LOW] * 6}), RULES).verdict == FAILS
    v = vm.c27(evidence({"value_zeroing@rolled": [HIGH] * 6, "value_zeroing": [LOW] * 6}), RULES)
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
    assert v.verdict == FAILS


def test_a_reason_names_measures_and_references_in_words_never_by_key():
    """Issue 53: the study gives the evidence each key's name (studies.measures.names_of), the reasons say it."""
    from dataclasses import replace

    from identifiability.studies.measures import names_of
    from identifiability.verdicts.text import math_text

    ev = evidence({"norm_resln@rolled": [HIGH] * 6, "globenc": [HIGH] * 6, "alti": [HIGH] * 6})
    ev = replace(ev, names=names_of(ev.scores))
    why = vm.c24(ev, RULES).reason
    assert why.startswith("Norm + residual + LN (rolled out): tracks at layers 1, 2, 3, 4, 5, 6; GlobEnc: tracks")
    assert why.endswith("ALTI: tracks at layers 1, 2, 3, 4, 5, 6 (against exact HTA)")
    assert "norm_resln" not in why and "$" not in math_text(why)
