"""The mechanics of a verdict: intervals, the five outcomes, part-by-part combination and the sentence a
page shows."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from ..stats import units_to_settle

HOLDS, PARTLY, FAILS, INCONCLUSIVE, NOT_TESTABLE, NOT_RUN = (
    "holds",
    "partly holds",
    "fails",
    "inconclusive",
    "not testable on this model",
    "not run in this build",  # a comparison nobody ran (e.g. C13 without `make compare`): not a property of the model
)
VERDICTS = (HOLDS, PARTLY, FAILS, INCONCLUSIVE, NOT_TESTABLE, NOT_RUN)


@dataclass(frozen=True)
class Interval:
    """A measured quantity: its estimate, 95% interval and the number of independent units behind it."""

    estimate: float
    low: float
    high: float
    n: int = 0  # units (sentences, inputs) the interval resamples; 0 when exact
    unit: str = "units"  # what they are, plural ("test sentences", "heads"): the page and the reasons name it

    def __str__(self) -> str:
        """How a page prints it: three significant digits, the interval and its units."""
        if not self.has_interval:
            return f"{self.estimate:.3g} (no interval: {self.count})"
        units = f", {self.count}" if self.n else ""
        return f"{self.estimate:.3g} (95% interval {self.low:.3g} to {self.high:.3g}{units})"

    @property
    def count(self) -> str:
        """'16 test sentences', '1 test sentence'."""
        return f"{self.n} {self.unit[:-1] if self.n == 1 and self.unit.endswith('s') else self.unit}"

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
    qualifier: str = ""  # what was tested when it is less than the claim, e.g. "angle part only"
    original: Verdict | None = None  # an amended claim: the verdict its original rule gives (:func:`amended`)
    robustness: tuple[tuple[str, str], ...] = ()  # (alternative named in the claims table, its verdict)

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    @property
    def label(self) -> str:
        """The verdict as a page prints it: 'partly holds (angle part only)'."""
        return f"{self.verdict} ({self.qualifier})" if self.qualifier else self.verdict

    def to_json(self) -> dict:
        d = asdict(self)
        d["parts"] = [p.to_json() for p in self.parts]
        d["original"] = None if self.original is None else self.original.to_json()
        d["robustness"] = [list(r) for r in self.robustness]
        return d


def amended(current: Verdict, original: Verdict) -> Verdict:
    """``current`` (the amended rule's verdict) carrying the verdict of the claim's original rule, which the
    claims page shows beside it."""
    if current.claim != original.claim:
        raise ValueError(f"the original verdict is of {original.claim}, not {current.claim}")
    return replace(current, original=original)


def with_robustness(v: Verdict, alternatives: dict[str, Verdict]) -> Verdict:
    """``v`` with the verdicts of the same claim under the alternative choices its claims-table row names
    (``robustness`` column: 'name: change; ...'), keyed by those names."""
    return replace(v, robustness=tuple((name, a.label) for name, a in alternatives.items()))


def robustness_summary(v: Verdict | dict) -> str:
    """'robust' when every alternative gives the same verdict, else 'sensitive to <names>'; '' with none."""
    alts = v.robustness if isinstance(v, Verdict) else [tuple(r) for r in v.get("robustness") or ()]
    label = v.label if isinstance(v, Verdict) else verdict_label(v)
    if not alts:
        return ""
    moved = [name for name, verdict in alts if verdict != label]
    return "robust" if not moved else "sensitive to " + ", ".join(moved)


def verdict_label(d: dict) -> str:
    """:attr:`Verdict.label` of a verdict read back from a results file."""
    return f"{d['verdict']} ({d['qualifier']})" if d.get("qualifier") else d["verdict"]


def interval_verdict(x: Interval, threshold: float, holds_if: str) -> tuple[str, str]:
    """HOLDS when the interval lies on the ``holds_if`` side ('above'/'below') of ``threshold``, FAILS on the
    other side, INCONCLUSIVE when it contains it (with the number of units that would settle it) or when there
    is no interval."""
    if not x.has_interval:
        return INCONCLUSIVE, f"no interval: {x.n or 'fewer than two'} {x.unit} measured, too few to resample"
    side = x.side(threshold)
    if side == holds_if:
        return HOLDS, f"the interval lies {side} {threshold:g}"
    if side != "contains":
        return FAILS, f"the interval lies {side} {threshold:g}"
    more = units_to_settle(x.n, (x.low, x.high), x.estimate, threshold) if x.n else None
    if more:
        hint = f"; about {more} {x.unit} instead of {x.n} would settle it"
    elif x.n:
        hint = f"; the estimate sits on it, so more {x.unit} would not settle it"
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
    head = f"**{v.claim} — {v.label}.**" + (f" {claim_text}." if claim_text else "")
    return f"{head} Estimate {est}{base}. Why: {v.reason}."
