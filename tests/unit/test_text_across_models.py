"""Chapter 9's words (identifiability.text.across_models): each wording, from numbers on each side of the
branch that chooses it."""

from __future__ import annotations

import math
from types import SimpleNamespace as NS

import pandas as pd

from identifiability.base.stats import Interval
from identifiability.studies.across_models import Comparison
from identifiability.text.across_models import (
    ceiling_text,
    claims_markdown,
    comparison_text,
    control_text,
    no_separator_text,
    power_text,
    pretrained_reference_text,
    recorded_text,
    reference_text,
)

from .test_text import stand_ins_match


def test_no_separator_text_names_the_models():
    assert no_separator_text([]) == ""
    assert no_separator_text(["gpt2"]) == (
        "The separator curves have no line for **gpt2**: its tokenizer adds no separator token to a sentence."
    )
    assert "no line for **gpt2**, **opt**: their tokenizer" in no_separator_text(["gpt2", "opt"])


def _power(seed_var: float, sentence_var: float, n: int) -> dict:
    from identifiability.base.stats import chance_of_holding
    from identifiability.verdicts.across_models import C13_BAND, C13_POWER, sentences_for_power

    return {
        "fine_tune_seeds": 3,
        "probe_seeds": 3,
        "reference_probe_seeds": 3,
        "sentences": n,
        "d_last": 0.0,
        "seed_var": seed_var,
        "sentence_var": sentence_var,
        "chance_of_holding": chance_of_holding(seed_var, sentence_var, n, C13_BAND),
        "sentences_for_power": sentences_for_power(seed_var, sentence_var, C13_BAND, C13_POWER),
    }


def test_the_power_text_shows_the_calculation_and_follows_the_numbers():
    """The page's power paragraph: enough sentences, too few, and seeds too noisy for any number of them
    give three different statements, each with the numbers it was computed from."""
    from identifiability.verdicts.across_models import C13_BAND, C13_POWER

    enough = power_text({"lee-pairs": _power(1e-6, 0.01, 200)}, C13_BAND, C13_POWER)
    few = power_text({"lee-pairs": _power(1e-6, 0.01, 20)}, C13_BAND, C13_POWER)
    noisy = power_text({"lee-pairs": _power(1e-3, 0.01, 200), "random init": _power(0, 0.1, 200)}, C13_BAND, C13_POWER)
    assert "this build has enough" in enough and "more than this build measured" in few
    assert "no number of sentences reaches it" in noisy and "random init" not in noisy
    n = _power(1e-6, 0.01, 20)["sentences_for_power"]
    assert f"**{n}** test sentences ({n - 20} more" in few and "2Φ(0.05/√V − 1.96) − 1" in few
    assert len({enough, few, noisy}) == 3 and power_text({}, C13_BAND, C13_POWER) == ""


def test_the_reference_text_says_what_the_reference_is():
    default = reference_text("all-MiniLM-L6-v2", True)
    assert "contrastively" in default and "fine-tune with a further fine-tune" in default
    other = reference_text("bert-base-uncased", False)
    assert "bert-base-uncased" in other and "contrastively" not in other


def test_the_page_says_what_this_build_compares_and_what_fills_the_rest():
    """One model: nothing to compare, and the commands that add models; the reference and its control only: no
    fine-tune, and `make compare`; with a fine-tune, neither sentence."""
    from types import SimpleNamespace

    from identifiability.verdicts.across_models import FineTuning, Paired

    def cmp(roles, recorded=""):
        models = pd.DataFrame({"model_key": [f"k{i}" for i in range(len(roles))], "model": ["m"] * len(roles),
                               "role": roles})  # fmt: skip
        n = len(roles)
        return SimpleNamespace(
            table_rows=10, runs=2, models_in_table=n, models=n, model_table=models, recorded=recorded
        )

    alone, control, tuned = (
        comparison_text(cmp(r), 0)
        for r in (["pre-trained"], ["pre-trained", "random init"], ["pre-trained", "fine-tuned: x", "random init"])
    )
    assert "Nothing to compare" in alone and "`make book`" in alone and "`make compare`" in alone
    assert "No fine-tuned model" in control and "`make compare`" in control and "Nothing" not in control
    assert "make compare" not in tuned
    caption = "recorded run of 2026-12-03 (51 min 0 s, Linux, 2 CPUs, torch 2); `make compare` recomputes it"
    from_record = cmp(["pre-trained", "fine-tuned: x", "random init"], caption)
    assert comparison_text(from_record, 0).startswith(f"**From the recorded run of `make compare`** ({caption}): ")
    assert recorded_text(from_record) == f"**C13 and C14 are judged on the {caption}.**"
    assert recorded_text(cmp(["pre-trained"])) == ""
    assert "2 chapter runs of 1 model;" in alone and "3 models can be compared" in tuned  # no "model(s)"
    d = Interval(-0.6, -0.7, -0.5, 22, "test sentences")
    paired = Paired((Interval(0.0, -0.01, 0.01, 22, "test sentences"), d), d, 1.0, 0.0, 0.1, 1, 3, 22)
    text = control_text(FineTuning(control=paired))
    assert f"$d_L$ = {d}" in text and "22 test sentences" in text and "`make compare`" in text
    assert control_text(FineTuning(tasks={"x": paired}, control=paired)) == "" == control_text(FineTuning())


