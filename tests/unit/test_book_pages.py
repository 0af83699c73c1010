"""What a chapter's page shows, from hand-made notebooks (no kernel): the live widget panel of chapter 8 as
static HTML without the widget manager, tables in a labelled scroll box, and the explorer chart of chapter 8
(its axes, its tooltips, its data, its width on the page)."""

import re

import pandas as pd
import pytest
import torch
import vl_convert as vlc

from identifiability.book import live_panel
from identifiability.book import render as book
from identifiability.charts.explore import ATTENTION_AXES, attention_explorer

SENTENCE = "The cat sat on the <mat> because it was warm."
SPEC = {"mark": "rect", "data": {"values": [{"a": 1}]}, "encoding": {"x": {"field": "a", "type": "ordinal"}}}
PAGE_WIDTH = 688  # the output column of a desktop page


def _model(name: str, state: dict, module: str = "@jupyter-widgets/controls") -> dict:
    return {"model_module": module, "model_module_version": "2.0.0", "model_name": name, "state": state}


def _widget_notebook() -> dict:
    """A notebook as nbclient leaves it after ``panel`` (live_panel.sentence_panel) ran: a widget-view output
    and the widgets' state (VBox[Text, HTML, Output holding a chart]) in the notebook's metadata."""
    state = {
        "layout0": _model("LayoutModel", {"width": "95%"}, "@jupyter-widgets/base"),
        "box0": _model("TextModel", {"value": SENTENCE, "description": "sentence", "layout": "IPY_MODEL_layout0"}),
        "status0": _model("HTMLModel", {"value": "<i>status line</i>"}),
        "out0": _model(
            "OutputModel",
            {
                "outputs": [
                    {
                        "output_type": "display_data",
                        "metadata": {},
                        "data": {"application/vnd.vegalite.v5+json": SPEC, "text/plain": "alt.ConcatChart(...)"},
                    },
                    {"output_type": "stream", "name": "stdout", "text": "a & b\n"},
                    {"output_type": "stream", "name": "stderr", "text": "progress 10%\n"},
                ]
            },
            "@jupyter-widgets/output",
        ),
        "panel0": _model("VBoxModel", {"children": ["IPY_MODEL_box0", "IPY_MODEL_status0", "IPY_MODEL_out0"]}),
    }
    view = {"model_id": "panel0", "version_major": 2, "version_minor": 0}
    return {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {},
                "source": "panel",
                "outputs": [
                    {
                        "output_type": "execute_result",
                        "execution_count": 1,
                        "metadata": {},
                        "data": {"application/vnd.jupyter.widget-view+json": view, "text/plain": "VBox(...)"},
                    }
                ],
            }
        ],
        "metadata": {
            "kernelspec": {"name": "python3"},
            "widgets": {"application/vnd.jupyter.widget-state+json": {"state": state, "version_major": 2}},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_the_widget_panel_is_drawn_as_static_html_without_the_widget_manager():
    nb = book.page_version(_widget_notebook())
    data = nb["cells"][0]["outputs"][0]["data"]
    assert "application/vnd.jupyter.widget-view+json" not in data
    assert "widgets" not in nb["metadata"]  # myst-nb loads the widget manager only for widget state
    page = data["text/html"]
    # the text box: a disabled input holding the sentence (escaped), labelled with its description
    field = re.search(r'<input id="([^"]+)" type="text" value="([^"]*)" disabled', page)
    assert field and field.group(2) == "The cat sat on the &lt;mat&gt; because it was warm."
    assert f'<label for="{field.group(1)}">sentence</label>' in page
    assert "<i>status line</i>" in page  # the HTML widget as it is
    assert page.count('class="vega-chart"') == 1 and '"mark": "rect"' in page  # the Output widget's chart
    assert "<pre>a &amp; b\n</pre>" in page and "progress" not in page  # stdout stays, stderr does not
    # in the panel's order: text box, status, chart
    assert page.index("<input") < page.index("status line") < page.index("vega-chart")
    assert "output-table-scroll" not in page  # no table in it, no scroll box


def test_a_widget_missing_from_the_state_falls_back_to_its_text():
    nb = _widget_notebook()
    del nb["metadata"]["widgets"]
    data = book.page_version(nb)["cells"][0]["outputs"][0]["data"]
    assert data == {"text/plain": "VBox(...)"}


def _html_cell(html: str) -> dict:
    out = {"output_type": "execute_result", "execution_count": 1, "metadata": {}}
    out["data"] = {"text/html": html, "text/plain": "table"}
    return {"cell_type": "code", "metadata": {}, "source": "df", "outputs": [out]}


@pytest.mark.parametrize("kind", ["DataFrame", "Styler"])
def test_a_table_output_scrolls_sideways_in_one_labelled_box(kind):
    df = pd.DataFrame({f"a rather long column name {i}": [0.5, 1.5] for i in range(12)})
    table = df._repr_html_() if kind == "DataFrame" else df.style.format("{:.1f}").to_html()
    nb = {"cells": [_html_cell(table), _html_cell("<b>no table here</b>")], "metadata": {}}
    nb = book.page_version(book.page_version(nb))  # a second pass does not wrap it again
    page = nb["cells"][0]["outputs"][0]["data"]["text/html"]
    assert page.count('class="output-table-scroll"') == 1
    assert 'role="region"' in page and 'tabindex="0"' in page and "overflow-x:auto" in page
    assert 'aria-label="Table; scrolls sideways where it is wider than the page"' in page
    assert page == book.TABLE_SCROLL + table + "</div>"
    assert nb["cells"][1]["outputs"][0]["data"]["text/html"] == "<b>no table here</b>"


def _maps(n: int, layers: int = 2, heads: int = 3) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    a = torch.softmax(torch.randn(layers, heads, n, n, generator=g) * 3, -1)
    return {
        "raw attention A": a,
        "effective attention": a - 0.1,
        "HTA contribution c (estimate)": torch.softmax(torch.randn(layers, n, n, generator=g), -1),
    }


def test_the_hta_panel_is_labelled_hidden_and_input_tokens():
    tokens = ["[CLS]", "the", "cat", "sat", "[SEP]"]
    spec = live_panel.maps_chart(tokens, _maps(5), title="the cat sat").to_dict()
    panels = {p["title"]: p["encoding"] for p in spec["concat"]}
    for name in ("raw attention A", "effective attention"):
        enc = panels[name]
        assert (enc["x"]["axis"]["title"], enc["y"]["axis"]["title"]) == ATTENTION_AXES
    hta = panels["HTA contribution c (estimate)"]
    assert (hta["x"]["axis"]["title"], hta["y"]["axis"]["title"]) == ("input token j", "hidden token i")
    assert [t["title"] for t in hta["tooltip"]][:2] == ["hidden token i", "input token j"]
    assert [t["title"] for t in panels["raw attention A"]["tooltip"]][:2] == ["query", "key"]


def _drawn(spec: dict) -> tuple[float, dict[str, list[str]]]:
    """Width in px of the chart as vega draws it, and the description of each drawn cell by panel order."""
    svg = vlc.vegalite_to_svg(spec)
    width = float(re.search(r'<svg[^>]* width="([\d.]+)"', svg).group(1))
    return width, re.findall(r'aria-label="(k: [^"]*)"', svg)


def test_the_browser_decodes_the_shipped_values_and_tooltips_show_tokens():
    tokens = ["[CLS]", "the", "cat", "sat", "[SEP]"]
    maps = _maps(5)
    _, cells = _drawn(live_panel.maps_chart(tokens, maps, title="the cat sat").to_dict())
    assert len(cells) == 3 * 5 * 5
    # the default view: the last layer, head 0
    want = [maps["raw attention A"][-1, 0], maps["effective attention"][-1, 0]]
    want.append(maps["HTA contribution c (estimate)"][-1])
    for p, m in enumerate(want):
        for q in range(5):
            for k in range(5):
                text = cells[p * 25 + q * 5 + k]
                fields = dict(part.split(": ", 1) for part in text.split("; "))
                assert (int(fields["q"]), int(fields["k"])) == (q, k)
                value = float(next(v for f, v in fields.items() if f in ("weight", "contribution c")).replace("−", "-"))
                assert value == pytest.approx(float(m[q, k]), abs=0.6 * 10.0**-live_panel.PANEL_DIGITS)  # as shipped
                row, col = ("hidden token i", "input token j") if p == 2 else ("query", "key")
                assert fields[row] == f"{q} {tokens[q]}" and fields[col] == f"{k} {tokens[k]}"


@pytest.mark.parametrize("token", ["bushfire", "internationalization"])
def test_two_panels_of_20_tokens_fit_the_page_column(token):
    tokens = ["[CLS]", *[token] * 18, "[SEP]"]
    maps = _maps(20, layers=6, heads=12)
    chart = attention_explorer({k: maps[k] for k in list(maps)[1:]}, tokens, title="a sentence")
    width, cells = _drawn(chart.to_dict())
    assert cells and width < PAGE_WIDTH


def test_the_panel_is_saved_with_its_chart_and_its_page_shows_it(tiny_lm):
    """The panel puts its chart into the Output widget's state (no kernel needed, nothing for an executor to
    send back), so the widget state a notebook saves holds the chart, and the page draws it from there."""
    from ipywidgets.embed import dependency_state

    panel = live_panel.sentence_panel(tiny_lm, "A short sentence.", hta_mode="estimate", probes=2)
    out = panel.children[2]
    assert [o["data"]["application/vnd.vegalite.v5+json"] for o in out.outputs] == [panel.chart.to_dict()]
    panel.children[0].value = "Another sentence about the weather."
    assert len(out.outputs) == 1 and "weather" in str(out.outputs[0]["data"])
    nb = _widget_notebook()
    nb["metadata"]["widgets"][book.WIDGET_STATE]["state"] = dependency_state(panel)
    nb["cells"][0]["outputs"][0]["data"][book.WIDGET_VIEW]["model_id"] = panel.model_id
    page = book.page_version(nb)["cells"][0]["outputs"][0]["data"]["text/html"]
    assert 'value="Another sentence about the weather."' in page and page.count('class="vega-chart"') == 1
    assert "hidden token i" in page  # the chart of the panel, HTA axes and all
