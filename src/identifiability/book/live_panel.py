"""One sentence, every view: raw attention, effective attention and Hidden Token Attribution.

``studies.explore.sentence_views`` computes the three maps and ``maps_chart`` draws them (the chapter's
chart and the panel's use the same function); ``sentence_panel`` wraps them in an ipywidgets panel for live
notebooks (type a sentence, press Enter). A static page cannot run Python callbacks: the book's page shows
the panel as it was when the book was built (``identifiability.book.render.page_version`` renders the widgets'
saved state), with the chart's layer slider and head dropdown working offline.
"""

from __future__ import annotations

import html

import torch

from ..charts.explore import attention_explorer
from ..charts.render import VEGALITE_MIME
from ..models.loaded_model import LoadedModel
from ..studies.explore import HTA_TITLE, sentence_views

HTA_AXES = ("input token j", "hidden token i")  # (x, y): row i is hidden token i, column j input token j
# The maps' values in hundredths, finer than the colour steps a heat map shows apart: the panel's saved chart
# stays small (~75 kB for 13 tokens), and chapter 8's chart is half the gzip bytes it took in thousandths
PANEL_DIGITS = 2


def maps_chart(tokens: list[str], maps: dict[str, torch.Tensor], title: str, digits: int = PANEL_DIGITS):
    """The explorer of a ``SentenceViews``' maps under one layer slider and head dropdown: attention maps
    with query/key axes, the HTA map with hidden-token/input-token axes. ``title``: the sentence (wrapped
    over lines of the chart's width)."""
    hta_maps = [k for k in maps if k.startswith(HTA_TITLE)]
    return attention_explorer(
        maps,
        tokens,
        title=title,
        digits=digits,
        axis_titles={k: HTA_AXES for k in hta_maps},
        value_names={k: "contribution c" for k in hta_maps},
    )


def sentence_chart(lm: LoadedModel, text: str, digits: int = PANEL_DIGITS, **kwargs):
    """:func:`maps_chart` of one sentence; ``kwargs`` go to :func:`~identifiability.studies.explore.sentence_views`."""
    views = sentence_views(lm, text, **kwargs)
    return maps_chart(views.tokens, views.maps, text, digits=digits)


def sentence_panel(lm: LoadedModel, text: str = "The cat sat on the mat because it was warm.", **kwargs):
    """An ipywidgets panel: a text box (press Enter to analyse) above the three maps of the sentence.

    The chart is put into the panel's Output widget as its state (``out.outputs``) rather than displayed
    inside ``with out:``: Jupyter draws it the same way, and a notebook executor (nbclient, under papermill)
    then has no captured output to send back to the kernel; that send can leave it waiting forever for
    the cell's reply (jupyter/nbclient#312). The notebook saves the panel with its widget state; keep the
    starting sentence short so the saved chart stays small (:data:`PANEL_DIGITS`).
    """
    import ipywidgets as w

    kwargs.setdefault("digits", PANEL_DIGITS)
    box = w.Text(value=text, description="sentence", continuous_update=False, layout=w.Layout(width="95%"))
    status = w.HTML()
    out = w.Output()

    def analyse(_=None):
        status.value = "<i>computing…</i>"
        try:
            panel.chart = sentence_chart(lm, box.value, **kwargs)
        except ValueError as e:  # e.g. an empty sentence: say so, keep the panel and the last chart
            status.value = f"<b>{html.escape(str(e))}</b>"
            return
        status.value = ""
        data = {VEGALITE_MIME: panel.chart.to_dict(), "text/plain": f"<chart of {box.value!r}>"}
        out.outputs = ({"output_type": "display_data", "data": data, "metadata": {}},)

    panel = w.VBox([box, status, out])
    panel.analyse = analyse  # for tests and for a button of the reader's own
    box.observe(analyse, names="value")
    analyse()
    return panel
