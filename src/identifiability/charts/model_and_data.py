"""Charts of the model-and-data chapter (01); its text is in :mod:`identifiability.text.model_and_data`."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd


def length_histogram(lengths: Sequence[int], d_v: int) -> alt.LayerChart:
    """Histogram of sentence lengths in tokens with d_v marked (where non-identifiability can start)."""
    hist = (
        alt.Chart(pd.DataFrame({"tokens": list(lengths)}), title="Sentence length in tokens")
        .mark_bar()
        .encode(
            x=alt.X("tokens:Q", bin=alt.Bin(step=4), title="tokens per sentence (d_s)"),
            y=alt.Y("count():Q", title="sentences"),
        )
    )
    marker = pd.DataFrame({"d_v": [d_v], "t": [f"d_v = {d_v}"]})
    rule = alt.Chart(marker).mark_rule(color="crimson", strokeDash=[4, 3]).encode(x="d_v:Q")
    label = alt.Chart(marker).mark_text(align="left", dx=4, dy=-120, color="crimson").encode(x="d_v:Q", text="t:N")
    return hist + rule + label
