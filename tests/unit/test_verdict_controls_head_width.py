"""Controls for C19, C20 and C21 (predictions across the family of head widths) whose truth is known by
construction: evidence built by hand (margins tables with chosen ranks and singular values, intervals placed on
either side of the rules' thresholds), judged by the entry points ``c19``, ``c20``, ``c21`` and their
per-threshold parts. Every branch of each rule has one control asserting one verdict, including: an
undertrained member is named and not judged; C20 is not testable with one seed; C21 partly holds when a twin's
D_sub is also below 0 and when a member's D_val is not."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from identifiability.base.stats import Interval
from identifiability.evidence.head_width import (
    C19Evidence,
    C19Model,
    C20Comparison,
    C20Evidence,
    C20Pair,
    C21Evidence,
    C21Model,
    FamilyModel,
)
from identifiability.pretrain.family import MIN_GAIN
from identifiability.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, PARTLY, Rules
from identifiability.verdicts import head_width as V
from identifiability.verdicts import nonidentifiability as V2
from identifiability.verdicts.claims import load_claims, robustness_names

RULES = Rules("the rule")  # C19-C21 were never amended
GOOD = 0.08  # an accuracy gain above FAMILY_MIN_GAIN
POOR = 0.02  # below it: undertrained


def _model(d_v: int, seed: int = 0, width: int = 128, gain: float | None = GOOD, twin: bool = False) -> FamilyModel:
    member = f"mlm-w{width}-dv{d_v}-seed{seed}"
    return FamilyModel(
        name=member + ("-init" if twin else ""),
        member=member,
        d_v=d_v,
        width=width,
        heads=width // d_v,
        seed=seed,
        trained_enough=gain is not None and gain >= MIN_GAIN,
        twin=twin,
        accuracy_gain=None if twin else gain,
    )


def test_constants_are_the_family_and_c2_ones():
    assert V.FAMILY_MIN_GAIN == MIN_GAIN
    assert (V.C2_UNIQUE_SHARE, V.C2_FAIL_SHARE, V.C2_MARGIN) == (
        V2.C2_UNIQUE_SHARE,
        V2.C2_FAIL_SHARE,
        V2.C2_MARGIN,
    )
    assert (V.C2_UNIQUE_SHARE_ALT, V.C2_MARGIN_ALT) == (V2.C2_UNIQUE_SHARE_ALT, V2.C2_MARGIN_ALT)


def test_judged_reads_the_gain_with_the_rules_constant():
    assert V.judged(_model(32, gain=MIN_GAIN))
    assert not V.judged(_model(32, gain=MIN_GAIN - 1e-6))
    assert not V.judged(_model(32, twin=True))
    flag_only = FamilyModel("m", "m", 32, 128, 4, 0, trained_enough=True, twin=False)
    assert V.judged(flag_only) and not V.judged(FamilyModel("m", "m", 32, 128, 4, 0, False, False))


# --------------------------------------------------------------------------------------------------
# C19
# --------------------------------------------------------------------------------------------------


def _margins(d_v: int, unique: int, pairs: int = 20, sentences: int = 4, sigma: float = 1e-3) -> pd.DataFrame:
    """``pairs`` (input, head) rows at d_s = d_v + 1, the first ``unique`` of full rank([T,1]) with smallest
    relative singular value ``sigma``, the rest rank-deficient (rank d_s - 1, sigma 0)."""
    rows = [
        dict(text=i % sentences, sentence=i % sentences, layer=1, head=i, d_s=d_v + 1,
             rank_T1=d_v + 1 if i < unique else d_v, sigma_min_T1=sigma if i < unique else 0.0)
        for i in range(pairs)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def _c19(d_v: int, unique: int = 20, alt: bool | None = True, sentences: int = 4, sigma: float = 1e-3, **kw):
    m = _model(d_v, **kw)
    return C19Model(m, _margins(d_v, unique, sentences=sentences, sigma=sigma), sentences, alt)


def _family19(**changes) -> list[C19Model]:
    """Three judged members (d_v 16, 32, 64) and their twins, every one at d_v + 2; ``changes``: name ->
    replacement."""
    out = {}
    for d_v in (16, 32, 64):
        out[f"m{d_v}"] = _c19(d_v)
        out[f"t{d_v}"] = _c19(d_v, twin=True)
    out.update(changes)
    return list(out.values())


def test_c19_holds_when_every_member_and_twin_is_at_dv2():
    v = V.c19(C19Evidence(tuple(_family19())), RULES)
    assert v.verdict == HOLDS and v.estimate == 1.0
    assert [n for n, _ in v.robustness] == robustness_names(next(c for c in load_claims() if c["id"] == "C19"))


def test_c19_fails_when_a_judged_member_is_at_dv1():
    v = V.c19(C19Evidence(tuple(_family19(m32=_c19(32, unique=9)))), RULES)  # 45% unique
    assert v.verdict == FAILS and "mlm-w128-dv32-seed0" in v.reason


def test_c19_fails_when_a_judged_member_has_a_head_without_alternatives_at_dv2():
    v = V.c19(C19Evidence(tuple(_family19(m64=_c19(64, alt=False)))), RULES)
    assert v.verdict == FAILS and "no alternative" in v.reason


def test_c19_partly_when_a_member_is_between_50_and_95_percent():
    v = V.c19(C19Evidence(tuple(_family19(m16=_c19(16, unique=18)))), RULES)  # 90%
    assert v.verdict == PARTLY
    assert dict(v.robustness)["share"] == HOLDS  # 90% passes the alternative share


def test_c19_partly_when_a_twin_is_at_dv1():
    """Fails only for judged members: a twin at d_v + 1 leaves the claim partly holding."""
    v = V.c19(C19Evidence(tuple(_family19(t32=_c19(32, unique=2, twin=True)))), RULES)
    assert v.verdict == PARTLY and "mlm-w128-dv32-seed0-init" in v.reason


def test_c19_partly_with_inputs_from_fewer_than_three_sentences():
    v = V.c19(C19Evidence(tuple(_family19(m16=_c19(16, sentences=2)))), RULES)
    assert v.verdict == PARTLY and "too few sentences" in v.reason


def test_c19_margin_alternative_counts_pairs_above_the_larger_margin():
    v = V.c19(C19Evidence(tuple(_family19(m16=_c19(16, sigma=1e-7)))), RULES)
    assert v.verdict == HOLDS and dict(v.robustness)["margin"] == FAILS  # 1e-7 < 1e-6: none unique


def test_c19_does_not_judge_an_undertrained_member():
    """The d_v = 64 member is undertrained and at d_v + 1: named, not judged; its twin is not judged either."""
    bad = _c19(64, unique=0, gain=POOR)
    v = V.c19(C19Evidence(tuple(_family19(m64=bad, t64=_c19(64, unique=0, twin=True)))), RULES)
    assert v.verdict == HOLDS and "undertrained" in v.reason and "mlm-w128-dv64-seed0" in v.reason


def test_c19_not_testable_with_fewer_than_two_judged_d_v():
    models = _family19(m16=_c19(16, gain=POOR), m64=_c19(64, gain=POOR))
    v = V.c19(C19Evidence(tuple(models)), RULES)
    assert v.verdict == NOT_TESTABLE and "undertrained" in v.reason


def test_c2_keeps_its_decisions_after_the_helper():
    """The per-model helper C19 shares with C2 leaves C2's three outcomes where they were."""
    m = _margins(32, 20)
    assert V2.judge_c2(True, m, True, "r").verdict == HOLDS
    assert V2.judge_c2(False, m, True, "r").verdict == PARTLY
    assert V2.judge_c2(True, _margins(32, 9), True, "r").verdict == FAILS


