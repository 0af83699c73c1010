"""Chapter 1's text (model and data): the table of the quantities the paper's arguments turn on, and the
sentences that state what the sample shows, from study results of :mod:`identifiability.studies.model_and_data`."""

from __future__ import annotations

import pandas as pd


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
