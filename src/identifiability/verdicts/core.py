"""The mechanics of a verdict: the rules a claim is judged under, the six outcomes, part-by-part combination
and the sentence a page shows. Intervals are :class:`identifiability.base.stats.Interval`, built by the studies."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, replace

from ..base.digits import fmt
from ..base.stats import Interval, units_to_settle, unpaired_difference
from .text import Quantity, math_text, quantity_of

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
class Rules:
    """The rules a claim is judged under, from ``data/claims.csv`` and ``data/amendments.csv``
    (:func:`identifiability.verdicts.claims.rules`): the rule in force and, for an amended claim, its
    pre-registered original, whose verdict the claims page shows beside the current one."""

    rule: str  # the rule in force: the latest amendment's, else the pre-registered one
    original: str | None = None  # an amended claim's pre-registered rule; None for a claim never amended

    @property
    def pre_registered(self) -> str:
        """The original rule of an amended claim (its verdict function judges under it too)."""
        if self.original is None:
            raise ValueError("this claim was amended: its rules need the original rule (verdicts.claims.rules)")
        return self.original


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
    estimate_of: Quantity | None = None  # what the estimate measures, in words, symbol and unit
    baseline_of: Quantity | None = None  # what the baseline measures where it is not the estimate's quantity

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
    claim: str,
    name: str,
    x: Interval | None,
    verdict: str,
    reason: str,
    rule: str,
    threshold: float | None = None,
    estimate_of: Quantity | None = None,
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
        estimate_of=estimate_of,
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


def _estimate(v: Verdict) -> str:
    """'rank correlation ..., $\\rho_S(...)$ = -0.899 (95% interval -0.95 to -0.80)'."""
    q = v.estimate_of or Quantity("estimate")
    text = f"{q.named()} = {q.value(v.estimate)}"
    if v.ci95 is not None and not all(b is not None and math.isfinite(b) for b in v.ci95):
        return text + " (no interval)"
    if v.ci95 is not None and v.ci95[0] != v.ci95[1]:
        text += f" (95% interval {fmt(v.ci95[0], q.integer)} to {fmt(v.ci95[1], q.integer)})"
    return text


def _baseline(v: Verdict) -> str:
    """The baseline with what it measures: the estimate's quantity under the null, or, said so, another one."""
    note = _words(v.baseline_note)
    if v.baseline is None:
        return f" *Baseline:* {note}." if note else ""
    own = v.estimate_of or Quantity("")
    if v.baseline_of is None:
        return f" *Baseline* (the same quantity): {own.value(v.baseline)}, {note}."
    b = v.baseline_of
    return f" *Baseline* (another quantity, for scale only): {b.named()} = {b.value(v.baseline)}, {note}."


# the verb each outcome takes after "The claim that ...": the outcome itself is set in bold, as the charts name it
_VERB = {HOLDS: "", PARTLY: "", FAILS: "", INCONCLUSIVE: "is ", NOT_TESTABLE: "is ", NOT_RUN: "was "}


def statement(claim_text: str) -> str:
    """A claim's text (``data/claims.csv``, column ``claim``) as the object of "the claim that": its first letter
    lower-cased unless its first word is an acronym ('HTA', 'GlobEnc'), starts with a bracket or a sign ('[CLS]')
    or opens a name of capitalised words ('Value Zeroing'; an acronym second is no name: 'exact HTA'); no closing
    full stop; its notation as MyST math."""
    text = claim_text.strip().rstrip(".")
    words = text.split(maxsplit=2)
    first = words[0] if words else ""
    keep = (
        not first[:1].isalpha()
        or any(c.isupper() for c in first[1:])
        or (len(words) > 1 and words[1][:1].isupper() and words[1][:1].isalpha() and not words[1].isupper())
    )
    return math_text(text if keep else text[:1].lower() + text[1:])


def claim_outcome(v: Verdict | dict, claim_text: str = "") -> str:
    """The claim, then its outcome, so that neither can be read as the other: 'The claim that raw attention
    weights are a poor guide to ... **fails**' ('The claim **fails**' without its text). ``v``: a verdict or
    one read back from a results file."""
    verdict, label = (v.verdict, v.label) if isinstance(v, Verdict) else (v["verdict"], verdict_label(v))
    subject = f"The claim that {statement(claim_text)}" if claim_text.strip() else "The claim"
    return f"{subject} {_VERB.get(verdict, '')}**{label}**"


def _words(text: str) -> str:
    """A reason or note as a page shows it: family members' folder names in words
    (:func:`identifiability.pretrain.family.display_names`), then its notation as MyST math."""
    from ..pretrain.family import display_names

    return math_text(display_names(text))


# a clause of a reason that opens with what it is about: a model's folder name, or two joined by " - "
_SUBJECT = re.compile(r"^[\w.@+-]+(?: - [\w.@+-]+)?: ")
_LISTED = 3  # a reason naming at least this many subjects is shown as a list, one subject per item