# --------------------------------------------------------------------------------------------------
# C20
# --------------------------------------------------------------------------------------------------


def _iv(est: float, half: float = 0.01, n: int = 40) -> Interval:
    return Interval(est, est - half, est + half, n, "inputs")


def _models20(**gains) -> list[FamilyModel]:
    ms = [_model(d, gain=gains.get(f"dv{d}", GOOD)) for d in (16, 32, 64)]
    ms.append(_model(32, seed=1, gain=gains.get("seed1", GOOD)))
    ms += [_model(d, twin=True) for d in (16, 32, 64)]
    return ms


def _comparison(diffs: dict[tuple[int, int], Interval], seed: Interval | None = None, lengths: int = 8):
    name = "mlm-w128-dv{}-seed0".format
    pairs = tuple(C20Pair(name(a), name(b), x) for (a, b), x in diffs.items())
    twins = tuple(C20Pair(name(a) + "-init", name(b) + "-init", _iv(0.0)) for a, b in diffs)
    return C20Comparison(
        members=(name(16), name(32), name(64)),
        ratio_range=(1.125, 4.0),
        lengths=lengths,
        d={},
        pairs=pairs,
        twin_pairs=twins,
        seed_difference=seed,
        seeds=(name(32), "mlm-w128-dv32-seed1") if seed is not None else (),
    )


