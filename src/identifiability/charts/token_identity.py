"""Charts of the token-identity (04) and angle-vs-magnitude (05) chapters, and chapter 4's generated text
(chapter 5's is in :mod:`identifiability.charts.angle_magnitude`).

Layer on the x axis; a dropdown chooses the probe (mapping, its training loss and the lookup). Data frames
in (as computed by :mod:`identifiability.identity`), Altair charts out.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import altair as alt
import numpy as np
import pandas as pd
from altair.expr.core import Expression

from ..identity import CANDIDATES, LOOKUPS, LOSSES, MAPPINGS
from .render import dash_legend, plain_notation

if TYPE_CHECKING:
    from pandas.io.formats.style import Styler

    from ..studies.token_identity import (
        ClaimsResult,
        GeneralisationResult,
        IdentificationResult,
        NeighbourResult,
        ProbesResult,
        SampleResult,
        SecondCorpusResult,
    )


def _dropdown(name: str, options: list, value: str | None = None) -> alt.Parameter:
    """A select box bound to parameter ``name``, set to ``value`` (default: the first option)."""
    return alt.param(
        name=name,
        value=options[0] if value is None else value,
        bind=alt.binding_select(options=options, name=f"{name} "),
    )


def _label_probe(mapping: str, loss: str, lookup: str) -> str:
    if mapping == "naive":
        return f"identity map, {lookup} lookup"
    return f"{mapping} map, {loss} loss, {lookup} lookup"


def _label_training(loss: str, lookup: str) -> str:
    return f"{loss} loss, {lookup} lookup"


def _merged_label(combos: list[tuple], label) -> str:
    """One option's name for the choices that all show the same data: "linear map, l2/cos loss, cos lookup"
    where they differ in one field, each choice named where they are no such product."""
    values = [list(dict.fromkeys(c[i] for c in combos)) for i in range(len(combos[0]))]
    if len(combos) == int(np.prod([len(v) for v in values])):
        return label(*("/".join(map(str, v)) for v in values))
    return " = ".join(label(*c) for c in combos)


def _combined_choice(
    df: pd.DataFrame, fields: list[str], order: list[list], measures: list[str], label, default: tuple, name: str
) -> tuple[pd.DataFrame, list[alt.Parameter], Expression]:
    """One dropdown ``name`` over the combinations of ``fields`` (each in the given ``order``), where two
    combinations that show the same ``measures`` (every other column matched) are one option, named by
    :func:`_merged_label`: every option changes what the chart shows, in every view. No dropdown where only
    one option is left. Returns the rows of one combination per option with a column ``name`` (the option),
    the parameters and the filter they set; the option holding ``default`` is selected first."""
    keys = [c for c in df.columns if c not in measures and c not in fields]
    groups: list[tuple[pd.DataFrame, pd.DataFrame, list[tuple]]] = []  # (comparable view, rows, combinations)
    for combo in itertools.product(*order):
        rows = df.loc[np.logical_and.reduce([df[f] == v for f, v in zip(fields, combo)])]
        if rows.empty:
            continue
        view = rows[keys + measures].sort_values(keys).reset_index(drop=True)
        same = next((g for g in groups if g[0].equals(view)), None)
        if same is None:
            groups.append((view, rows, [combo]))
        else:
            same[2].append(combo)
    options = [_merged_label(g[2], label) for g in groups]
    out = pd.concat([g[1].assign(**{name: o}) for g, o in zip(groups, options)], ignore_index=True)
    value = next((o for g, o in zip(groups, options) if default in g[2]), options[0])
    if len(options) == 1:
        return out, [], alt.datum[name] == value
    p = _dropdown(name, options, value)
    return out, [p], alt.datum[name] == p


def _probe_choice(
    df: pd.DataFrame, naive: bool, measures: list[str], default: str | None = None
) -> tuple[pd.DataFrame, list[alt.Parameter], Expression]:
    """One dropdown over the probes, mapping × training loss × lookup (:func:`_combined_choice`); returns
    (df with a column ``probe``, params, filter). With ``naive`` the identity map (no training loss) is a
    probe too. Separate menus would each have to be live in every view of the others, which they are not:
    with the identity map chosen (it has no training loss), the loss menu changes nothing."""
    if not naive:
        df = df[df.mapping != "naive"]
    mappings = [m for m in MAPPINGS if m in set(df.mapping)]
    default = default if default in mappings else mappings[0]
    return _combined_choice(
        df,
        ["mapping", "loss", "lookup"],
        [mappings, ["none", *LOSSES], list(LOOKUPS)],
        measures,
        _label_probe,
        (default, "none" if default == "naive" else "cos", "cos"),
        "probe",
    )


def rate_chart(
    rates: pd.DataFrame, title: str, paper_value: float | None = None, paper_label: str = "paper"
) -> alt.LayerChart:
    """Identification rate per layer. ``rates`` has columns mapping, loss, lookup, candidates, split,
    layer, rate, chance. Dropdowns choose the trained mapping, its loss, the lookup and the candidate
    set; the naive baseline (same lookup and candidates) and chance are drawn with it."""
    df = rates[["mapping", "loss", "lookup", "candidates", "split", "layer", "rate", "chance"]].copy()
    df["rate"] = df["rate"].round(4)
    df["chance"] = df["chance"].round(4)
    trained = sorted(set(df.mapping) - {"naive"}, key=MAPPINGS.index)
    mapping = _dropdown("mapping", trained)
    loss = _dropdown("loss", [k for k in LOSSES if k in set(df.loss)], "cos")
    lookup = _dropdown("lookup", [k for k in LOOKUPS if k in set(df.lookup)], "cos")
    cands = _dropdown("candidates", [c for c in CANDIDATES if c in set(df.candidates)])
    base = alt.Chart(df).encode(x=alt.X("layer:O", title="layer l (0 = input embeddings)"))
    y = alt.Y("rate:Q", title="identified tokens (share)", scale=alt.Scale(domain=[0, 1]))
    sel = (
        (alt.datum.mapping == mapping)
        & (alt.datum.loss == loss)
        & (alt.datum.lookup == lookup)
        & (alt.datum.candidates == cands)
    )
    chosen = base.transform_filter(sel).encode(
        y=y,
        color=alt.value("#1f77b4"),
        tooltip=["mapping", "loss", "lookup", "candidates", "split", "layer", alt.Tooltip("rate:Q", format=".3f")],
    )
    split = alt.StrokeDash("split:N", title="split", sort=["test", "train"], legend=dash_legend())
    probe = chosen.mark_line().encode(strokeDash=split) + chosen.mark_point(filled=True).encode(detail="split:N")
    nsel = (
        (alt.datum.mapping == "naive")
        & (alt.datum.lookup == lookup)
        & (alt.datum.candidates == cands)
        & (alt.datum.split == "test")
    )
    naive = (
        base.transform_filter(nsel)
        .mark_line(point=True, color="gray")
        .encode(y=y, tooltip=[alt.Tooltip("rate:Q", format=".3f", title="naive (identity map)"), "layer"])
    )
    chance = (
        base.transform_filter(nsel)
        .mark_line(color="crimson", strokeDash=[2, 2])
        .encode(y="chance:Q", tooltip=[alt.Tooltip("chance:Q", format=".3f")])
    )
    layers = [probe, naive, chance]
    if paper_value is not None:
        last = int(df.layer.max())
        ref = pd.DataFrame({"layer": [last], "rate": [paper_value], "label": [f"{paper_label}: {paper_value:.0%}"]})
        pt = (
            alt.Chart(ref)
            .mark_point(shape="diamond", size=120, color="darkorange", filled=True)
            .encode(x="layer:O", y="rate:Q", tooltip=["label"])
        )
        tx = (
            alt.Chart(ref)
            .mark_text(dx=-10, dy=14, align="right", color="darkorange")
            .encode(x="layer:O", y="rate:Q", text="label")
        )
        layers += [pt, tx]
    subtitle = "blue: the chosen probe (solid: test, dashed: train); grey: identity map; red dotted: chance"
    return (
        alt.layer(*layers)
        .add_params(mapping, loss, lookup, cands)
        .properties(title=alt.TitleParams(title, subtitle=subtitle), width=460, height=280)
    )


def overlay_chart(rates: pd.DataFrame, title: str) -> alt.Chart:
    """Test-split rates per layer with one line per ``series`` (e.g. corpus); one dropdown chooses the probe
    (:func:`_probe_choice`), the naive map included."""
    df = rates[["series", "mapping", "loss", "lookup", "layer", "rate", "chance"]].copy()
    df["rate"] = df["rate"].round(4)
    df, params, sel = _probe_choice(df, naive=True, measures=["rate", "chance"], default="linear")
    base = alt.Chart(df).transform_filter(sel).encode(x=alt.X("layer:O", title="layer l"))
    lines = base.mark_line(point=True).encode(
        y=alt.Y("rate:Q", title="identified tokens (test)", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("series:N", title=None),
        tooltip=["series", "probe", "layer", alt.Tooltip("rate:Q", format=".3f")],
    )
    chance = base.mark_line(strokeDash=[2, 2]).encode(y="chance:Q", color=alt.Color("series:N"), opacity=alt.value(0.5))
    return alt.layer(lines, chance).add_params(*params).properties(title=title, width=460, height=280)


def generalisation_chart(gen: pd.DataFrame, title: str) -> alt.Chart:
    """Heatmap: rows the layer a probe was trained on, columns the layer it is tested on."""
    df = gen[["mapping", "loss", "lookup", "layer", "test_layer", "rate"]].copy()
    df["rate"] = df["rate"].round(3)
    df, params, sel = _probe_choice(df, naive=False, measures=["rate"])
    base = (
        alt.Chart(df)
        .transform_filter(sel)
        .encode(x=alt.X("test_layer:O", title="tested on layer"), y=alt.Y("layer:O", title="trained on layer"))
    )
    rect = base.mark_rect().encode(
        color=alt.Color("rate:Q", scale=alt.Scale(domain=[0, 1], scheme="viridis"), title="identified"),
        tooltip=["probe", "layer", "test_layer", alt.Tooltip("rate:Q", format=".3f")],
    )
    text = base.mark_text(fontSize=10).encode(
        text=alt.Text("rate:Q", format=".2f"),
        color=alt.condition(alt.datum.rate > 0.6, alt.value("black"), alt.value("white")),
    )
    return alt.layer(rect, text).add_params(*params).properties(title=title, width=320, height=260)


def neighbour_chart(nb: pd.DataFrame, title: str) -> alt.Chart:
    """Share of tokens whose nearest same-sentence input embedding is x_{i+k}, per layer, one line per k.
    The title's notation shows as Unicode scripts (:func:`identifiability.charts.render.plain_notation`)."""
    df = nb[nb.offset != 0][["mapping", "loss", "lookup", "layer", "offset", "share", "chance"]].copy()
    df["share"] = df["share"].round(4)
    df, params, sel = _probe_choice(df, naive=True, measures=["share", "chance"], default="linear")
    return (
        alt.Chart(df)
        .transform_filter(sel)
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O", title="layer l"),
            y=alt.Y("share:Q", title="nearest candidate is xᵢ₊ₖ (share of tokens)"),
            color=alt.Color(
                "offset:O",
                title="k",
                scale=alt.Scale(
                    domain=[-3, -2, -1, 1, 2, 3],
                    range=["#fcae91", "#fb6a4a", "#cb181d", "#08519c", "#3182bd", "#9ecae1"],
                ),
            ),
            tooltip=[
                "probe",
                "offset",
                "layer",
                alt.Tooltip("share:Q", format=".3f"),
                alt.Tooltip("chance:Q", format=".3f"),
            ],
        )
        .add_params(*params)
        .properties(title=plain_notation(title), width=460, height=260)
    )


