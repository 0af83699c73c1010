"""Chapter 8's study: one sentence in three views (raw attention, effective attention, HTA)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..effective.projection import effective_attention
from ..hta import hta
from ..models.loaded_model import LoadedModel
from ..models.trace import out_proj_weights, trace_batch
from . import Study, data

HTA_TITLE = "HTA contribution c"  # the start of the HTA map's title in ``SentenceViews.maps``


@dataclass(frozen=True)
class SentenceViews(Study):
    """One sentence's three maps, with the checks the chapter records on them."""

    tokens: list[str]
    max_abs_raw_attention_A: float
    max_abs_effective_attention: float
    max_abs_HTA_contribution_c: float
    hta_rows_sum_to_one: float  # max |sum_j c_ij - 1| over layers and hidden tokens
    # {title: map}: raw and effective attention (L, H, d_s, d_s); HTA contributions c of layers 1..L
    # (L, d_s, d_s), row i hidden token i, column j input token j
    maps: dict[str, torch.Tensor] = data()


def sentence_views(
    lm: LoadedModel, text: str, hta_mode: str = "estimate", probes: int = 16, max_tokens: int = 64
) -> SentenceViews:
    if not text.strip():
        raise ValueError("type a sentence first")
    tr = trace_batch(lm, [text], max_tokens=max_tokens)[0]
    eff = effective_attention([tr], out_proj_weights(lm))[0]
    c = hta(lm, tr, mode=hta_mode, probes=probes).c[1:].float()
    return SentenceViews(
        tokens=tr.tokens,
        max_abs_raw_attention_A=float(tr.attentions.abs().max()),
        max_abs_effective_attention=float(eff.effective.abs().max()),
        max_abs_HTA_contribution_c=float(c.abs().max()),
        hta_rows_sum_to_one=float((c.sum(-1) - 1).abs().max()),
        maps={"raw attention A": tr.attentions, "effective attention": eff.effective, f"{HTA_TITLE} ({hta_mode})": c},
    )


RESULTS = (SentenceViews,)
