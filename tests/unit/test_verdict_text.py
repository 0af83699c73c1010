"""How verdicts read: every estimate and baseline named with its quantity, three significant digits, no
Python list in a reason, the states 'inconclusive' and 'not run in this build' saying what would settle or
fill them, ASCII notation typeset as math, and verdict charts whose rows are the verdict's parts and its
headline."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from identifiability import verdicts as vd
from identifiability.base.stats import Interval
from identifiability.charts.verdicts import TWIN_COLOUR, rows, verdict_chart
from identifiability.evidence.across_models import Paired
from identifiability.evidence.effective_attention import C5Category
from identifiability.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_RUN, NOT_TESTABLE
from identifiability.verdicts.across_models import judge_c13, judge_c14
from identifiability.verdicts.angle_magnitude import judge_c8
from identifiability.verdicts.claims import load_claims
from identifiability.verdicts.context_mixing import judge_c9, judge_c10, judge_c11, judge_c11_original, judge_c12
from identifiability.verdicts.effective_attention import judge_c4, judge_c5, judge_c18
from identifiability.verdicts.nonidentifiability import judge_c15, judge_c16, judge_c17
from identifiability.verdicts.text import math_text
from identifiability.verdicts.token_identity import judge_c6, judge_c7

R = "the rule"


def iv(est: float, low: float, high: float, n: int = 40, unit: str = "sentences") -> Interval:
    return Interval(est, low, high, n, unit)


def _paired(layers: list[tuple[float, float, float]], peak_late: float) -> Paired:
    ls = tuple(iv(*x, n=30, unit="test sentences") for x in layers)
    gap = abs(ls[-1].estimate) - abs(ls[0].estimate)
    ref = tuple(iv(0.8, 0.75, 0.85, 30, "test sentences") for _ in ls)  # off the ceiling at every layer
    g = iv(gap, gap - 0.01, gap + 0.01, 30, "test sentences")
    return Paired(ls, g, peak_late, 1e-5, 0.01, 3, 3, 30, reference=ref, off_ceiling=tuple(range(1, len(ls) + 1)))


def _survey_table(at_bound: bool) -> pd.DataFrame:
    """Rows of ``nullspace.null_space_table`` (d_v = 4) at the count, or with [T, 1] one rank short."""
    dim_t1 = [0, 0, 1, 4] if at_bound else [0, 1, 2, 5]
    return pd.DataFrame(
        {"dim_LN_T": [0, 1, 2, 5], "bound_T": [0, 1, 2, 5], "dim_LN_T1": dim_t1, "bound_T1": [0, 0, 1, 4]}
        | {"kept_min_T": [0.1] * 4, "kept_min_T1": [0.1] * 4}
    )


def _margins(sigma_min: float) -> pd.DataFrame:
    """Rows of ``nullspace.threshold_margins`` at d_s = 5, full rank, their smallest singular value given."""
    return pd.DataFrame({"text": [0, 0, 1, 1], "d_s": 5, "rank_T1": 5, "sigma_min_T1": sigma_min})


def _cases() -> dict[str, tuple[vd.Verdict, vd.Verdict]]:
    """Per claim, a verdict on each side of its rule (built by the judges, from intervals on either side)."""
    cats = lambda r: [C5Category("end separator", "[SEP]", True, 6.0, r, iv(-0.2, -0.3, -0.1), 0.6, r, r)]  # noqa: E731
    sink = lambda r: [C5Category("start", "[CLS]", False, 12.0, r, iv(-0.2, -0.3, -0.1), 0.6, r, r)]  # noqa: E731
    far_open = [iv(0.1, 0.05, 0.15), iv(0.01, -0.005, 0.02), iv(0.01, -0.01, 0.03), iv(0.2, 0.1, 0.3)]
    return {
        "C4": (
            judge_c4(True, 1.0, True, iv(-0.899, -0.95, -0.8), iv(-0.1, -0.15, -0.05), -0.1, R),
            judge_c4(True, 1.0, True, iv(0.3, 0.2, 0.4), iv(0.1, 0.05, 0.15), -0.1, R),
        ),
        "C5": (judge_c5(cats(iv(0.2, 0.1, 0.3)), R), judge_c5(cats(iv(0.8, 0.7, 0.9)), R)),
        "C18": (judge_c18(sink(iv(0.2, 0.1, 0.3)), R), judge_c18(sink(iv(0.8, 0.7, 0.9)), R)),
        "C6": (
            judge_c6(iv(0.95, 0.9, 0.97), iv(0.5, 0.4, 0.6), 0.33, R, chance=0.05),
            judge_c6(iv(0.4, 0.3, 0.5), iv(0.05, 0.01, 0.1), 0.33, R, chance=0.05),
        ),
        "C7": (judge_c7(iv(-0.287, -0.3, -0.27), 0.05, R), judge_c7(iv(0.1, 0.05, 0.15), 0.05, R)),
        "C8": (
            judge_c8(iv(0.0, -0.01, 0.01), iv(0.0, -0.01, 0.01), 0.01, None, R),
            judge_c8(iv(-0.3, -0.4, -0.2), iv(0.0, -0.01, 0.01), 0.01, None, R),
        ),
        "C9": (
            judge_c9([iv(-0.1, -0.15, -0.05)] * 3, iv(-0.287, -0.3, -0.27), 0.05, R),
            judge_c9([iv(0.1, 0.05, 0.15)] * 3, iv(0.2, 0.1, 0.3), 0.05, R),
        ),
        "C10": (judge_c10(iv(0.7, 0.65, 0.75), 0.05, R), judge_c10(iv(0.3, 0.25, 0.35), 0.05, R)),
        "C11": (
            judge_c11([iv(0.1, 0.05, 0.15)] * 4, iv(0.0395, 0.02, 0.06), R),
            judge_c11(far_open, iv(0.0395, 0.02, 0.06), R),
        ),
        "C12": (
            judge_c12(iv(-0.2, -0.3, -0.1), iv(0.1, 0.05, 0.15), 0.05, R),
            judge_c12(iv(0.2, 0.1, 0.3), iv(-0.1, -0.15, -0.05), 0.05, R),
        ),
        "C13": (
            judge_c13({"lee-pairs": _paired([(0.0, -0.01, 0.01)] * 6, 0.5)}, None, R),
            judge_c13({}, None, R),
        ),
        "C15": (judge_c15(_survey_table(True), 4, R), judge_c15(_survey_table(False), 4, R)),
        "C16": (
            judge_c16({6: 0.2, 8: 0.3}, {5: 1e-15}, ((5, 0, 0), (6, 4, 4)), R, steps=30),
            judge_c16({6: 0.0, 8: 1e-4}, {5: 1e-15}, ((5, 0, 0),), R, steps=30),
        ),
        "C17": (
            judge_c17(_margins(1e-3), True, 1.0, R),
            judge_c17(_margins(1e-12), None, 0.5, R),
        ),
        "C14": (
            judge_c14({"lee-pairs": _paired([(0, -0.01, 0.01)] * 4 + [(-0.1, -0.12, -0.08)] * 2, 0.99)}, None, R),
            judge_c14({"lee-pairs": _paired([(-0.1, -0.12, -0.08), (0, -0.01, 0.01)] * 3, 0.1)}, None, R),
        ),
    }


CASES = _cases()


def _all(v: vd.Verdict):
    yield v
    for p in v.parts:
        yield from _all(p)


@pytest.mark.parametrize("claim", list(CASES))
def test_a_claim_judged_on_either_side_reads_differently_and_names_what_it_measured(claim):
    one, other = CASES[claim]
    assert one.verdict != other.verdict
    a, b = vd.render(one), vd.render(other)
    assert a != b and f"**{one.label}**." in a and f"**{other.label}**." in b
    for v, text in ((one, a), (other, b)):
        if v.verdict == NOT_RUN:
            continue
        assert v.estimate_of is not None, f"{claim}: the estimate does not say what it measures"
        assert v.estimate_of.words in text.replace("$", "") or math_text(v.estimate_of.words) in text
        assert f"${v.estimate_of.symbol}$" in text and f"= {v.estimate_of.value(v.estimate)}" in text
        if v.baseline is not None:  # the baseline says whether it measures the same thing
            assert "(the same quantity)" in text or "(another quantity, for scale only)" in text


def test_baselines_of_another_quantity_say_so():
    """C7's chance rate, C9's and C12's uniform own share, C11's original far share: not the estimate's
    quantity (a change or a difference), and the sentence says so."""
    c11_original = judge_c11_original([iv(0.1, 0.05, 0.15)], iv(0.0395, 0.02, 0.06), 0.49, R)
    for v in (CASES["C7"][0], CASES["C9"][0], CASES["C12"][0], c11_original):
        assert v.baseline_of is not None and "(another quantity, for scale only)" in vd.render(v), v.claim
    for v in (CASES["C6"][0], CASES["C10"][0], CASES["C11"][0], CASES["C18"][0]):  # the same quantity, the null
        assert v.baseline_of is None and "(the same quantity)" in vd.render(v), v.claim


def _significant(number: str) -> int:
    digits = number.lstrip("-").replace(".", "").lstrip("0")
    return len(digits)


def test_every_number_a_verdict_prints_has_three_significant_digits():
    assert [vd.fmt(x) for x in (34.0, 1.0, 0.0395, -0.287, 0.27, 0.99996, 1234.5, 1.234e-5, 0.0)] == [
        "34.0",
        "1.00",
        "0.0395",
        "-0.287",
        "0.270",
        "1.00",
        "1230",
        "1.23 × 10⁻⁵",
        "0",
    ]
    assert vd.fmt(34.0, integer=True) == "34" and vd.fmt(None) == "—" and vd.fmt(float("nan")) == "—"
    for one, other in CASES.values():
        for v in (one, other):
            text = vd.render(v).split("*Why:*")[0]  # the estimate, its interval and the baseline
            for number in re.findall(r"-?\d+\.\d+", text.replace("$", " ")):
                assert _significant(number) == 3, f"{v.claim}: {number} in {text}"


def test_no_reason_holds_a_python_list():
    for one, other in CASES.values():
        for v in (one, other):
            for part in _all(v):
                assert not re.search(r"\[\d+(?:, \d+)*\]|\(s\)|\[\]", part.reason), f"{part.claim}: {part.reason}"


def test_an_inconclusive_verdict_says_how_many_units_would_settle_it():
    c11 = CASES["C11"][1]
    assert c11.verdict == INCONCLUSIVE
    local = c11.parts[0]
    assert re.search(r"layers 2 and 3: the interval contains 0, about \d+ sentences instead of 40 would", local.reason)
    assert "would settle" in vd.render(c11)


def test_not_run_is_its_own_state_with_the_command_that_fills_it():
    v = CASES["C13"][1]
    assert v.verdict == NOT_RUN and v.verdict != NOT_TESTABLE
    text = vd.render(v, "Fine-tuning leaves token identifiability close to the pre-trained model's")
    assert text.startswith("**C13.** The claim that fine-tuning leaves token identifiability close to the pre-trained")
    assert "model's was **not run in this build**. Nothing was measured: " in text and "`make compare`" in text
    assert "not testable" not in text and "Estimate" not in text
    assert rows(v.to_json())[0]["reason"].startswith("this build has no fine-tuned model")


@pytest.mark.parametrize("claim", list(CASES))
def test_the_verdict_chart_draws_every_part_and_the_headline(claim):
    """Chart and sentence agree: one row per part of the verdict, then the headline with the verdict's own
    outcome (chapter 6's C11 once drew only its holding part; chapter 3's C5 only its failing parts)."""
    for v in CASES[claim]:
        d = v.to_json()
        panels = verdict_chart([d]).vconcat
        titles = [" ".join(t) if isinstance(t, list) else t for t in (p.title.text for p in panels)]
        assert len(panels) == len(v.parts) + 1
        assert titles[-1].startswith(f"{v.claim}: the claim") and titles[-1].endswith(f" {v.label}")
        for title, part in zip(titles, v.parts):
            assert title.startswith(part.claim.replace(".", " · ", 1)) and title.endswith(f"— {part.label}")
        colours = [r["verdict"] for r in rows(d)]
        assert colours == [p.verdict for p in v.parts] + [v.verdict]
        spec = verdict_chart([d]).to_dict()
        spec.pop("$schema")
        text = str(spec)
        assert "NaN" not in text and "$" not in text and "_{" not in text  # no raw notation in chart text


def test_the_verdict_chart_draws_the_untrained_twin_under_the_headline_only():
    """The twin's estimate and interval sit on the claim's headline panel, on keys of their own (the browser
    check reads (claim, verdict) rows: the twin's verdict is not the claim's), and its axis holds both."""
    trained = vd.Verdict("C9", vd.HOLDS, -0.3, (-0.35, -0.25), 0.1, "", "r", "why")
    twin = vd.Verdict("C9", vd.FAILS, 0.4, (0.3, 0.5), 0.1, "", "r", "why")
    spec = verdict_chart([trained.to_json()], twins=[twin.to_json()]).to_dict()
    panel = spec["vconcat"][-1]
    drawn = [layer for layer in panel["layer"] if layer["mark"].get("color") == TWIN_COLOUR]
    assert len(drawn) == 2 and "purple, hollow: the untrained twin" in str(spec["title"])
    data = [row for rows_ in spec["datasets"].values() for row in rows_]
    assert {"twin_estimate": 0.4, "twin_low": 0.3, "twin_high": 0.5, "twin": "untrained twin: fails"} in data
    assert not any(row.get("verdict") == "fails" for row in data)
    domain = panel["layer"][0]["encoding"]["x"]["scale"]["domain"]
    assert domain[0] < -0.35 and domain[1] > 0.5
    plain = verdict_chart([trained.to_json()]).to_dict()
    assert TWIN_COLOUR not in str(plain) and "twin" not in str(plain["title"])


def test_math_text_typesets_the_notation_of_the_claims_table():
    assert math_text("once d_s > d_v") == "once $d_s > d_v$"
    assert (
        math_text("need not be softmax(QK^T/sqrt(d_q)) with")
        == r"need not be $\mathrm{softmax}(QK^\top/\sqrt{d_q})$ with"
    )
    assert math_text("has dim LN([T,1]) >= 1 at") == r"has $\dim \mathrm{LN}([T,1]) \geq  1$ at"
    assert math_text("that of |d_L| - |d_1| lies") == r"that of $\lvert d_L\rvert  - \lvert d_1\rvert$ lies"
    assert math_text("the upper half (l > L/2) is") == "the upper half ($l > L/2$) is"
    assert math_text("run `d_s = 3` or n_per_quarter=1") == "run `d_s = 3` or n_per_quarter=1"  # code stays code
    assert math_text("at least 95% of real (head, input) pairs") == "at least 95% of real (head, input) pairs"
    ascii_math = re.compile(r"\b[A-Za-z]+_[A-Za-z0-9]+\b|>=|<=|\bsqrt\(|\^T\b")
    for c in load_claims():
        for field in ("claim", "rule", "original_rule", "paper_value"):
            text = math_text(c[field])
            outside = re.sub(r"\$[^$]*\$", "", text)
            assert text.count("$") % 2 == 0, (c["id"], field, text)
            assert not ascii_math.search(outside), f"{c['id']} {field}: {ascii_math.findall(outside)}"


def test_verdicts_read_back_from_json_render_the_same():
    for one, other in CASES.values():
        for v in (one, other):
            assert vd.render(vd.from_json(v.to_json())) == vd.render(v)


def test_holds_and_fails_constants_are_the_states_the_chart_colours():
    from identifiability.charts.verdicts import COLOURS

    assert set(COLOURS) == set(vd.VERDICTS) and HOLDS in COLOURS and FAILS in COLOURS


@pytest.mark.parametrize("claim", list(CASES))
def test_part_names_read_as_written_on_a_page(claim):
    """A page typesets the verdict's ASCII notation (math_text): a part named with notation ('unique at d_v + 1')
    would not read as its name there, and the browser check matches each part's name in the line's text."""
    for v in (p for side in CASES[claim] for top in (side,) for p in _all(top) if p is not top):
        name = v.claim.split(".", 1)[-1]
        assert math_text(name) == name, f"{v.claim}: name the part in words"


def test_a_registry_key_is_code_and_a_signed_number_is_a_number_never_math():
    """Issue 53: 'norm_resln@rolled' was set as $norm_{resln}$@rolled, 'D_val -0.0194' as a subtraction."""
    assert math_text("norm_resln@rolled: tracks; grad_input") == "`norm_resln@rolled`: tracks; `grad_input`"
    assert math_text("D_val -0.0194 (95% interval -0.03 to -0.01)") == (
        r"$D_{\mathrm{val}}$ -0.0194 (95% interval -0.03 to -0.01)"
    )
    assert math_text("d_s - d_v > 1") == "$d_s - d_v > 1$" and math_text("A_eff") == r"$A_{\mathrm{eff}}$"


def test_a_reason_that_goes_through_the_members_is_a_list_in_their_names_in_words():
    """Issue 53 item 3: C19-C21 go through every member and twin in one reason; the page shows its opening
    clauses, then one list item per member, each named in words (no folder name, no notation)."""
    from identifiability.pretrain.family import display_names
    from identifiability.verdicts.core import itemised, render

    assert display_names("mlm-w128-dv32-seed0, mlm-w128-dv16-seed1-init and mlm-w64-dv32-seed0") == (
        "the head-width-32 member, the twin of the head-width-16 member (seed 1) and the head-width-32 member "
        "(width 64)"
    )
    assert display_names("model all-MiniLM-L6-v2") == "model all-MiniLM-L6-v2"  # only the family's names
    reason = (
        "D_sub lies above 0 on mlm-w128-dv32-seed0, mlm-w128-dv16-seed0; mlm-w128-dv32-seed0: D_sub 0.132; "
        "entropy 2.72 nats; mlm-w128-dv16-seed0: D_sub 0.150; entropy 2.56 nats; mlm-w128-dv64-seed0-init: D_sub 0.3"
    )
    text = itemised(reason)
    lead, items = text.split(":\n\n")
    assert lead == "D_sub lies above 0 on the head-width-32 member, the head-width-16 member"
    assert items.splitlines() == [
        "- the head-width-32 member: D_sub 0.132; entropy 2.72 nats",
        "- the head-width-16 member: D_sub 0.150; entropy 2.56 nats",
        "- the twin of the head-width-64 member: D_sub 0.3",
    ]
    assert itemised("a; b: c; d") == "a; b: c; d"  # fewer than three subjects: a sentence as it is
    claim = next(c for c in load_claims() if c["id"] == "C21")
    v = vd.Verdict("C21", FAILS, 0.186, (0.16, 0.21), None, "", claim["rule"], reason)
    page = render(v, claim["claim"])
    assert "\n- the twin of the head-width-64 member: $D_{\\mathrm{sub}}$ 0.3\n" in page and not page.endswith(".")
    flat = render(v, claim["claim"], lists=False)
    assert "\n" not in flat and "mlm-w" not in flat and flat.endswith(".")
