"""Each verdict as a page shows it in a chart: one row per part of a compound claim and one for the headline
verdict, each with its estimate, 95% interval and the rule's threshold, coloured by its outcome, so the
chart and the verdict's sentence always agree."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

import altair as alt
import pandas as pd

from ..verdicts.claims import load_claims
from ..verdicts.core import Verdict, claim_outcome, verdict_label
from .render import plain_notation

COLOURS = {
    "holds": "#2a9d8f",
    "partly holds": "#e9c46a",
    "fails": "#d62828",
    "inconclusive": "#8d99ae",
    "not testable on this model": "#adb5bd",
    "not run in this build": "#e9ecef",
}


def _chart_text(text: str) -> str:
    """Text for a chart, which typesets no math: 'd_s >= d_v + 2' -> 'dₛ ≥ dᵥ + 2'."""
    return plain_notation(text.replace("$", "").replace("`", "").replace(">=", "≥").replace("<=", "≤"))


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _row(p: dict, title: str, headline: bool) -> dict:
    ci = p.get("ci95")
    est = p.get("estimate") if _finite(p.get("estimate")) else None
    if est is not None and not (ci and all(_finite(b) for b in ci)):
        ci = (est, est)  # no interval: the point alone
    q = p.get("estimate_of") or {}
    return {
        "claim": p["claim"],  # the verdict's id or its part's ('C4.decrease'): the browser check reads it
        "title": title,
        "headline": headline,
        "verdict": p["verdict"],
        "estimate": est,
        "low": None if est is None else ci[0],
        "high": None if est is None else ci[1],
        "threshold": p.get("threshold") if _finite(p.get("threshold")) else None,
        "measures": _chart_text(q.get("words", "")),
        "reason": _chart_text(p.get("reason", "")),
    }


def _headline(v: dict, claim_text: str = "") -> str:
    """A headline panel's title: the claim's id, the claim in words, then its outcome ('C22: the claim that raw
    attention weights are a poor guide ... fails'), so that a red 'fails' reads as the claim's and never as the
    measure's; without the claim's text, 'C22: the claim fails'."""
    said = _chart_text(claim_outcome(v, claim_text).replace("**", ""))
    return f"{v['claim']}: {said[:1].lower() + said[1:]}"


def rows(v: dict, claim_text: str = "") -> list[dict]:
    """A verdict's rows (``Verdict.to_json()``): each of its parts, then the headline with the claim's own
    outcome (:func:`_headline`, with ``claim_text``: the claim in words). A part or headline without a single
    interval (judged per layer, or nothing measured) still has its row, which says so."""
    out = [_row(p, f"{p['claim'].replace('.', ' · ', 1)} — {verdict_label(p)}", False) for p in v.get("parts") or ()]
    return out + [_row(v, _headline(v, claim_text), True)]


# what the colours say: the claim's outcome under its rule (a claim that a measure is a poor guide fails when the
# measure scores high), not whether the estimate is large
COLOUR_KEY = "colour: the claim's outcome under its rule (red: the claim fails), not the estimate's size"
TWIN_COLOUR = "#9467bd"  # the untrained twin (charts.token_identity draws it in the same colour)


def _twin_row(t: dict | None) -> dict | None:
    """The untrained twin's headline estimate and interval for a panel, under keys of their own: the browser
    check reads a chart's (claim, verdict) rows, and the twin's verdict is not the claim's."""
    if t is None or not _finite(t.get("estimate")):
        return None
    ci = t.get("ci95") if t.get("ci95") and all(_finite(b) for b in t["ci95"]) else (t["estimate"],) * 2
    label = f"untrained twin: {verdict_label(t)}"
    return {"twin_estimate": t["estimate"], "twin_low": ci[0], "twin_high": ci[1], "twin": label}


def _subtitle(r: dict) -> list[str]:
    """What the panel's axis measures and where the rule's line lies (the colour is the claim's outcome under its
    rule, which is not always 'the higher the better')."""
    axis = textwrap.wrap(f"axis: {r['measures']}", 64, max_lines=3, placeholder=" …") if r["measures"] else []
    line = [f"dashed line: the rule's threshold, {r['threshold']:g}"] if r["threshold"] is not None else []
    return axis + line


def _panel(r: dict, width: int, twin: dict | None = None) -> alt.LayerChart | alt.Chart:
    lines = textwrap.wrap(r["title"], 58, max_lines=4, placeholder=" …") if r["headline"] else [r["title"]]
    if r["headline"] and lines[-1].endswith("…"):  # the outcome is the title's point: never cut it off
        lines[-1] = lines[-1].removesuffix(" …") + " … " + verdict_label(r)
    title = alt.Title(
        lines if len(lines) > 1 else lines[0],
        subtitle=_subtitle(r) or alt.Undefined,
        fontSize=12 if r["headline"] else 11,
        fontWeight="bold" if r["headline"] else "normal",
        subtitleFontSize=10,
        subtitleColor="#555",
        anchor="start",
    )
    if r["estimate"] is None:  # nothing to draw on an axis: the reason in words, wrapped to the panel
        lines = textwrap.wrap(r["reason"], 52, max_lines=4, placeholder=" …") or [r["verdict"]]
        data = pd.DataFrame({"text": ["\n".join(lines)], "claim": [r["claim"]], "verdict": [r["verdict"]]})
        text = alt.Chart(data).mark_text(
            align="left", baseline="top", x=0, y=0, fontSize=11, lineHeight=14, lineBreak="\n", color="#333"
        )
        return text.encode(text="text:N").properties(width=width, height=14 * len(lines), title=title)
    lo = min(r["low"], r["threshold"] if r["threshold"] is not None else r["low"])
    hi = max(r["high"], r["threshold"] if r["threshold"] is not None else r["high"])
    if twin is not None:
        lo, hi = min(lo, twin["twin_low"]), max(hi, twin["twin_high"])
    pad = (hi - lo) * 0.15 or 0.05
    scale = alt.Scale(domain=[lo - pad, hi + pad], nice=False)
    colour = alt.Color("verdict:N", scale=alt.Scale(domain=list(COLOURS), range=list(COLOURS.values())), legend=None)
    tip = [
        "title:N",
        alt.Tooltip("estimate:Q", format=".3g"),
        alt.Tooltip("low:Q", format=".3g"),
        alt.Tooltip("high:Q", format=".3g"),
        "reason:N",
    ]
    keep = ("claim", "title", "verdict", "estimate", "low", "high", "reason")
    base = alt.Chart(pd.DataFrame([{k: r[k] for k in keep}]))
    layers = [
        base.mark_rule(strokeWidth=4 if r["headline"] else 3).encode(
            x=alt.X("low:Q", title=None, scale=scale, axis=alt.Axis(tickCount=5)),
            x2="high:Q",
            color=colour,
            tooltip=tip,
        ),
        base.mark_point(filled=True, size=80 if r["headline"] else 60).encode(
            x=alt.X("estimate:Q", title=None, scale=scale, axis=alt.Axis(tickCount=5)), color=colour, tooltip=tip
        ),
    ]
    if twin is not None:  # drawn under the model's, hollow, in the twin's colour
        t = alt.Chart(pd.DataFrame([twin]))
        ttip = ["twin:N", alt.Tooltip("twin_estimate:Q", format=".3g", title="estimate")]
        layers += [
            t.mark_rule(strokeWidth=2, color=TWIN_COLOUR, yOffset=8).encode(
                x=alt.X("twin_low:Q", scale=scale), x2="twin_high:Q", tooltip=ttip
            ),
            t.mark_point(filled=False, size=50, color=TWIN_COLOUR, yOffset=8).encode(
                x=alt.X("twin_estimate:Q", scale=scale), tooltip=ttip
            ),
        ]
    if r["threshold"] is not None:
        layers.append(
            alt.Chart(pd.DataFrame({"t": [r["threshold"]]}))
            .mark_rule(strokeDash=[4, 3], color="black")
            .encode(x=alt.X("t:Q", scale=scale))
        )
    return alt.layer(*layers).properties(width=width, height=30 if twin else 22, title=title)


def verdict_chart(verdicts: Sequence[dict], width: int = 420, twins: Sequence[dict | Verdict] = ()) -> alt.VConcatChart:
    """One small panel per row of the given verdicts (``Verdict.to_json()`` dicts; :func:`rows`): each part
    of a compound claim, then the claim's headline outcome, with the estimate, its 95% interval (bar) and the
    rule's threshold (dashed), coloured by the outcome; each panel has its own axis, since a rate and a
    difference do not share one. ``twins``: the same claims' verdicts on the untrained twin, whose headline
    estimate and interval are drawn under the model's (hollow, purple), beside it and not part of it."""
    by_claim = {t["claim"]: t for t in (t.to_json() if isinstance(t, Verdict) else t for t in twins)}
    texts = {c["id"]: c["claim"] for c in load_claims()}
    panels = [
        _panel(r, width, _twin_row(by_claim.get(v["claim"])) if r["headline"] else None)
        for v in verdicts
        for r in rows(v, texts.get(v["claim"].split(".")[0], ""))
    ]
    subtitle = ["bar: 95% interval, dot: estimate, dashed: the rule's threshold;", COLOUR_KEY]
    if by_claim:
        subtitle[-1] += "; purple, hollow: the untrained twin"
    return alt.vconcat(*panels, spacing=8).properties(
        title=alt.Title(["Each verdict: its parts, then the claim's outcome", *subtitle], anchor="start")
    )
