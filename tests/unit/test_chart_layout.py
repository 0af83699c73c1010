"""Charts as a reader sees them, rendered to SVG without a browser (vl-convert): the token heatmaps fit the
page's 688 px output column on a 64-token input, their token labels are thinned so they do not overlap, and
a control is offered only where moving it changes the data."""

import re
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
import vl_convert as vlc

from identifiability.charts import effective as eff_charts
from identifiability.charts import identity as id_charts
from identifiability.charts import nullspace as ns_charts
from identifiability.charts.render import label_stride, token_axis

OUTPUT_AREA = 688  # px: the output column of a chapter page at 1280 px (the browser test checks the pages)
N = 64
TOKENS = [f"w{i}" for i in range(N)]


def svg_of(chart) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return vlc.vegalite_to_svg(chart.to_dict())


def width_of(svg: str) -> float:
    return float(re.search(r'<svg[^>]* width="([\d.]+)"', svg).group(1))


def token_labels(svg: str) -> list[str]:
    return re.findall(r">(\d+ w\d+)</text>", svg)


@pytest.fixture(scope="module")
def attention():
    g = torch.Generator().manual_seed(0)
    return torch.softmax(torch.randn(2, 2, N, N, generator=g, dtype=torch.float64), -1)


def test_label_stride_keeps_labels_apart():
    assert label_stride(10, 300) == 1 and label_stride(10, None) == 1
    for n, px in ((64, 220), (39, 180), (200, 560)):
        k = label_stride(n, px)
        assert px / -(-n // k) >= 11 > px / -(-n // max(1, k - 1))  # the smallest stride that keeps 11 px


def test_token_axis_thins_labels_and_keeps_them_all_when_there_is_room():
    assert "%" not in token_axis(TOKENS[:10], "key", 300).labelExpr
    assert "% 4 == 0" in token_axis(TOKENS, "key", 220).labelExpr


def test_head_viewer_fits_and_its_labels_do_not_overlap(attention):
    svg = svg_of(eff_charts.head_viewer([(TOKENS, attention.float(), (0.9 * attention).float())]))
    assert width_of(svg) <= OUTPUT_AREA
    labels = token_labels(svg)
    # query axis of the first panel + key axes of three panels, each thinned to at most 180 / 9 labels
    assert 0 < len(labels) <= 4 * (180 // 9 + 1)
    assert "0 w0" in labels and "1 w1" not in labels


def test_alternative_viewer_fits_and_shows_tokens_on_hover(attention):
    a = attention[0, 0]
    alts = {"paper's construction": a, "largest TV (LP)": a.flip(1), "max-entropy (realisable, §4)": a}
    chart = ns_charts.alternative_viewer(a, alts, torch.randn(N, 8, dtype=torch.float64), TOKENS)
    svg = svg_of(chart)
    assert width_of(svg) <= OUTPUT_AREA
    assert len(token_labels(svg)) <= 5 * (220 // 11 + 1)  # key axes of 3 panels, query axes of 2
    tips = [t["field"] for panel in chart.to_dict()["concat"][:3] for t in panel["encoding"]["tooltip"]]
    assert tips.count("query") == 3 and tips.count("key") == 3  # hover shows the tokens, not only positions


def test_dimensions_chart_has_no_head_controls_and_fits():
    rows = [
        {"d_s": d, "layer": layer, "head": h, "rank_T": min(d, 32), "dim_LN_T": max(0, d - 32),
         "dim_LN_T1": max(0, d - 33)}
        for d in (8, 32, 33, 34, 64, 256) for layer in (1, 2) for h in range(3)
    ]  # fmt: skip
    chart = ns_charts.dimensions_chart(pd.DataFrame(rows), 32)
    assert "bind" not in str(chart.to_dict())
    assert width_of(svg_of(chart)) <= OUTPUT_AREA


def _views_by_option(chart, measure: str) -> dict[str, list]:
    """What each option of the chart's one dropdown shows: its rows' ``measure`` values, as the chart's own
    filter selects them (the dropdown's field equal to the option)."""
    spec = chart.to_dict()
    (param,) = [p for p in spec["params"] if "bind" in p]
    rows = next(iter(spec["datasets"].values()))
    return {
        o: sorted((r["layer"], r.get("offset", 0), r[measure]) for r in rows if r[param["name"]] == o)
        for o in param["bind"]["options"]
    }


def test_identity_charts_offer_one_probe_menu_whose_every_option_changes_the_view():
    """Separate loss and lookup menus were dead in some views of the others (with the identity map chosen,
    the loss menu changed nothing): one menu over the probes, identical probes merged into one option."""
    layers, lift = np.arange(3), {"naive": 0, "linear": 0.3, "mlp": 0.6}
    rows = [
        {"mapping": m, "loss": "none" if m == "naive" else lo, "lookup": lk, "layer": int(la), "offset": k,
         "share": 0.1 * k + 0.01 * la + (0.05 if lk == "l2" else 0) + lift[m], "chance": 0.1}
        for m in ("naive", "linear", "mlp") for lo in ("cos", "l2") for lk in ("cos", "l2") for la in layers
        for k in (-1, 1)
    ]  # fmt: skip
    same = pd.DataFrame(rows).drop_duplicates()
    same.loc[(same.mapping == "mlp") & (same.loss == "l2"), "share"] += 0.2  # the loss matters for the MLP only
    chart = id_charts.neighbour_chart(same, "t")
    views = _views_by_option(chart, "share")
    assert [p["name"] for p in chart.to_dict()["params"]] == ["probe"]
    assert set(views) == {
        "identity map, cos lookup", "identity map, l2 lookup",
        "linear map, l2/cos loss, cos lookup", "linear map, l2/cos loss, l2 lookup",
        "mlp map, l2 loss, cos lookup", "mlp map, cos loss, cos lookup",
        "mlp map, l2 loss, l2 lookup", "mlp map, cos loss, l2 lookup",
    }  # fmt: skip
    assert chart.to_dict()["params"][0]["value"] == "linear map, l2/cos loss, cos lookup"
    shown = list(views.values())
    assert all(v for v in shown) and all(a != b for i, a in enumerate(shown) for b in shown[i + 1 :])
    # merged options that are no product of values are each named
    odd = same[same.mapping != "mlp"].copy()
    odd.loc[odd.mapping == "linear", "share"] = odd.loc[odd.mapping == "linear", "share"] - 0.3
    options = set(_views_by_option(id_charts.neighbour_chart(odd, "t"), "share"))
    assert "identity map, cos lookup = linear map, l2 loss, cos lookup = linear map, cos loss, cos lookup" in options


def test_a_probe_menu_with_one_option_left_is_no_menu():
    rows = [
        {"mapping": "linear", "loss": lo, "lookup": lk, "layer": la, "rate": 0.5 + 0.1 * la, "chance": 0.1,
         "series": "a"}
        for lo in ("cos", "l2") for lk in ("cos", "l2") for la in range(3)
    ]  # fmt: skip
    spec = id_charts.overlay_chart(pd.DataFrame(rows), "t").to_dict()
    assert "bind" not in str(spec)
    assert {r["probe"] for r in next(iter(spec["datasets"].values()))} == {"linear map, l2/cos loss, l2/cos lookup"}
