"""Charts of the head-width chapter (07): C4's paired difference against d_s / d_v per model of the family
(twins dashed), and each model's share of heads unique at d_s = d_v + 1 against its d_v. The tables come from
:func:`identifiability.studies.head_width.offset_curves` and :func:`~identifiability.studies.head_width.
threshold_table`; the words are in :mod:`identifiability.text.head_width`."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from ..pretrain.family import legend_name
from .render import dash_legend


def _named(data: pd.DataFrame) -> pd.DataFrame:
    """``data`` with its member and model columns in words (:func:`legend_name`): legends and tooltips say what a
    member or its twin is, not its folder."""
    return data.assign(**{c: data[c].map(legend_name) for c in ("member", "model") if c in data})


def offset_chart(curves: pd.DataFrame, ratio_range: tuple[float, float] | None = None) -> alt.LayerChart:
    """C4's paired difference (Pearson(A, A_eff) minus Pearson(A, A projected onto a random subspace of the same
    rank; the mean over a length's inputs) against d_s / d_v, one line per model, its untrained twin dashed;
    0 as a grey rule and, where given, C20's common range shaded. ``curves``: rows of ``offset_curves``."""
    curves = _named(curves)
    data = curves.assign(kind=curves.twin.map({True: "untrained twin", False: "pre-trained"})).round(4)
    base = alt.Chart(data, title="Model minus random subspace of the same rank, against d_s / d_v").encode(
        x=alt.X("ratio:Q", scale=alt.Scale(type="log"), title="d_s / d_v"),
        y=alt.Y("sub:Q", title="r(A, A_eff) − r(A, A_rand), mean over inputs"),
        color=alt.Color("member:N", title="member"),
        detail="model:N",
        tooltip=["model", "d_v", "d_s", "ratio", "sub", "val", "inputs", "entropy"],
    )
    # the points are a layer of their own: on a line drawn with points the dash legend loses its dashes
    dash = alt.StrokeDash("kind:N", sort=["pre-trained", "untrained twin"], legend=dash_legend(title="model"))
    line = base.mark_line().encode(strokeDash=dash).properties(width=460, height=260)
    points = base.mark_point(filled=True, size=20)
    zero = alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(color="grey").encode(y="y:Q")
    layers = [zero, line, points]
    if ratio_range is not None and all(math.isfinite(x) for x in ratio_range):
        band = pd.DataFrame({"lo": [ratio_range[0]], "hi": [ratio_range[1]]})
        layers.insert(0, alt.Chart(band).mark_rect(opacity=0.08, color="navy").encode(x="lo:Q", x2="hi:Q"))
    return alt.layer(*layers)


