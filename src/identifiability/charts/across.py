"""Charts of the comparison across models (chapter 8): per-layer curves of every model, overlaid."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ..across import labels

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
    corpus most models have curves on, so the comparison shows); colour is the model, the line style its role
    (pre-trained solid, fine-tuned dashed, random init dotted), in one legend."""
    labels = list(dict.fromkeys(df.label))
    corpora = sorted(df.corpus.unique())
    most = df.groupby("corpus").model.nunique().reindex(corpora)
    quantity = alt.param(name="quantity", value=labels[0], bind=alt.binding_select(options=labels, name="quantity "))
    corpus = alt.param(
        name="corpus", value=str(most.idxmax()), bind=alt.binding_select(options=corpora, name="corpus ")
    )
    # One legend: colour and line style both keyed by the model (a model's dash is its role's), so each entry
    # shows the line as drawn.
    roles = df.drop_duplicates("model").set_index("model").role
    models = sorted(roles.index)
    dashes = {"pre-trained": [1, 0], "random init": [2, 2]}
    legend = alt.Legend(orient="bottom", columns=1, labelLimit=400, symbolType="stroke", symbolSize=400)
    return (
        alt.Chart(df, title=title)
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O", title="layer (0 = input embedding x)"),
            y=alt.Y("value:Q", title="value of the chosen quantity", scale=alt.Scale(zero=False)),
            color=alt.Color("model:N", title="model", scale=alt.Scale(domain=models), legend=legend),
            strokeDash=alt.StrokeDash(
                "model:N",
                title="model",
                scale=alt.Scale(domain=models, range=[dashes.get(roles[m], [6, 3]) for m in models]),
                legend=legend,
            ),
            tooltip=["model", "role", "corpus", "label", "layer", alt.Tooltip("value:Q", format=".3f")],
        )
        .add_params(quantity, corpus)
        .transform_filter((alt.datum.label == quantity) & (alt.datum.corpus == corpus))
        .properties(width=560, height=300)
    )


def no_separator_text(models: list[str]) -> str:
    """One sentence naming the models whose tokenizer adds no separator to a sentence ("" if there are none)."""
    if not models:
        return ""
    names = ", ".join(f"**{m}**" for m in models)
    it = "its" if len(models) == 1 else "their"
    return f"The separator curves have no line for {names}: {it} tokenizer adds no separator token to a sentence."


def comparison_text(c, seed: int) -> str:
    """Which models the table lets the page compare (``c``: a studies.across.Comparison)."""
    listed = "\n".join(f"- **{name}**: `{key}`" for key, name in labels(c.model_table).items())
    text = (
        f"The table holds {c.table_rows:,} rows from {c.runs} chapter runs of {c.models_in_table} model(s); with "
        f"seed {seed} and shared parameters, {c.models} model(s) can be compared:\n\n{listed}"
    )
    if c.models < 2:
        text += (
            "\n\nOnly one model has results: run `make compare` (or `identifiability sweep --models ...`) to add "
            "fine-tuned models and the random-initialisation control, then rebuild the book."
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


def differences_chart(ft, title: str) -> alt.Chart:
    """d_l, fine-tuned minus pre-trained identifiability rate per layer, with 95% intervals (``ft``: a
    ``verdicts.models.FineTuning``), one colour per fine-tuned task and the random-initialisation control."""
    rows = []
    series = {**ft.tasks, **({"random init": ft.control} if ft.control is not None else {})}
    for name, p in series.items():
        for layer, d in enumerate(p.layers, start=1):
            rows.append({"model": name, "layer": layer, "d": d.estimate, "low": d.low, "high": d.high})
    df = pd.DataFrame(rows, columns=["model", "layer", "d", "low", "high"])
    y_title = "d_l (fine-tuned − pre-trained rate)"
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
    return (zero + bars + line).properties(width=560, height=260)
