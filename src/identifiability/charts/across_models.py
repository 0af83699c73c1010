"""Charts of the comparison across models (chapter 8): per-layer curves of every model, overlaid."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ..model_comparison import labels

VERDICT_COLOURS = {
    "holds": "#1a9850",
    "partly holds": "#a6d96a",
    "inconclusive": "#bdbdbd",
    "fails": "#d73027",
    "not testable on this model": "#ffffff",
    "not run in this build": "#e9ecef",
}


def curves_chart(df: pd.DataFrame, title: str) -> alt.Chart:
    """Overlaid per-layer curves (``across.curves``): a menu picks the quantity and one the corpus (first: the
    corpus most models have curves on, so the comparison shows), each only where there is a choice (a menu of
    one option changes nothing); colour is the model, the line style its role (pre-trained solid, fine-tuned
    dashed, random init dotted), in one legend."""
    labels = list(dict.fromkeys(df.label))
    corpora = sorted(df.corpus.unique())
    most = df.groupby("corpus").model.nunique().reindex(corpora)
    menus, shown = [], alt.datum.label == labels[0]
    if len(labels) > 1:
        bind = alt.binding_select(options=labels, name="quantity ")
        quantity = alt.param(name="quantity", value=labels[0], bind=bind)
        menus, shown = [quantity], alt.datum.label == quantity
    if len(corpora) > 1:
        bind = alt.binding_select(options=corpora, name="corpus ")
        corpus = alt.param(name="corpus", value=str(most.idxmax()), bind=bind)
        menus, shown = [*menus, corpus], shown & (alt.datum.corpus == corpus)
    y_title = "value of the chosen quantity" if len(labels) > 1 else labels[0]
    if len(corpora) == 1:
        title = alt.Title(title, subtitle=f"on {corpora[0]}")
    # One legend: colour and line style both keyed by the model (a model's dash is its role's), so each entry
    # shows the line as drawn.
    roles = df.drop_duplicates("model").set_index("model").role
    models = sorted(roles.index)
    dashes = {"pre-trained": [1, 0], "random init": [2, 2]}
    legend = alt.Legend(orient="bottom", columns=1, labelLimit=400, symbolType="stroke", symbolSize=400)
    chart = (
        alt.Chart(df, title=title)
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O", title="layer (0 = input embedding x)"),
            y=alt.Y("value:Q", title=y_title, scale=alt.Scale(zero=False)),
            color=alt.Color("model:N", title="model", scale=alt.Scale(domain=models), legend=legend),
            strokeDash=alt.StrokeDash(
                "model:N",
                title="model",
                scale=alt.Scale(domain=models, range=[dashes.get(roles[m], [6, 3]) for m in models]),
                legend=legend,
            ),
            tooltip=["model", "role", "corpus", "label", "layer", alt.Tooltip("value:Q", format=".3f")],
        )
    )
    if menus:
        chart = chart.add_params(*menus)
    return chart.transform_filter(shown).properties(width=560, height=300)


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


def differences_chart(ft, title: str) -> alt.Chart:
    """d_l, a fine-tuned model's (or the control's) minus the reference's identifiability rate per layer, with
    95% intervals (``ft``: a ``verdicts.across_models.FineTuning``), one colour per fine-tuned task and the
    random-initialisation control."""
    rows = []
    series = {**ft.tasks, **({"random init": ft.control} if ft.control is not None else {})}
    for name, p in series.items():
        for layer, d in enumerate(p.layers, start=1):
            rows.append({"model": name, "layer": layer, "d": d.estimate, "low": d.low, "high": d.high})
    df = pd.DataFrame(rows, columns=["model", "layer", "d", "low", "high"])
    y_title = "rate − the reference's rate"
    base = alt.Chart(df, title=title).encode(
        x=alt.X("layer:O", title="layer l"),
        color=alt.Color("model:N", title="fine-tuned task or control", legend=alt.Legend(orient="bottom")),
    )
    zero = alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(strokeDash=[4, 4], color="#555").encode(y="y:Q")
    line = base.mark_line(point=True).encode(
        y=alt.Y("d:Q", title=y_title),
        tooltip=["model", "layer", alt.Tooltip("d:Q", format=".3f"), alt.Tooltip("low:Q", format=".3f"),
                 alt.Tooltip("high:Q", format=".3f")],
    )  # fmt: skip
    bars = base.mark_errorbar().encode(y=alt.Y("low:Q", title=y_title), y2="high:Q")
    return (zero + bars + line).properties(width=560, height=260, title=title)
