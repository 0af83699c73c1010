"""Chapter 9's text (the comparison across models): which models the page compares, what the reference is,
C13's power calculation and the claims table, from :mod:`identifiability.studies.across_models` and
:mod:`identifiability.runs.model_comparison`."""

from __future__ import annotations

import pandas as pd

from ..base.digits import fmt
from ..runs.model_comparison import labels


def no_separator_text(models: list[str]) -> str:
    """One sentence naming the models whose tokenizer adds no separator to a sentence ("" if there are none)."""
    if not models:
        return ""
    names = ", ".join(f"**{m}**" for m in models)
    it = "its" if len(models) == 1 else "their"
    return f"The separator curves have no line for {names}: {it} tokenizer adds no separator token to a sentence."


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def comparison_text(c, seed: int) -> str:
    """Which models the table lets the page compare (``c``: a studies.across_models.Comparison)."""
    listed = "\n".join(f"- **{name}**: `{key}`" for key, name in labels(c.model_table).items())
    text = (
        f"The table holds {c.table_rows:,} rows from {_count(c.runs, 'chapter run')} of "
        f"{_count(c.models_in_table, 'model')}; with seed {seed} and shared parameters, "
        f"{_count(c.models, 'model')} can be compared:\n\n{listed}"
    )
    if c.recorded:
        text = (
            f"**From the recorded run of `make compare`** ({c.recorded}): this build's data folder holds no "
            "fine-tuned model's results, so the page compares the models of the recorded run, whose chapter "
            "results ship with the book under `data/recorded/compare/`. " + text
        )
    if c.models < 2:
        text += (
            "\n\n**Nothing to compare:** no other model has results with these parameters; `make book` runs the "
            "random-initialisation control beside this model (chapter 4 on the held-out text) and `make compare` "
            "adds the fine-tuned models."
        )
    elif not any(r.startswith("fine-tuned") for r in c.model_table.role):
        text += (
            "\n\n**No fine-tuned model has results:** this build compares the model with its random-"
            "initialisation control only, on a small chapter 4 run the build makes; `make compare` adds the "
            "fine-tunes the paper compares (a sentence-pair task, as MRPC in the paper, with three seeds; "
            "`make compare-full` adds a single-sentence task), then rebuilds the book."
        )
    return text


def recorded_text(c) -> str:
    """The line beside C13's and C14's verdicts when they are judged on the recorded `make compare` run
    (``c``: a studies.across_models.Comparison); "" when judged on this build's own results."""
    if not c.recorded:
        return ""
    return f"**C13 and C14 are judged on the {c.recorded}.**"


def pretrained_reference_text(name: str, c) -> str:
    """What the section on a reference pre-trained here shows (``name``: the family member's folder name; ``c``:
    the studies.across_models.Comparison of its recorded `make compare` run, or None without one), with the
    layers its reference leaves room to change (:func:`ceiling_text`)."""
    if c is None:
        return (
            f"No recorded `make compare` run of `{name}` ships with this copy of the book. `make family` trains "
            f"it (chapter 7); then `make compare BASE=data/models/{name}` fine-tunes it and records the run under "
            "`data/recorded/compare/`, which this section reads."
        )
    said = (
        f"**C13 and C14 with `{name}` as the reference**, judged on its {c.recorded}. The same rules and the same "
        "paired comparison on the held-out Lee sentences as above, from a masked-language model pre-trained here "
        "instead of a sentence encoder."
    )
    return "\n\n".join(t for t in (said, ceiling_text(c.fine_tuning)) if t)


def reference_text(model: str, default: bool) -> str:
    """What the pre-trained reference of C13 and C14 is (``default``: the embedded all-MiniLM-L6-v2)."""
    if default:
        return (
            f"**The reference is not a pre-trained MLM.** {model} is itself a fine-tuned sentence encoder: its "
            "model card says it starts from nreimers/MiniLM-L6-H384-uncased (6 layers of MiniLM, a model "
            "distilled from a larger masked-language model) and was fine-tuned contrastively on over a billion "
            "sentence pairs. The paper compares BERT-base as pre-trained with BERT-base fine-tuned on MRPC; here "
            "C13 and C14 compare a fine-tune with a further fine-tune of it. `make compare BASE=<hub id or "
            "folder>` runs the same comparison from another base model (e.g. bert-base-uncased)."
        )
    return (
        f"**The reference is {model}**, the base model every fine-tune below started from (`make compare "
        f"BASE={model}`); C13 and C14 compare each fine-tune with it."
    )


