"""One sentence, every view: raw attention, effective attention and Hidden Token Attribution.

``sentence_maps`` computes the three maps; ``sentence_panel`` wraps them in an ipywidgets panel for live
notebooks (type a sentence, press Enter). A static page cannot run Python callbacks, so the book shows the
Altair chart of a fixed sentence (its layer slider and head dropdown work offline) and explains that the
panel needs a live kernel.
"""

from __future__ import annotations

import torch

from .charts.explore import attention_explorer
from .effective import effective_attention
from .hta import hta
from .loaded_model import LoadedModel
from .trace import out_proj_weights, trace_batch


def sentence_maps(
    lm: LoadedModel, text: str, hta_mode: str = "estimate", probes: int = 16, max_tokens: int = 64
) -> tuple[list[str], dict[str, torch.Tensor]]:
    """Tokens and {title: map} for one sentence.

    Maps: raw and effective attention (L, H, d_s, d_s), and the HTA contributions c of layers 1..L
    (L, d_s, d_s), where row i is hidden token i and column j input token j.
    """
    if not text.strip():
        raise ValueError("type a sentence first")
    tr = trace_batch(lm, [text], max_tokens=max_tokens)[0]
    eff = effective_attention([tr], out_proj_weights(lm))[0]
    c = hta(lm, tr, mode=hta_mode, probes=probes).c[1:].float()
    return tr.tokens, {
        "raw attention A": tr.attentions,
        "effective attention": eff.effective,
        f"HTA contribution c ({hta_mode})": c,
    }


def sentence_chart(lm: LoadedModel, text: str, **kwargs):
    tokens, maps = sentence_maps(lm, text, **kwargs)
    return attention_explorer(maps, tokens, title=text if len(text) < 90 else text[:87] + "…")


def sentence_panel(lm: LoadedModel, text: str = "The cat sat on the mat because it was warm.", **kwargs):
    """An ipywidgets panel: a text box (press Enter to analyse) above the three maps of the sentence."""
    import ipywidgets as w
    from IPython.display import display

    box = w.Text(value=text, description="sentence", continuous_update=False, layout=w.Layout(width="95%"))
    status = w.HTML()
    out = w.Output()

    def analyse(_=None):
        status.value = "<i>computing…</i>"
        try:
            panel.chart = sentence_chart(lm, box.value, **kwargs)
        except ValueError as e:  # e.g. an empty sentence: say so, keep the panel and the last chart
            status.value = f"<b>{e}</b>"
            return
        status.value = ""
        with out:  # captured into the widget only inside a kernel
            out.clear_output(wait=True)
            display(panel.chart)

    panel = w.VBox([box, status, out])
    panel.analyse = analyse  # for tests and for a button of the reader's own
    box.observe(analyse, names="value")
    analyse()
    return panel
