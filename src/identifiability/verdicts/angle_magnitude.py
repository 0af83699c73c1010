"""The claim about angle and magnitude (chapter 5): C8.

The judge takes its thresholds as keyword arguments defaulting to the constants below, so a robustness
alternative of ``data/claims.csv`` is the same judge with a moved threshold; ``judge_c8_original`` keeps the
pre-registered rule of the amended claim; the entry point :func:`c8` assembles them from the evidence."""

from __future__ import annotations

from dataclasses import replace

from ..base.digits import pct
from ..base.stats import Interval
from ..evidence.angle_magnitude import C8Evidence
from .core import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTABLE,
    PARTLY,
    Quantity,
    Rules,
    Verdict,
    amended,
    combine_parts,
    interval_verdict,
    part_verdict,
    with_robustness,
)

# --------------------------------------------------------------------------------------------------
# C8: angle versus magnitude (chapter 5)
# --------------------------------------------------------------------------------------------------

C8_ANGLE_SLACK = 0.02  # unit-normalised probes may lose this much against raw probes; the norm may add this
C8_NORM_CHANCE = 0.05  # norm-only probes must stay within this of chance
C8_BASELINE_NOTE = "none for a difference of two probes; the norm-only probe is held to chance inside the rule"
C8_MIN_SPREAD = 0.05  # relative norm spread (IQR / median) below which the magnitude part is not testable
C8_ANGLE_SLACK_ALT = 0.05  # robustness: unit-normalised probes may lose 5 points
C8_MIN_SPREAD_ALT = 0.02  # robustness: the magnitude part judged from a 2% spread
ANGLE_ONLY = "angle part only"
C8_ANGLE_Q = Quantity(
    "identifiability rate of direction-only (unit-vector) probes minus raw probes', last layer",
    r"r_{e/\lVert e\rVert} - r_{e}",
)
C8_NORM_Q = Quantity(
    "rate of unit-vector probes given the norm as one more input minus without it",
    r"r_{e/\lVert e\rVert,\,\lVert e\rVert} - r_{e/\lVert e\rVert}",
)


def _c8_parts(
    unit_minus_raw: Interval,
    norm_only_minus_chance: Interval,
    norm_spread: float,
    norm_adds: Interval | None,
    rule: str,
    angle_slack: float,
    norm_chance: float,
    min_spread: float,
    magnitude_slack: float,
) -> list[Verdict]:
    """C8's angle part and its magnitude part (version 3). Angle: holds if the direction-only minus raw interval
    lies above ``-angle_slack`` and the norm-only minus chance interval below ``norm_chance``; fails if either
    lies on its other side; inconclusive otherwise. Magnitude: not testable where the relative norm spread is
    below ``min_spread``; else holds, fails or is inconclusive as the norm-added minus direction-only interval
    lies below, above or across ``magnitude_slack``."""
    va, whya = interval_verdict(unit_minus_raw, -angle_slack, "above")
    vn, whyn = interval_verdict(norm_only_minus_chance, norm_chance, "below")
    angle = HOLDS if (va, vn) == (HOLDS, HOLDS) else FAILS if FAILS in (va, vn) else INCONCLUSIVE
    parts = [
        part_verdict(
            "C8",
            "angle",
            unit_minus_raw,
            angle,
            f"direction only minus raw {unit_minus_raw}: {whya}; norm only minus chance {norm_only_minus_chance}: "
            f"{whyn}",
            rule,
            -angle_slack,
            C8_ANGLE_Q,
        )
    ]
    if norm_spread < min_spread:
        why = f"relative norm spread {pct(norm_spread)} < {min_spread:.0%}: LayerNorm fixes the norm"
        parts.append(part_verdict("C8", "magnitude", None, NOT_TESTABLE, why, rule))
    elif norm_adds is None:  # the rule states no verdict for a testable part that was not measured
        raise ValueError(f"relative norm spread {pct(norm_spread)}: the magnitude part is testable but not measured")
    else:
        # the claim is that the norm adds little: holds when the norm's contribution stays below the slack
        vm, whym = interval_verdict(norm_adds, magnitude_slack, "below")
        parts.append(part_verdict("C8", "magnitude", norm_adds, vm, whym, rule, magnitude_slack, C8_NORM_Q))
    return parts