def itemised(reason: str) -> str:
    """A reason that goes through its subjects one by one ('...; mlm-w128-dv32-seed0: d_v = 32: ...; entropy ...;
    mlm-w128-dv16-seed0: ...', as C19-C21 go through the family's members) as its opening clauses, then a
    Markdown list with one item per subject (the clauses after a subject's name stay in its item); any other
    reason as it is. Family members' folder names become their names in words
    (:func:`identifiability.pretrain.family.display_names`)."""
    from ..pretrain.family import display_names

    lead: list[str] = []
    items: list[list[str]] = []
    for clause in reason.split("; "):
        if _SUBJECT.match(clause):
            items.append([clause])
        elif items:
            items[-1].append(clause)
        else:
            lead.append(clause)
    if len(items) < _LISTED:
        return display_names(reason)
    listed = "\n".join("- " + display_names("; ".join(i)) for i in items)
    return display_names("; ".join(lead)) + ":\n\n" + listed + "\n"


def render(v: Verdict, claim_text: str = "", lists: bool = True) -> str:
    """The sentence a page shows for a verdict (Markdown, its notation as MyST math): the claim's id (which the
    page's anchor and the browser check key on), the claim in words, then its outcome, what the estimate
    measures with its value and interval, the baseline and what it measures, and why (with ``lists``, a reason
    that goes through several models is a list, :func:`itemised`; without, one paragraph)."""
    head = f"**{v.claim}.** {claim_outcome(v, claim_text)}."
    unnamed = [p for p in v.parts if p.claim.split(".", 1)[-1].lower() not in v.reason.lower()]
    reason = v.reason
    if unnamed:  # every part the chart draws is named in the sentence too
        reason += "; " + "; ".join(f"{p.claim.split('.', 1)[-1]}: {p.label}" for p in unnamed)
    why = math_text(itemised(reason)) if lists else _words(reason)
    end = "" if why.endswith("\n") else "."  # a list ends the sentence: no full stop alone on a line after it
    if v.verdict == NOT_RUN:
        return f"{head} Nothing was measured: {why}{end}"
    if v.estimate is None:
        return f"{head} No estimate.{_baseline(v)} *Why:* {why}{end}"
    return f"{head} *Estimate:* {_estimate(v)}.{_baseline(v)} *Why:* {why}{end}"


def twin_difference(trained: Verdict, twin: Verdict) -> Interval | None:
    """Trained minus twin on the claim's estimate, the two 95% half-widths combined in quadrature (two runs on
    different models and samples); None where either has no interval or they estimate different quantities."""
    if trained.estimate is None or twin.estimate is None or trained.ci95 is None or twin.ci95 is None:
        return None
    if (trained.estimate_of and trained.estimate_of.words) != (twin.estimate_of and twin.estimate_of.words):
        return None
    a, b = (Interval(v.estimate, v.ci95[0], v.ci95[1], 2, "") for v in (trained, twin))
    if not all(math.isfinite(x) for x in (a.low, a.high, b.low, b.high)):
        return None
    return unpaired_difference(a, b)


def render_twin(trained: Verdict, twin: Verdict, what: str) -> str:
    """The sentence a page shows beside a verdict for the same claim on the model's untrained twin (``what``:
    the twin's run, e.g. '20 sentences, estimated HTA'): the twin's verdict and estimate, and trained minus twin
    with its interval. Beside the verdict, never folded into it."""
    if twin.claim != trained.claim:
        raise ValueError(f"the twin's verdict is of {twin.claim}, not {trained.claim}")
    head = (
        f"*{trained.claim} on the untrained twin* (the same architecture with random initial weights, one "
        f"initialisation seed; {what}): the claim {_VERB[twin.verdict]}**{twin.label}**"
    )
    if twin.estimate is None:
        return f"{head}. *Why:* {_words(twin.reason)}."
    text = f"{head}; {_estimate(twin)}"
    d = twin_difference(trained, twin)
    if d is not None:
        q = trained.estimate_of or Quantity("estimate")
        text += (
            f". *Trained minus twin, the learned part:* {fmt(d.estimate, q.integer)} (95% interval "
            f"{fmt(d.low, q.integer)} to "
            f"{fmt(d.high, q.integer)}; half-widths combined in quadrature)"
        )
    return f"{text}. *Why, on the twin:* {_words(twin.reason)}."


def from_json(d: dict) -> Verdict:
    """A verdict read back from a results file (:meth:`Verdict.to_json`); fields a newer version added are
    left at their defaults."""
    known = {f: d[f] for f in Verdict.__dataclass_fields__ if f in d}
    known["parts"] = tuple(from_json(p) for p in d.get("parts") or ())
    known["original"] = None if d.get("original") is None else from_json(d["original"])
    known["robustness"] = tuple(tuple(r) for r in d.get("robustness") or ())
    known["ci95"] = None if d.get("ci95") is None else tuple(d["ci95"])
    known["estimate_of"] = quantity_of(d.get("estimate_of"))
    known["baseline_of"] = quantity_of(d.get("baseline_of"))
    return Verdict(**known)
