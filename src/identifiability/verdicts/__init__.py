"""Verdicts: one entry point per claim of ``data/claims.csv``, from its evidence to a verdict.

Claim CN of a chapter is judged by ``verdicts.<chapter name>.cN(evidence, rules) -> Verdict``: ``evidence`` is
the one typed value the chapter's study builds (``identifiability.evidence.<chapter name>``), ``rules`` the
claim's :class:`Rules` from the claims table (the rule in force and, for an amended claim, the pre-registered
one). A chapter calls it one way, ``ch.judge("CN", evidence)`` (:meth:`identifiability.book.notebook.Chapter.judge`),
which finds the function through the chapter contract, passes the rules, checks and records the verdict.

Each entry point applies its claim's pre-registered rule (the ``rule`` column, fixed before any number was
looked at; the thresholds are the named constants of the chapter's module) to an estimate, its 95% interval
and a null baseline, and returns a :class:`Verdict` carrying its verdicts under the alternatives the
claim's row names (:func:`with_robustness`) and, for an amended claim (``data/amendments.csv``), the
original rule's verdict (:func:`amended`). The per-threshold ``judge_cN`` functions beside it are its parts,
which the controls (``tests/unit/test_verdict_controls_<chapter>.py``) also call. Nothing here is written by
hand per run: the chapters record measurements, these functions decide, and :func:`render` turns the
decision into the sentence the page shows. Six outcomes:

- *holds* and *fails*: the interval lies on one side of the rule's threshold;
- *partly holds*: one part of a compound claim holds and another does not (the reason says which);
- *inconclusive*: an interval contains its threshold (the reason says how many units would settle it);
- *not testable on this model*: the model cannot show the effect (the reason says why, from a measurement);
- *not run in this build*: the comparison the claim needs was not run (the reason gives the command that runs it).
"""

from ..base.digits import fmt
from .core import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_RUN,
    NOT_TESTABLE,
    PARTLY,
    VERDICTS,
    Quantity,
    Rules,
    Verdict,
    amended,
    from_json,
    render,
    render_twin,
    robustness_summary,
    twin_difference,
    with_robustness,
)
from .text import anchor, math_text

__all__ = [
    "FAILS",
    "HOLDS",
    "INCONCLUSIVE",
    "NOT_RUN",
    "NOT_TESTABLE",
    "PARTLY",
    "VERDICTS",
    "Quantity",
    "Rules",
    "Verdict",
    "amended",
    "anchor",
    "fmt",
    "from_json",
    "math_text",
    "render",
    "render_twin",
    "twin_difference",
    "robustness_summary",
    "with_robustness",
]