SEED = Interval(0.01, 0.0, 0.05, 40, "inputs")  # |D(seed 0) - D(seed 1)|: B = 0.05, its estimate 0.01
PAIRS = [(16, 32), (16, 64), (32, 64)]


def _c20(diffs, seed=SEED, lengths=8, models=None, half=None):
    comp = _comparison(dict(zip(PAIRS, diffs)), seed, lengths)
    return V.c20(C20Evidence(tuple(models or _models20()), comp, half), RULES)


def test_c20_holds_when_every_pair_lies_inside_the_seed_bound():
    v = _c20([_iv(0.0), _iv(0.02), _iv(-0.02)])
    assert v.verdict == HOLDS and v.threshold == pytest.approx(0.05)
    assert "(one pair of seeds)" in v.reason  # what the bound rests on (issue 54 item 7)
    assert dict(v.robustness)["bound"] == INCONCLUSIVE  # B = 0.01 (point estimate): 0.02 +- 0.01 overlaps it
    assert dict(v.robustness)["members"] == NOT_TESTABLE  # the half-width member was not measured


def test_c20_fails_when_a_pair_lies_entirely_outside():
    v = _c20([_iv(0.0), _iv(0.2), _iv(-0.02)])
    assert v.verdict == FAILS and "mlm-w128-dv16-seed0 - mlm-w128-dv64-seed0" in v.reason


def test_c20_inconclusive_when_a_pair_overlaps_the_bound():
    v = _c20([_iv(0.0), _iv(0.05, 0.02), _iv(0.0)])
    assert v.verdict == INCONCLUSIVE


def test_c20_not_testable_with_one_seed():
    v = _c20([_iv(0.0)] * 3, seed=None)
    assert v.verdict == NOT_TESTABLE and "two judged pre-training seeds" in v.reason


def test_c20_not_testable_when_the_second_seed_is_undertrained():
    v = _c20([_iv(0.0)] * 3, models=_models20(seed1=POOR))
    assert v.verdict == NOT_TESTABLE and "undertrained" in v.reason


def test_c20_not_testable_with_fewer_than_three_lengths_in_the_common_range():
    assert _c20([_iv(0.0)] * 3, lengths=2).verdict == NOT_TESTABLE


def test_c20_not_testable_with_fewer_than_two_judged_d_v():
    models = _models20(dv16=POOR, dv64=POOR)
    v = _c20([_iv(0.0)] * 3, models=models)
    assert v.verdict == NOT_TESTABLE and "different d_v" in v.reason


def test_c20_does_not_judge_an_undertrained_member():
    """The d_v = 16 member is undertrained and far off: its pairs are left out, the rest hold."""
    v = _c20([_iv(0.5), _iv(0.5), _iv(0.0)], models=_models20(dv16=POOR))
    assert v.verdict == HOLDS and "undertrained" in v.reason


def test_c20_inconclusive_without_an_interval_of_the_seed_difference():
    v = _c20([_iv(0.0)] * 3, seed=Interval(0.01, math.nan, math.nan, 1, "inputs"))
    assert v.verdict == INCONCLUSIVE and "too few inputs" in v.reason