def test_the_power_text_counts_the_sentences_in_words():
    from identifiability.verdicts.across_models import C13_BAND, C13_POWER

    enough = power_text({"lee-pairs": _power(1e-6, 0.01, 200)}, C13_BAND, C13_POWER)
    assert enough.startswith(
        "How many test sentences C13 needs, from the measured variances:\n\n- **lee-pairs**: 3 fine-tune"
    )
    assert "3 fine-tune seeds × 3 probe seeds (and the reference's 3), 200 test sentences." in enough
    assert enough.endswith("test sentences (this build has enough).")


def _models(roles: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"model_key": [f"k{i}" for i in range(len(roles))], "model": ["m"] * len(roles), "role": roles})


def test_comparison_text_lists_the_models_it_compares():
    c = NS(table_rows=1234, runs=1, models_in_table=1, models=1, model_table=_models(["pre-trained"]), recorded="")
    text = comparison_text(c, 0)
    assert text.startswith(
        "The table holds 1,234 rows from 1 chapter run of 1 model; with seed 0 and shared parameters, 1 model can be "
        "compared:\n\n- **pre-trained**: `k0`"
    )
    assert "\n\n**Nothing to compare:**" in text


def _claims(low: float, baseline: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "quantity": ["C6", "C6"],
            "model_key": ["k0", "k1"],
            "role": ["pre-trained", "random init"],
            "corpus": ["lee", "lee"],
            "value": [0.95, 0.05],
            "low": [low, math.nan],
            "high": [0.96, math.nan],
            "baseline": [baseline, math.nan],
            "verdict": ["holds", "fails"],
        }
    )


def test_claims_markdown_writes_an_interval_and_a_baseline_only_where_there_are_some():
    models = _models(["pre-trained", "random init", "fine-tuned: x"])
    md = claims_markdown(_claims(0.94, 0.2), models)
    head, rule, row = md.splitlines()
    assert head == "| claim | corpus | pre-trained | random init | fine-tuned: x |" and rule == "|---|---|---|---|---|"
    assert row == "| C6 | lee | **holds** 0.950 (0.940 to 0.960); baseline 0.200 | **fails** 0.0500 | — |"
    point = claims_markdown(_claims(0.96, math.nan), models).splitlines()[2]
    assert point.startswith("| C6 | lee | **holds** 0.950 | ")  # low == high: no interval, no baseline
    assert claims_markdown(_claims(0.94, 0.2).iloc[:0], models) == "No run these models share judges a claim."


def test_the_ceiling_text_names_the_layers_off_the_ceiling_and_those_at_it():
    """C14 v4 is judged on the layers whose reference rate's upper bound lies below the ceiling: the page names
    them, and those at the ceiling; all off, none at it; nothing without paired evidence."""
    from identifiability.evidence.across_models import FineTuning, Paired

    def ft(rates):
        ref = tuple(Interval(r, r - 0.02 * (r < 1), min(1.0, r + 0.02), 30, "test sentences") for r in rates)
        off = tuple(k for k, r in enumerate(ref, 1) if r.high < 0.95)
        d = Interval(0.0, -0.01, 0.01, 30, "test sentences")
        p = Paired((d,) * len(rates), d, 0.5, 0, 0.1, 3, 3, 30, reference=ref, off_ceiling=off)
        return FineTuning(tasks={"t": p})

    default = ceiling_text(ft([1.0, 0.9996, 1.0, 0.9998, 0.8, 0.7]))
    assert "off the ceiling only: **layers 5 and 6**; at the ceiling: layers 1, 2, 3 and 4." in default
    assert "2: 99.96% (97.96 to 100.00)" in default and "reaches 0.95" in default
    everywhere = ceiling_text(ft([0.8, 0.7, 0.6]))
    assert everywhere.endswith("**layers 1, 2 and 3**.") and "at the ceiling" not in everywhere
    assert "**no layer**; at the ceiling: layer 1." in ceiling_text(ft([1.0]))
    assert ceiling_text(FineTuning()) == ""


def test_the_stand_ins_have_the_fields_of_the_study_types():
    c = NS(table_rows=1, runs=1, models_in_table=1, models=1, model_table=None, recorded="")
    assert stand_ins_match([(c, Comparison)]) == []


def test_the_pretrained_reference_text_names_the_command_without_a_run_and_the_run_with_one():
    """Without a recorded run the section names the two commands that make one; with one, the run's caption
    and the layers its reference leaves room to change (here none: a reference at the ceiling everywhere)."""
    from identifiability.evidence.across_models import FineTuning, Paired

    none = pretrained_reference_text("mlm-w128-dv32-seed0", None)
    assert "`make family`" in none and "`make compare BASE=data/models/mlm-w128-dv32-seed0`" in none
    ref = (Interval(1.0, 0.99, 1.0, 30, "test sentences"),)
    d = Interval(0.0, -0.01, 0.01, 30, "test sentences")
    p = Paired((d,), d, 0.5, 0, 0.1, 3, 3, 30, reference=ref, off_ceiling=())
    c = NS(
        recorded="recorded run of 2026-12-03 (20 min, Linux, 2 CPUs, torch 2.13.0)",
        fine_tuning=FineTuning(tasks={"t": p}),
    )
    got = pretrained_reference_text("mlm-w128-dv32-seed0", c)
    assert got.startswith(
        "**C13 and C14 with `mlm-w128-dv32-seed0` as the reference**, judged on its recorded run of 2026-12-03"
    )
    assert "**no layer**; at the ceiling: layer 1." in got