def power_text(power: dict, band: float, target: float, level: float = 0.95) -> str:
    """The power calculation of C13 per fine-tuned task (``Comparison.fine_tuning_power``), with the numbers:
    the variance split of d_L, the chance that C13 holds at a true difference of 0 with the sentences this
    build measured, and the sentences that make that chance ``target``."""
    from scipy.stats import norm

    z, zp = norm.ppf(0.5 + level / 2), norm.ppf(0.5 + target / 2)
    k = z + zp
    lines = []
    for task, p in power.items():
        if task == "random init":
            continue
        s2, v1, n = p["seed_var"], p["sentence_var"], p["sentences"]
        v = s2 + v1 / n
        head = (
            f"- **{task}**: {p['fine_tune_seeds']} fine-tune seeds × {p['probe_seeds']} probe seeds (and the "
            f"reference's {p['reference_probe_seeds']}), {n} test sentences. The bootstrap variance of d_L splits "
            f"into the seeds' part s² = {s2:.2g} and a per-sentence part σ² = {v1:.2g}, so "
            f"V = s² + σ²/n = {v:.2g}. C13 holds when |d_L| + {z:.2f}·√V ≤ {band:g}; at a true difference of 0 "
            f"that happens with probability 2Φ({band:g}/√V − {z:.2f}) − 1 = **{p['chance_of_holding']:.0%}** here."
        )
        need = p["sentences_for_power"]
        if need is None:
            tail = (
                f" A chance of {target:.0%} needs {band:g}/√V ≥ {z:.2f} + {zp:.2f} = {k:.2f}, i.e. V ≤ "
                f"{(band / k) ** 2:.2g}: the seeds' part alone exceeds it, so no number of sentences reaches it; "
                "more fine-tune seeds would."
            )
        else:
            tail = (
                f" A chance of {target:.0%} needs {band:g}/√V ≥ {z:.2f} + {zp:.2f} = {k:.2f}, i.e. "
                f"n ≥ σ² / (({band:g}/{k:.2f})² − s²) = **{need}** test sentences"
                + (" (this build has enough)." if need <= n else f" ({need - n} more than this build measured).")
            )
        lines.append(head + tail)
    if not lines:
        return ""
    return "How many test sentences C13 needs, from the measured variances:\n\n" + "\n".join(lines)


def control_text(ft) -> str:
    """What the random-initialisation control shows when it is the only model compared with the reference
    (``ft``: a ``verdicts.across_models.FineTuning``); "" when fine-tunes were compared or no control ran."""
    if ft.control is None or ft.tasks:
        return ""
    first, last = ft.control.layers[0], ft.control.last
    return (
        f"**The random-initialisation control against the reference:** the identifiability rate changes by "
        f"$d_1$ = {first} at the first layer and $d_L$ = {last} at the last: what changing "
        "every weight does, the baseline a fine-tune's change is read against. No fine-tuned model has results, "
        "so C13 and C14 are not run in this build; `make compare` makes the fine-tunes and runs them."
    )


def ceiling_text(ft) -> str:
    """Which layers C14 is judged on (``ft``: a ``evidence.across_models.FineTuning``): the pre-trained
    reference's rate per layer with its interval, the layers off the ceiling (upper bound below the
    evidence's ceiling, 1 - C13's band) named, and those at it; "" without paired evidence."""
    ref, off = ft.reference, ft.off_ceiling
    if not ref:
        return ""
    p = next(iter(ft.tasks.values()), None) or ft.control
    at = [k for k in range(1, len(ref) + 1) if k not in off]
    rates = ", ".join(
        f"{k}: {100 * r.estimate:.2f}% ({100 * r.low:.2f} to {100 * r.high:.2f})" for k, r in enumerate(ref, 1)
    )
    named = _layers(off) if off else "no layer"
    text = (
        f"**Where C14 looks.** The pre-trained reference's identifiability rate per layer, with its 95% interval "
        f"from the same draws as the differences: {rates}. A layer where the upper bound reaches "
        f"{p.ceiling:g} leaves fine-tuning almost nothing to change but a loss, so C14 is judged on the layers "
        f"off the ceiling only: **{named}**"
    )
    return text + (f"; at the ceiling: {_layers(at)}." if at else ".")


def _layers(numbers: list[int]) -> str:
    n = [str(x) for x in numbers]
    return f"layer {n[0]}" if len(n) == 1 else f"layers {', '.join(n[:-1])} and {n[-1]}"


def claims_markdown(df: pd.DataFrame, models: pd.DataFrame) -> str:
    """:func:`identifiability.runs.model_comparison.claims` as a Markdown table: one row per claim and corpus, one
    column per
    model (named by :func:`identifiability.runs.model_comparison.labels`, in the order of ``models``), each cell the
    verdict,
    the estimate with its interval and the baseline; "—" where a model has no run. A sentence instead of a
    table without rows."""
    if df.empty:
        return "No run these models share judges a claim."
    names = labels(models)
    head = ["claim", "corpus", *names.values()]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    cells = {(r.quantity, r.corpus, r.model_key): r for r in df.itertuples()}
    for quantity, corpus in dict.fromkeys(zip(df.quantity, df.corpus)):
        row = [quantity, corpus]
        for key in names:
            r = cells.get((quantity, corpus, key))
            if r is None:
                row.append("—")
                continue
            est = fmt(r.value) + (f" ({fmt(r.low)} to {fmt(r.high)})" if pd.notna(r.low) and r.low != r.high else "")
            base = f"; baseline {fmt(r.baseline)}" if pd.notna(r.baseline) else ""
            row.append(f"**{r.verdict}** {est}{base}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