def combo_chart(rates: pd.DataFrame, title: str) -> alt.Chart:
    """Test rate per layer, one line per (training loss, lookup) pair; a dropdown picks the mapping.

    The naive map has no training loss: its two lookups appear as "— / l2" and "— / cos"."""
    df = rates[["mapping", "loss", "lookup", "layer", "rate", "chance"]].copy()
    df["rate"] = df["rate"].round(4)
    df["pair"] = np.where(df.mapping == "naive", "—", df.loss) + " loss / " + df.lookup + " lookup"
    mapping = _dropdown("mapping", [m for m in MAPPINGS if m in set(df.mapping)], "linear")
    base = alt.Chart(df).transform_filter(alt.datum.mapping == mapping).encode(x=alt.X("layer:O", title="layer l"))
    shown = base.encode(
        y=alt.Y("rate:Q", title="identified tokens (test)", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("pair:N", title="training loss / lookup"),
        tooltip=["mapping", "loss", "lookup", "layer", alt.Tooltip("rate:Q", format=".3f")],
    )
    lines = shown.mark_line().encode(strokeDash=alt.StrokeDash("lookup:N", title="lookup", legend=dash_legend()))
    chance = base.mark_line(color="crimson", strokeDash=[2, 2]).encode(y="chance:Q")
    return (
        alt.layer(lines, shown.mark_point(filled=True), chance)
        .add_params(mapping)
        .properties(title=title, width=460, height=280)
    )


def ablation_chart(df: pd.DataFrame, title: str) -> alt.Chart:
    """Test rate per layer, one line per ablation; one dropdown picks the training loss and
    the lookup (:func:`_combined_choice`).

    ``df`` columns: ablation, loss ("none" for maps without training), lookup, layer, rate, chance."""
    df = df[["ablation", "loss", "lookup", "layer", "rate", "chance"]].copy()
    df["rate"] = df["rate"].round(4)
    fixed = df[df.loss == "none"]
    df = pd.concat([df[df.loss != "none"]] + [fixed.assign(loss=k) for k in LOSSES], ignore_index=True)
    df, params, sel = _combined_choice(
        df,
        ["loss", "lookup"],
        [list(LOSSES), list(LOOKUPS)],
        ["rate", "chance"],
        _label_training,
        ("cos", "cos"),
        "probe",
    )
    base = alt.Chart(df).transform_filter(sel).encode(x=alt.X("layer:O", title="layer l"))
    lines = base.mark_line(point=True).encode(
        y=alt.Y("rate:Q", title="identified tokens (test)", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("ablation:N", title=None, legend=alt.Legend(orient="bottom", columns=2, labelLimit=320)),
        tooltip=["ablation", "probe", "layer", alt.Tooltip("rate:Q", format=".3f")],
    )
    chance = (
        base.transform_filter(alt.datum.ablation == df.ablation.iloc[0])
        .mark_line(color="crimson", strokeDash=[2, 2])
        .encode(y="chance:Q")
    )
    return alt.layer(lines, chance).add_params(*params).properties(title=title, width=460, height=280)


def norm_chart(summary: pd.DataFrame, hist: pd.DataFrame, title: str) -> alt.HConcatChart:
    """Left: |e_i^l| per layer (whiskers 5-95 %, box 25-75 %, tick median). Right: the distribution of
    |e_i^l| / median at one layer, chosen with a slider."""
    s = summary.round(3)
    base = alt.Chart(s).encode(x=alt.X("layer:O", title="layer l (0 = input embeddings)"))
    whisk = base.mark_rule().encode(y=alt.Y("q05:Q", title="|e_i^l|"), y2="q95:Q")
    box = base.mark_bar(size=18, opacity=0.6).encode(
        y="q25:Q", y2="q75:Q", tooltip=["layer", "q05", "q25", "median", "q75", "q95"]
    )
    med = base.mark_tick(color="black", size=18, thickness=2).encode(y="median:Q")
    left = alt.layer(whisk, box, med).properties(title=title, width=250, height=260)
    h = hist.round(4)
    layer = alt.param(
        name="norm_layer",
        value=int(h.layer.max()),
        bind=alt.binding_range(min=0, max=int(h.layer.max()), step=1, name="layer "),
    )
    right = (
        alt.Chart(h)
        .transform_filter(alt.datum.layer == layer)
        .mark_bar()
        .encode(
            x=alt.X("lo:Q", bin="binned", title="|e_i^l| / median of the layer (last bin: all above)"),
            x2="hi:Q",
            y=alt.Y("share:Q", title="share of tokens"),
            tooltip=[alt.Tooltip("lo:Q", format=".2f"), alt.Tooltip("share:Q", format=".3f")],
        )
        .add_params(layer)
        .properties(title="Distribution at one layer", width=250, height=260)
    )
    return alt.hconcat(left, right)


def angle_chart(angles: pd.DataFrame, title: str) -> alt.Chart:
    """Angle between e_i^l and its own x_i (median, 25-75 % band) against the mean angle to the other
    tokens' x_j of the same sentence, per layer."""
    a = angles.round(3)
    base = alt.Chart(a).encode(x=alt.X("layer:O", title="layer l"))
    band = base.mark_area(opacity=0.25, color="#1f77b4").encode(
        y=alt.Y("q25:Q", title="angle (degrees)", scale=alt.Scale(domain=[0, 120])), y2="q75:Q"
    )
    own = base.mark_line(point=True, color="#1f77b4").encode(
        y="median:Q",
        tooltip=[
            "layer",
            alt.Tooltip("median:Q", title="median angle to own x_i", format=".1f"),
            alt.Tooltip("closest_share:Q", title="own x_i is the closest", format=".3f"),
        ],
    )
    other = base.mark_line(point=True, color="gray", strokeDash=[4, 3]).encode(
        y="other_mean:Q", tooltip=["layer", alt.Tooltip("other_mean:Q", title="mean angle to other x_j", format=".1f")]
    )
    rule = alt.Chart(pd.DataFrame({"y": [90]})).mark_rule(color="lightgray").encode(y="y:Q")
    return alt.layer(rule, band, own, other).properties(title=title, width=460, height=260)


def epochs_chart(curves: pd.DataFrame, title: str) -> alt.Chart:
    """Validation rate (cosine lookup among the sentence's tokens) of every probe after each epoch, one line
    per probe; probes whose early stopping triggered in grey, probes that reached the epoch cap in colour.
    ``curves``: :func:`identifiability.identity.rate_curves`."""
    df = curves.copy()
    df["rate"] = df["rate"].round(4)
    df["probe"] = df.mapping + " / " + df.loss + " loss / layer " + df.layer.astype(str)
    df["stopping"] = np.where(df["stopped early"], "stopped early", "reached the epoch cap")
    return (
        alt.Chart(df.drop(columns="stopped early"))
        .mark_line(point=alt.OverlayMarkDef(size=12))
        .encode(
            x=alt.X("epoch:Q", title="epoch (0 = initial weights)"),
            y=alt.Y("rate:Q", title="identified validation tokens (share)"),
            detail="probe:N",
            color=alt.Color(
                "stopping:N",
                title=None,
                scale=alt.Scale(domain=["reached the epoch cap", "stopped early"], range=["#d62728", "#bbbbbb"]),
            ),
            tooltip=["probe", "epoch", alt.Tooltip("rate:Q", format=".3f"), "stopping"],
        )
        .properties(title=title, width=460, height=260)
    )


def probe_table(overview: pd.DataFrame) -> Styler:
    """Chapter 4's training overview (``ProbesResult.overview``: per mapping and loss) as a reader reads it:
    headers in words, counts and epochs as integers (a median of two middle values keeps its .5), the kept
    epochs as one range, losses to three decimals."""
    t = overview.reset_index()
    kept = [f"{a:.0f}" if a == b else f"{a:.0f}–{b:.0f}" for a, b in zip(t.best_epoch_min, t.best_epoch_max)]
    table = pd.DataFrame(
        {
            "map": t.mapping,
            "training loss": t.loss,
            "probes": t.probes.astype(int),
            "stopped early": t.stopped_early.astype(int),
            "epochs run (median)": t.epochs_run,
            "epoch kept": kept,
            "best validation loss, layer 0": t.val_loss_first,
            "best validation loss, last layer": t.val_loss_last,
        }
    )
    styles = [
        {"selector": "th", "props": "white-space: normal; max-width: 8em; vertical-align: bottom"},
        {"selector": "th, td", "props": "padding: 0.15em 0.6em"},
    ]
    loss = lambda v: f"{0.0 if abs(v) < 5e-4 else v:.3f}"  # no "-0.000" for a cosine loss a rounding below 0
    losses = ["best validation loss, layer 0", "best validation loss, last layer"]
    return (
        table.style.hide(axis="index")
        .set_table_styles(styles)
        .format({"epochs run (median)": "{:g}"} | dict.fromkeys(losses, loss))
    )


# --------------------------------------------------------------------------------------------------
# Chapter 4's generated text: each sentence from a study result (identifiability.studies.token_identity)
# --------------------------------------------------------------------------------------------------


def model_text(family: str, causal: bool) -> str:
    """What the model's attention direction changes about the question (chapter 4)."""
    if not causal:
        return f"{family} is bidirectional: every $e_i^l$ can draw on the whole sentence."
    return (
        f"**This model is causal ({family}).** The question and the candidate set are unchanged: token $i$ is to "
        "be identified from $e_i^l$ among the input embeddings of its sentence. What changes is what $e_i^l$ can "
        "contain: only tokens $\\le i$ reach it, so the first token's hidden state never mixes with anything, "
        "and landing on a *right* neighbour $x_{i+k}$ (below) can only be a confusion, never information about "
        "that token. Pre-LayerNorm models also keep a growing residual stream whose norm rises with depth, "
        "which the L2 rows feel more than the cosine rows."
    )


def sample_text(r: SampleResult) -> str:
    """The sample and its split by sentence."""
    splits = ", ".join(f"{k} {v['sentences']}/{v['tokens']}" for k, v in r.split_sizes.items())
    return (
        f"{r.n_sentences_used} sentences, {r.n_tokens_all} tokens ({int(r.hs.special.sum())} special), "
        f"{r.n_layers + 1} hidden states each; split (sentences/tokens, special tokens left out): {splits}; "
        f"{r.split_sentence_overlap} sentences in both train and test."
    )


def training_text(r: ProbesResult) -> str:
    """How many probes stopped early, and where the rate of those that reached the epoch cap levels off."""
    head = (
        f"Early stopping triggered for {r.probes_stopped_early} of the {r.probes_trained} trained probes "
        f"({r.patience} epochs without a better validation loss, within the cap of {r.epoch_cap} epochs)."
    )
    if not r.probes_at_cap:
        return head + " Every probe was trained until its validation loss stopped improving."
    capped = f"{head} **{r.probes_at_cap} reached the cap** before their validation loss stopped improving"
    if r.levels_off_at_cap is not None and r.levels_off_at_cap <= r.epoch_cap - r.patience:
        return (
            f"{capped}; the chart below shows every probe's validation rate per epoch. The capped probes' rates "
            f"stay within {r.level_tol:.1%} of their last value from epoch {r.levels_off_at_cap} on at the latest: "
            "their validation loss still improved, their rate no longer moved."
        )
    return (
        f"{capped}, and their validation rate had not levelled off either (it still moved by more than "
        f"{r.level_tol:.1%} in the last {r.patience} epochs; chart below): these probes may be under-trained, "
        "and more epochs may raise their rates."
    )


def c6_text(r: ClaimsResult) -> str:
    """C6's rate beside its three baselines, and the probe seeds it averages."""
    e = r.c6
    d = e.over_position
    spread = f"{min(r.c6_seed_rates):.1%} to {max(r.c6_seed_rates):.1%}"
    stopped = sum(r.seed_training.get("stopped early", []))
    extra = len(r.seed_training.get("stopped early", []))
    return (
        f"At the last layer the linear cosine probe identifies {e.rate.estimate:.1%} of a test sentence's tokens "
        f"on average (its {len(r.c6_seed_rates)} training seeds: {spread}). Knowing only each token's position "
        f"identifies {e.position_rate:.1%}; the probe trained on shuffled labels {e.shuffled_rate:.1%}; a uniform "
        f"guess {e.chance:.1%}. The probe lies {abs(d.estimate):.1%} "
        + ("above" if d.estimate >= 0 else "below")
        + " the position-only lookup per sentence ("
        + (f"95% interval of the difference {d.low:+.1%} to {d.high:+.1%})." if d.has_interval else "no interval).")
        + (f" Early stopping triggered for {stopped} of the {extra} probes of the extra seeds." if extra else "")
    )


def unseen_text(r: ClaimsResult) -> str:
    """C6's probe on the test tokens whose word type no training sentence holds."""
    u = r.unseen
    bounds = f"95% interval {u.low:.1%} to {u.high:.1%}" if u.has_interval else "too few sentences for an interval"
    return (
        f"On the {r.c6_unseen_tokens} test tokens whose word type never occurs in the training sentences the same "
        f"probe identifies {u.estimate:.1%} ({bounds}), against {r.last_rate.estimate:.1%} on all test tokens."
    )


def last_layer_caption(r: IdentificationResult) -> str:
    return (
        f"Test identifiability at the last layer ({r.n_layers}); chance {r.chance_sentence:.3f} (same sentence) "
        f"and {r.chance_all:.5f} (all tokens)."
    )


def identification_text(r: IdentificationResult) -> str:
    """The per-layer rates at the last layer, the identity map's decay and the train-test gap."""
    drop = r.naive_cos_first_layer_below_99
    best = r.best_last
    best_probe = (
        f"the identity map with {best['lookup']} lookup"
        if best["mapping"] == "naive"
        else f"{best['mapping']} / {best['loss']} loss / {best['lookup']} lookup"
    )
    return (
        f"At the last layer the linear map trained with cosine distance and cosine lookup identifies "
        f"**{r.linear_cos_cos_last:.1%}** of held-out tokens among their sentence's input embeddings (paper, "
        f"BERT-base: ≈ {r.paper_last_layer:.0%}); the MLP {r.mlp_cos_cos_last:.1%}; the identity map alone "
        f"{r.naive_cos_last:.1%} with cosine and {r.naive_l2_last:.1%} with L2 lookup (chance "
        f"{r.chance_sentence:.1%}). The identity map is "
        + (
            f"above 99 % up to layer {drop - 1} and drops from layer {drop} on. "
            if drop
            else "above 99 % at every layer. "
            if drop is None
            else "below 99 % already at layer 0. "
        )
        + f"Against all {r.test_tokens} test tokens at once the same linear probe still finds "
        f"{r.linear_cos_cos_last_all:.1%} (chance {r.chance_all:.3%}). The best last-layer combination is "
        f"{best_probe} ({best['rate']:.1%}). Train and test rates differ by {r.mean_train_test_gap:.1%} on "
        f"average (at most {r.max_train_test_gap:.1%}): compare the paper's Figure 7."
    )


def generalisation_text(r: GeneralisationResult) -> str:
    return (
        f"For the linear cosine probe the diagonal (trained and tested on the same layer) averages "
        f"{r.gen_linear_cos_diag_mean:.1%}, the adjacent layers {r.gen_linear_cos_neighbour_mean:.1%} and all "
        f"off-diagonal cells {r.gen_linear_cos_offdiag_mean:.1%}. The last layer's probe applied to the input "
        f"embeddings finds {r.gen_linear_cos_last_on_first:.1%}; the layer-0 probe applied to the last layer "
        f"{r.gen_linear_cos_first_on_last:.1%}. The paper (Figures 8–10) describes good transfer between "
        "neighbouring layers that decays with distance; this chapter records the three averages above without a "
        "verdict (the statement has no claim id)."
    )


def neighbour_text(r: NeighbourResult) -> str:
    """Where the last layer's misses land, against uniform misses and the position-only lookup."""
    miss = max(r.linear_cos_last_miss, 1e-12)
    same = r.linear_cos_last_miss_same_word
    return (
        f"At the last layer the linear cosine probe misses {r.linear_cos_last_miss:.1%} of test tokens. Of these "
        f"misses {r.adjacent:.0%} land on an immediate neighbour ($k=\\pm1$) and "
        f"{r.linear_cos_last_miss_within_3 / miss:.0%} within three positions; misses spread uniformly over the "
        f"other tokens of the sentence would give {r.adjacent_uniform:.0%} and "
        f"{sum(r.uniform_misses_by_offset.values()):.0%}. A lookup that knows only each token's position (the "
        f"mean input embedding of that position) lands on an immediate neighbour in {r.position_only_adjacent:.0%} "
        "of its wrong guesses: position embeddings alone make neighbours look alike to that degree, so only the "
        f"excess of the probe's {r.adjacent:.0%} over it speaks for local context mixing. {same:.0%} of the "
        "misses retrieve **the same word at another position** of the sentence"
        + (
            " (a repeated 'the', ',' or 'to'): what the last layer loses is mostly the position, not the word."
            if same > 0.5
            else "."
        )
    )


def second_corpus_text(r: SecondCorpusResult, first: IdentificationResult, first_corpus: str) -> str:
    """The second corpus against the first, at the last layer."""
    close = abs(r.second_linear_cos_cos_last - first.linear_cos_cos_last) < 0.1
    return (
        f"On `{r.second_corpus_name}` ({r.second_sentences} sentences, {r.second_test_tokens} test tokens) the "
        f"linear cosine probe identifies {r.second_linear_cos_cos_last:.1%} at the last layer when trained on it "
        f"and {r.second_transfer_linear_cos_cos_last:.1%} when trained on `{first_corpus}` (there: "
        f"{first.linear_cos_cos_last:.1%}). "
        + (
            "The curves keep their shape across corpora, as in the paper's appendix."
            if close
            else "The corpora differ noticeably here; the smaller training set of the second corpus is one reason."
        )
    )