def judge_c8(
    unit_minus_raw: Interval,
    norm_only_minus_chance: Interval,
    norm_spread: float,
    norm_adds: Interval | None,
    rule: str,
    *,
    angle_slack: float = C8_ANGLE_SLACK,
    norm_chance: float = C8_NORM_CHANCE,
    min_spread: float = C8_MIN_SPREAD,
    magnitude_slack: float = C8_ANGLE_SLACK,
) -> Verdict:
    """C8 (version 3): identity lives in the angle, not the magnitude. Holds if both parts hold; fails if the
    angle part fails; with the magnitude part not testable, partly holds (qualified "angle part only") if the
    angle part holds and is otherwise the angle part's verdict; with both parts tested and the angle part not
    failing, inconclusive if a part is inconclusive, partly holds if the angle part holds and the magnitude part
    fails (:func:`~identifiability.verdicts.core.combine_parts`, the angle part its core)."""
    parts = _c8_parts(
        unit_minus_raw,
        norm_only_minus_chance,
        norm_spread,
        norm_adds,
        rule,
        angle_slack,
        norm_chance,
        min_spread,
        magnitude_slack,
    )
    if parts[1].verdict == NOT_TESTABLE:
        v = combine_parts("C8", parts[:1], rule, unit_minus_raw, None, C8_BASELINE_NOTE)
        reason = f"{v.reason}; magnitude: not testable ({parts[1].reason})"
        if v.verdict == HOLDS:
            return Verdict(
                "C8",
                PARTLY,
                v.estimate,
                v.ci95,
                None,
                C8_BASELINE_NOTE,
                rule,
                reason,
                tuple(parts),
                qualifier=ANGLE_ONLY,
                estimate_of=C8_ANGLE_Q,
            )
        parts_ = tuple(parts)
        return Verdict(
            "C8", v.verdict, v.estimate, v.ci95, None, C8_BASELINE_NOTE, rule, reason, parts_, estimate_of=C8_ANGLE_Q
        )
    return replace(combine_parts("C8", parts, rule, unit_minus_raw, None, C8_BASELINE_NOTE), estimate_of=C8_ANGLE_Q)


def judge_c8_original(
    unit_minus_raw: Interval,
    norm_only_minus_chance: Interval,
    norm_spread: float,
    norm_adds: Interval | None,
    rule: str,
) -> Verdict:
    """C8's pre-registered rule: as :func:`judge_c8`, but an untestable magnitude part with the angle part
    holding gives a bare "holds"."""
    v = judge_c8(unit_minus_raw, norm_only_minus_chance, norm_spread, norm_adds, rule)
    if v.qualifier == ANGLE_ONLY:
        return replace(v, verdict=HOLDS, qualifier="")
    return v


def c8(evidence: C8Evidence, rules: Rules) -> Verdict:
    """C8 under the rule in force, with its robustness alternatives (``slack``, ``spread``, ``unit``) and the
    original rule's verdict."""
    e, rule = evidence, rules.rule
    args = (e.unit_minus_raw, e.norm_vs_chance, e.norm_spread, e.norm_adds, rule)
    alternatives = {
        "slack": judge_c8(*args, angle_slack=C8_ANGLE_SLACK_ALT),
        "spread": judge_c8(*args, min_spread=C8_MIN_SPREAD_ALT),
        "unit": judge_c8(e.unit_minus_raw_seed0, e.norm_vs_chance_seed0, e.norm_spread, e.norm_adds_seed0, rule),
    }
    original = judge_c8_original(e.unit_minus_raw, e.norm_vs_chance, e.norm_spread, e.norm_adds, rules.pre_registered)
    return amended(with_robustness(judge_c8(*args), alternatives), original)