def threshold_chart(table: pd.DataFrame, shares: tuple[float, ...] = ()) -> alt.LayerChart:
    """Each model's share of (head, input) pairs unique at d_s = d_v + 1 against its d_v: pre-trained members
    as circles, twins as faint squares beside them; ``shares``: horizontal rules at the rule's shares (C2's,
    passed by the chapter). ``table``: rows of ``threshold_table``."""
    table = _named(table)
    data = table.assign(kind=table.twin.map({True: "untrained twin", False: "pre-trained"}))
    points = (
        alt.Chart(data, title="Share of heads with a single solution at d_s = d_v + 1, per model")
        .mark_point(size=70, filled=True)
        .encode(
            x=alt.X("d_v:O", title="head width d_v", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("unique_share:Q", scale=alt.Scale(domain=[0, 1]), title="share unique at d_s = d_v + 1"),
            color=alt.Color("member:N", title="member"),
            shape=alt.Shape("kind:N", sort=["pre-trained", "untrained twin"], title=None),
            opacity=alt.condition(alt.datum.twin, alt.value(0.45), alt.value(1.0)),
            xOffset="kind:N",
            tooltip=["model", "d_v", "width", "unique_share", "alternatives_at_dv2", "sentences"],
        )
        .properties(width=320, height=220)
    )
    rules = alt.Chart(pd.DataFrame({"share": list(shares)})).mark_rule(color="crimson", strokeDash=[4, 3])
    return alt.layer(points, rules.encode(y="share:Q")) if shares else alt.layer(points)


def learning_chart(table: pd.DataFrame) -> alt.LayerChart:
    """Each member's held-out masked-token accuracy against the tokens it has seen (millions; 0 is its
    untrained twin), the unigram baseline as a dashed grey rule. ``table``: rows of
    ``pretrain.members.learning_table``."""
    data = _named(table).assign(millions=table.tokens_seen / 1e6).round(4)
    line = (
        alt.Chart(data, title="Held-out masked-token accuracy while pre-training (0 tokens: the untrained twin)")
        .mark_line(point=alt.OverlayMarkDef(size=20))
        .encode(
            x=alt.X("millions:Q", title="tokens seen (millions)"),
            y=alt.Y("accuracy:Q", title="held-out accuracy", axis=alt.Axis(format="%")),
            color=alt.Color("member:N", title="member"),
            tooltip=["member", "d_v", "step", "tokens_seen", "accuracy", "loss", "unigram"],
        )
        .properties(width=460, height=240)
    )
    base = data.groupby("member", as_index=False).unigram.first().assign(label="unigram baseline")
    rule = alt.Chart(base).mark_rule(color="grey", strokeDash=[4, 3]).encode(y="mean(unigram):Q", tooltip=["label"])
    return alt.layer(line, rule)


def design_chart(members: pd.DataFrame) -> alt.LayerChart:
    """The inputs each member reads: the lengths d_s of its ratio grid against its head width d_v, beside the
    review's threshold d_s = d_v + 2 (alternatives first appear there) and the paper's d_s = d_v + 1.
    ``members``: one row per (member, d_s) with columns member, d_v, d_s, ratio."""
    members = _named(members)
    points = (
        alt.Chart(members, title="The inputs of each member: d_s against d_v, beside the thresholds")
        .mark_point(filled=True, size=50)
        .encode(
            x=alt.X("d_v:Q", scale=alt.Scale(type="log", base=2, domain=[8, 128]), title="head width d_v"),
            y=alt.Y("d_s:Q", scale=alt.Scale(type="log", base=2), title="input length d_s (tokens)"),
            color=alt.Color("member:N", title="member"),
            tooltip=["member", "d_v", "d_s", "ratio"],
        )
        .properties(width=360, height=240)
    )
    lines = pd.DataFrame(
        [{"d_v": d, "d_s": d + k, "threshold": t} for d in (8, 128) for k, t in ((1, "d_v + 1"), (2, "d_v + 2"))]
    )
    rule = (
        alt.Chart(lines)
        .mark_line(color="crimson")
        .encode(x="d_v:Q", y="d_s:Q", strokeDash=alt.StrokeDash("threshold:N", title="threshold"))
    )
    return alt.layer(rule, points)


def training_chart(table: pd.DataFrame) -> alt.HConcatChart:
    """During pre-training, per member followed (one per d_v): left, C4's D_sub (model minus random subspace,
    mean over inputs with d_s >= d_v + 2) with its 95% interval against tokens seen (0: the untrained twin), 0
    as a grey rule; right, the sink: the mean attention on [CLS] (solid) and on the final [SEP] (dashed), in
    units of the uniform share, 1 as a grey rule. ``table``: rows of ``studies.head_width.training_curves``."""
    data = _named(table).assign(millions=table.tokens_seen / 1e6).round(4)
    x = alt.X("millions:Q", title="tokens seen (millions)")
    color = alt.Color("member:N", title="member")
    base = alt.Chart(data).encode(x=x, color=color)
    band = base.mark_errorbar().encode(y=alt.Y("low:Q", title="D_sub = r(A, A_eff) − r(A, A_rand)"), y2="high:Q")
    line = base.mark_line(point=alt.OverlayMarkDef(size=20)).encode(
        y="d_sub:Q", tooltip=["member", "d_v", "tokens_seen", "d_sub", "low", "high"]
    )
    zero = alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(color="grey").encode(y="y:Q")
    left = alt.layer(zero, band, line).properties(width=240, height=220, title="C4's offset while training")
    sink = data.melt(id_vars=["member", "d_v", "millions"], value_vars=["cls", "sep"], var_name="token")
    sink = sink.assign(token=sink.token.map({"cls": "[CLS]", "sep": "final [SEP]"}))
    right_base = alt.Chart(sink).encode(x=x, color=color)
    # the points are a layer of their own: on a line drawn with points the dash legend strokes its symbols in
    # transparent, the same for [CLS] and [SEP]
    sink_y = alt.Y("value:Q", title="attention on the token (× uniform share)")
    lines = right_base.mark_line().encode(
        y=sink_y,
        strokeDash=alt.StrokeDash("token:N", legend=dash_legend(title="token")),
        tooltip=["member", "token", "millions", "value"],
    )
    points = right_base.mark_point(filled=True, size=20).encode(
        y=sink_y, detail="token:N", tooltip=["member", "token", "millions", "value"]
    )
    one = alt.Chart(pd.DataFrame({"y": [1.0]})).mark_rule(color="grey").encode(y="y:Q")
    right = alt.layer(one, lines, points).properties(width=240, height=220, title="The attention sink while training")
    return alt.hconcat(left, right).resolve_scale(color="shared")
