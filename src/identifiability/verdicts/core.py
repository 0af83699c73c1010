"""The mechanics of a verdict: intervals, the five outcomes, part-by-part combination and the sentence a
page shows."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from ..stats import units_to_settle

HOLDS, PARTLY, FAILS, INCONCLUSIVE, NOT_TESTABLE = (
    "holds",
    "partly holds",
    "fails",
    "inconclusive",
    "not testable on this model",
)
VERDICTS = (HOLDS, PARTLY, FAILS, INCONCLUSIVE, NOT_TESTABLE)


@dataclass(frozen=True)
class Interval:
    """A measured quantity: its estimate, 95% interval and the number of independent units behind it."""

    estimate: float
    low: float
    high: float
    n: int = 0  # units (sentences, inputs) the interval resamples; 0 when exact

    def __str__(self) -> str:
        """How a page prints it: three significant digits, the interval and its units."""
        if not self.has_interval:
            return f"{self.estimate:.3g} (no interval: {self.n} unit(s))"
        units = f", {self.n} units" if self.n else ""
        return f"{self.estimate:.3g} (95% interval {self.low:.3g} to {self.high:.3g}{units})"

    @classmethod
    def exact(cls, value: float) -> Interval:
        return cls(value, value, value, 0)

    @property
    def has_interval(self) -> bool:
        """False where the bounds are missing (NaN): too few units were measured to resample."""
        return math.isfinite(self.low) and math.isfinite(self.high)

    def side(self, threshold: float) -> str:
        """'above', 'below' or 'contains' for ``threshold``."""
        if self.low > threshold:
            return "above"
        if self.high < threshold:
            return "below"
        return "contains"


@dataclass(frozen=True)
class Verdict:
    """A claim's verdict with everything that decided it."""

    claim: str
    verdict: str
    estimate: float | None
    ci95: tuple[float, float] | None
    baseline: float | None
    baseline_note: str
    rule: str
    reason: str
    parts: tuple[Verdict, ...] = field(default_factory=tuple)
    threshold: float | None = None  # the rule's threshold the interval was compared with, where there is one

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    def to_json(self) -> dict:
        d = asdict(self)
        d["parts"] = [p.to_json() for p in self.parts]
        return d


def interval_verdict(x: Interval, threshold: float, holds_if: str) -> tuple[str, str]:
    """HOLDS when the interval lies on the ``holds_if`` side ('above'/'below') of ``threshold``, FAILS on the
    other side, INCONCLUSIVE when it contains it (with the number of units that would settle it) or when there
    is no interval."""
    if not x.has_interval:
        return INCONCLUSIVE, f"no interval: {x.n or 'fewer than two'} unit(s) measured, too few to resample"
    side = x.side(threshold)
    if side == holds_if:
        return HOLDS, f"the interval lies {side} {threshold:g}"
    if side != "contains":
        return FAILS, f"the interval lies {side} {threshold:g}"
    more = units_to_settle(x.n, (x.low, x.high), x.estimate, threshold) if x.n else None
    if more:
        hint = f"; about {more} units instead of {x.n} would settle it"
    elif x.n:
        hint = "; the estimate sits on it, so more units would not settle it"
    else:
        hint = ""
    return INCONCLUSIVE, f"the interval contains {threshold:g}{hint}"


def part_verdict(
    claim: str, name: str, x: Interval | None, verdict: str, reason: str, rule: str, threshold: float | None = None
) -> Verdict:
    """One part of a compound claim's verdict (``<claim>.<name>``), for :func:`combine_parts`."""
    return Verdict(
        f"{claim}.{name}",
        verdict,
        None if x is None else x.estimate,
        None if x is None else (x.low, x.high),
        None,
        "",
        rule,
        reason,
        threshold=threshold,
    )


def combine_parts(
    claim: str,
    parts: list[Verdict],
    rule: str,
    estimate: Interval | None,
    baseline: float | None,
    baseline_note: str,
    first_is_core: bool = True,
) -> Verdict:
    """Compound claims, part by part: all parts hold -> HOLDS; the core (first) part fails, or with no core
    every part fails -> FAILS; else any part inconclusive -> INCONCLUSIVE; else PARTLY. The reason names
    each part's verdict."""
    verdicts = [p.verdict for p in parts]
    if all(v == HOLDS for v in verdicts):
        v = HOLDS
    elif (verdicts[0] == FAILS) if first_is_core else all(x == FAILS for x in verdicts):
        v = FAILS
    elif INCONCLUSIVE in verdicts:
        v = INCONCLUSIVE
    else:
        v = PARTLY
    reason = "; ".join(f"{p.claim.split('.', 1)[1]}: {p.verdict} ({p.reason})" for p in parts)
    return Verdict(
        claim,
        v,
        None if estimate is None else estimate.estimate,
        None if estimate is None else (estimate.low, estimate.high),
        baseline,
        baseline_note,
        rule,
        reason,
        tuple(parts),
    )


# --------------------------------------------------------------------------------------------------
# prose
# --------------------------------------------------------------------------------------------------


def _num(x: float | None) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{x:.3g}"


def render(v: Verdict, claim_text: str = "") -> str:
    """The sentence a page shows for a verdict (Markdown): claim, verdict, estimate with interval, baseline, reason."""
    est = _num(v.estimate)
    if v.ci95 is not None and v.estimate is not None and not all(math.isfinite(b) for b in v.ci95):
        est += " (no interval)"
    elif v.ci95 is not None and v.ci95[0] != v.ci95[1]:
        est += f" (95% interval {_num(v.ci95[0])} to {_num(v.ci95[1])})"
    base = (
        f"; baseline {_num(v.baseline)} ({v.baseline_note})"
        if v.baseline is not None
        else (f"; baseline: {v.baseline_note}" if v.baseline_note else "")
    )
    head = f"**{v.claim} — {v.verdict}.**" + (f" {claim_text}." if claim_text else "")
    return f"{head} Estimate {est}{base}. Why: {v.reason}."