def test_c20_members_alternative_judges_the_half_width_comparison():
    half_w = _model(32, width=64)
    models = [*_models20(), half_w]
    half = _comparison({(16, 32): _iv(0.0)}, SEED)
    half = C20Comparison(
        (*half.members, half_w.name), half.ratio_range, 8, {},
        (*half.pairs, C20Pair(half_w.name, "mlm-w128-dv16-seed0", _iv(0.3))), half.twin_pairs, SEED, half.seeds,
    )  # fmt: skip
    v = _c20([_iv(0.0)] * 3, models=models, half=half)
    assert v.verdict == HOLDS and dict(v.robustness)["members"] == FAILS


# --------------------------------------------------------------------------------------------------
# C21
# --------------------------------------------------------------------------------------------------

BELOW, ABOVE, ZERO = _iv(-0.1), _iv(0.1), _iv(0.0)


def _c21(d_v: int, sub: Interval, val: Interval, twin: bool = False, gain: float = GOOD, heads=None) -> C21Model:
    s, v = heads or (sub, val)
    return C21Model(_model(d_v, twin=twin, gain=gain), sub, val, s, v)


def _family21(**changes) -> C21Evidence:
    """Members with D_sub and D_val below 0, twins with D_sub at 0: the claim as stated."""
    out = {}
    for d_v in (16, 32, 64):
        out[f"m{d_v}"] = _c21(d_v, BELOW, BELOW)
        out[f"t{d_v}"] = _c21(d_v, ZERO, ZERO, twin=True)
    out.update(changes)
    return C21Evidence(tuple(out.values()))


def test_c21_holds():
    v = V.c21(_family21(), RULES)
    assert v.verdict == HOLDS and v.baseline == 0.0
    assert [n for n, _ in v.robustness] == robustness_names(next(c for c in load_claims() if c["id"] == "C21"))


def test_c21_partly_when_a_twin_is_below_zero_too():
    v = V.c21(_family21(t32=_c21(32, BELOW, ZERO, twin=True)), RULES)
    assert v.verdict == PARTLY and "architecture" in v.reason


def test_c21_partly_when_a_members_d_val_is_not_below_zero():
    v = V.c21(_family21(m16=_c21(16, BELOW, ZERO)), RULES)
    assert v.verdict == PARTLY and "D_val not below 0" in v.reason
    assert dict(v.robustness)["null"] == INCONCLUSIVE  # D_val alone decides the members: it contains 0


def test_c21_fails_when_a_members_d_sub_lies_above_zero():
    v = V.c21(_family21(m64=_c21(64, ABOVE, BELOW)), RULES)
    assert v.verdict == FAILS and v.estimate == pytest.approx(0.1)


def test_c21_inconclusive_when_a_members_d_sub_contains_zero():
    assert V.c21(_family21(m64=_c21(64, ZERO, BELOW)), RULES).verdict == INCONCLUSIVE


def test_c21_inconclusive_when_a_twin_has_no_interval():
    nan = Interval(0.0, math.nan, math.nan, 1, "inputs")
    assert V.c21(_family21(t16=_c21(16, nan, nan, twin=True)), RULES).verdict == INCONCLUSIVE


def test_c21_not_testable_without_a_judged_member():
    ev = _family21(**{f"m{d}": _c21(d, BELOW, BELOW, gain=POOR) for d in (16, 32, 64)})
    v = V.c21(ev, RULES)
    assert v.verdict == NOT_TESTABLE and "undertrained" in v.reason


def test_c21_does_not_judge_an_undertrained_member():
    v = V.c21(_family21(m64=_c21(64, ABOVE, ABOVE, gain=POOR)), RULES)
    assert v.verdict == HOLDS and "mlm-w128-dv64-seed0" in v.reason


def test_c21_null_alternative_lets_d_val_alone_decide_the_members():
    """D_sub above 0 but D_val below: the rule fails, the 'null' alternative holds."""
    v = V.c21(_family21(m32=_c21(32, ABOVE, BELOW)), RULES)
    assert v.verdict == FAILS and dict(v.robustness)["null"] == HOLDS


def test_c21_unit_alternative_reads_the_intervals_over_heads():
    v = V.c21(_family21(m32=_c21(32, BELOW, BELOW, heads=(ZERO, BELOW))), RULES)
    assert v.verdict == HOLDS and dict(v.robustness)["unit"] == INCONCLUSIVE
