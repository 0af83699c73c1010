"""The interval behind each verdict, next to the threshold its rule compares it with."""

from __future__ import annotations

import math
from collections.abc import Sequence

import altair as alt
import pandas as pd

COLOURS = {
    "holds": "#2a9d8f",
    "partly holds": "#e9c46a",
    "fails": "#d62828",
    "inconclusive": "#8d99ae",
    "not testable on this model": "#adb5bd",
    "not run in this build": "#e9ecef",
}


def _rows(v: dict) -> list[dict]:
    """One row per interval: a compound claim's parts (its own interval repeats one of theirs), else the claim."""
    out = []
    for p in v.get("parts") or [v]:
        ci = p.get("ci95")
        if p.get("estimate") is None or ci is None:
            continue
        if not all(isinstance(b, (int, float)) and math.isfinite(b) for b in ci):  # no interval: the point alone
            ci = (p["estimate"], p["estimate"])
        out.append(
            {
                "quantity": p["claim"],
                "verdict": p["verdict"],
                "estimate": p["estimate"],
                "low": ci[0],
                "high": ci[1],
                "threshold": p.get("threshold"),
                "reason": p["reason"],
            }
        )
    return out


def verdict_chart(verdicts: Sequence[dict], width: int = 420) -> alt.VConcatChart | alt.Chart:
    """One small panel per measured quantity of the given verdicts (``Verdict.to_json()`` dicts): the
    estimate, its 95% interval (bar) and the rule's threshold (dashed), coloured by the verdict; each panel
    has its own axis, since a rate and a difference do not share one."""
    rows = [r for v in verdicts for r in _rows(v)]
    if not rows:
        return alt.Chart(pd.DataFrame({"text": ["no interval to show"]})).mark_text().encode(text="text:N")
    panels = []
    for r in rows:
        df = pd.DataFrame([r])
        lo = min(r["low"], r["threshold"] if r["threshold"] is not None else r["low"])
        hi = max(r["high"], r["threshold"] if r["threshold"] is not None else r["high"])
        pad = (hi - lo) * 0.15 or 0.05
        scale = alt.Scale(domain=[lo - pad, hi + pad], nice=False)
        x = alt.X("estimate:Q", title=None, scale=scale)
        colour = alt.Color(
            "verdict:N", scale=alt.Scale(domain=list(COLOURS), range=list(COLOURS.values())), legend=None
        )
        tip = [
            "quantity:N",
            "verdict:N",
            alt.Tooltip("estimate:Q", format=".3g"),
            alt.Tooltip("low:Q", format=".3g"),
            alt.Tooltip("high:Q", format=".3g"),
            "reason:N",
        ]
        base = alt.Chart(df)
        layers = [
            base.mark_rule(strokeWidth=3).encode(
                x=alt.X("low:Q", title=None, scale=scale), x2="high:Q", color=colour, tooltip=tip
            ),
            base.mark_point(filled=True, size=70).encode(x=x, color=colour, tooltip=tip),
        ]
        if r["threshold"] is not None:
            layers.append(
                alt.Chart(pd.DataFrame({"t": [r["threshold"]]}))
                .mark_rule(strokeDash=[4, 3], color="black")
                .encode(x=alt.X("t:Q", scale=alt.Scale(domain=[lo - pad, hi + pad], nice=False)))
            )
        panels.append(
            alt.layer(*layers).properties(
                width=width,
                height=22,
                title=alt.Title(f"{r['quantity']} — {r['verdict']}", fontSize=11, anchor="start"),
            )
        )
    return alt.vconcat(*panels, spacing=6).properties(
        title=alt.Title(
            "Each verdict's interval (bar: 95%, dot: estimate) and its rule's threshold (dashed)", anchor="start"
        )
    )
