"""Verdicts: one pure function per claim of ``data/claims.csv``, from typed measurements to a verdict.

Each function applies its claim's pre-registered rule (the ``rule`` column, fixed before any number was
looked at; the thresholds are the named constants beside each function) to an estimate, its 95% interval
and a null baseline, and returns a :class:`Verdict`. Nothing here is written by hand per run: the
chapters record measurements, these functions decide, and :func:`render` turns the decision into the
sentence the page shows. Six outcomes:

- *holds* and *fails*: the interval lies on one side of the rule's threshold;
- *partly holds*: one part of a compound claim holds and another does not (the reason says which);
- *inconclusive*: an interval contains its threshold (the reason says how many units would settle it);
- *not testable on this model*: the model cannot show the effect (the reason says why, from a measurement);
- *not run in this build*: the comparison the claim needs was not run (the reason gives the command that runs it).

An amended claim (``data/amendments.csv``) carries its original rule's verdict (:func:`amended`); every
verdict carries its verdicts under the alternatives its claims-table row names (:func:`with_robustness`).
"""

from .attention import (
    C1_RANK_TOL_ALT,
    C2_FAIL_SHARE,
    C2_MARGIN,
    C2_MARGIN_ALT,
    C2_UNIQUE_SHARE,
    C2_UNIQUE_SHARE_ALT,
    C3_FAILING_SHARE,
    C3_FAILING_SHARE_ALT,
    C3_REALISABLE_TV,
    judge_c1,
    judge_c2,
    judge_c2_original,
    judge_c3,
)
from .core import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_RUN,
    NOT_TESTABLE,
    PARTLY,
    VERDICTS,
    Interval,
    Verdict,
    amended,
    render,
    robustness_summary,
    with_robustness,
)
from .effective import C4_PEARSON, C5_RATIO, judge_c4, judge_c5
from .identity import C6_HOLDS, C6_PARTLY, C8_ANGLE_SLACK, C8_MIN_SPREAD, C8_NORM_CHANCE, judge_c6, judge_c7, judge_c8
from .mixing import (
    C9_SHIFT,
    C10_HIGH,
    C10_LOW,
    C10_WIDE,
    C11_FAR,
    C11_FAR_ALT,
    C11_NEAR,
    C11_NEAR_ALT,
    CONTENT_TAGS,
    FUNCTION_TAGS,
    C9Evidence,
    C10Evidence,
    C11Evidence,
    C12Evidence,
    c9_verdict,
    c10_verdict,
    c11_verdict,
    c12_verdict,
    judge_c9,
    judge_c10,
    judge_c10_original,
    judge_c11,
    judge_c11_original,
    judge_c12,
)
from .models import C13_BAND, judge_c13, judge_c14

__all__ = [
    "C1_RANK_TOL_ALT",
    "C2_MARGIN",
    "C2_MARGIN_ALT",
    "C2_UNIQUE_SHARE_ALT",
    "C3_FAILING_SHARE_ALT",
    "C3_REALISABLE_TV",
    "judge_c2_original",
    "C13_BAND",
    "judge_c13",
    "judge_c14",
    "C10_HIGH",
    "C10_LOW",
    "C2_FAIL_SHARE",
    "C2_UNIQUE_SHARE",
    "C3_FAILING_SHARE",
    "C4_PEARSON",
    "C5_RATIO",
    "C6_HOLDS",
    "C6_PARTLY",
    "C8_ANGLE_SLACK",
    "C8_MIN_SPREAD",
    "C8_NORM_CHANCE",
    "CONTENT_TAGS",
    "FAILS",
    "FUNCTION_TAGS",
    "HOLDS",
    "INCONCLUSIVE",
    "Interval",
    "NOT_RUN",
    "NOT_TESTABLE",
    "amended",
    "robustness_summary",
    "with_robustness",
    "PARTLY",
    "VERDICTS",
    "Verdict",
    "judge_c1",
    "judge_c10",
    "judge_c11",
    "judge_c12",
    "judge_c2",
    "judge_c3",
    "judge_c4",
    "judge_c5",
    "judge_c6",
    "judge_c7",
    "judge_c8",
    "judge_c9",
    "C9_SHIFT",
    "C10_WIDE",
    "C11_FAR",
    "C11_FAR_ALT",
    "C11_NEAR",
    "C11_NEAR_ALT",
    "C9Evidence",
    "C10Evidence",
    "C11Evidence",
    "C12Evidence",
    "c9_verdict",
    "c10_verdict",
    "c11_verdict",
    "c12_verdict",
    "judge_c10_original",
    "judge_c11_original",
    "render",
]
