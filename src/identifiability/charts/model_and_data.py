"""Charts of the model-and-data chapter (01)."""

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


def architecture_table(lm) -> pd.DataFrame:
    """The quantities the paper's arguments turn on, one row each (``lm``: a LoadedModel)."""
    return pd.DataFrame(
        [
            ("architecture family", lm.adapter.family),
            ("layers L", lm.n_layers),
            ("heads per layer H", lm.n_heads),
            ("model width d", lm.d_model),
            ("head (value) dimension d_v = d / H", lm.d_v),
            ("feed-forward width", lm.d_ff),
            ("maximum positions", lm.max_positions),
            ("vocabulary size", lm.config.vocab_size),
            ("causal (decoder) attention", "yes" if lm.adapter.causal else "no"),
            ("rebuild check: max relative error", f"{lm.provenance['rebuild_rel_error']:.1e}"),
        ],
        columns=["quantity", "value"],
    )


def lengths_text(r, corpus_name: str) -> str:
    """What the length sample shows (``r``: a studies.model_and_data.CorpusLengths)."""
    words = sum(r.words) / len(r.words)
    return (
        f"**{r.corpus_sentences}** sentences in `{corpus_name}`; a seeded sample of {r.sampled} has "
        f"{words:.1f} words and **{r.mean_tokens:.1f} tokens** on average (special tokens included), "
        f"and **{100 * r.share_longer_than_d_head:.0f}%** of them are longer than $d_v = {r.d_v}$ tokens."
    )


def example_text(r) -> str:
    """The example sentence and its tokens (``r``: a studies.model_and_data.ExampleSentence)."""
    tokens = " ".join(f"`{t}`" for t in r.example_tokens)
    return f"> {r.example}\n\n**{len(r.example_tokens)} tokens:** {tokens}"
