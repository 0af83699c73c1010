"""Charts as a reader sees them, rendered to SVG without a browser (vl-convert): the token heatmaps fit the
page's 688 px output column on a 64-token input, their token labels are thinned so they do not overlap, and
a control is offered only where moving it changes the data."""

import re
import warnings

import altair as alt
import numpy as np
import pandas as pd
import pytest
import torch
import vl_convert as vlc

from identifiability.charts import angle_magnitude as am_charts
from identifiability.charts import context_mixing as hta_charts
from identifiability.charts import effective_attention as eff_charts
from identifiability.charts import narrow, render
from identifiability.charts import nonidentifiability as ns_charts
from identifiability.charts import token_identity as id_charts
from identifiability.charts.render import label_stride, token_axis
from identifiability.text import token_identity as id_text

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
    # query axis of the first panel + key axes of three panels, each thinned to at most 176 / 9 labels
    assert 0 < len(labels) <= 4 * (176 // 9 + 1)
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


# --- what a reader meets on a phone and in chart text (issue 25) --------------------------------------------------

PHONE_AREA = 358  # px: the output area of a chapter page at 390 px


def spec_of(chart) -> dict:
    """The spec as a notebook stores it and a page draws it (through the offline renderer)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return render.plain_titles(chart.to_dict())


def texts_of(spec, key: str | None = None):
    """Every string under a title, subtitle or text key of a spec, data left out."""
    if isinstance(spec, dict):
        for k, v in spec.items():
            if k not in ("datasets", "data"):
                yield from texts_of(v, k if k in ("title", "subtitle", "text") else key)
    elif isinstance(spec, list):
        for v in spec:
            yield from texts_of(v, key)
    elif isinstance(spec, str) and key:
        yield spec


def neighbour_rows() -> pd.DataFrame:
    rows = [
        {"mapping": m, "loss": "none" if m == "naive" else lo, "lookup": lk, "layer": la, "offset": k,
         "share": 0.01 * (la + abs(k)) + (0.02 if lo == "l2" else 0), "chance": 0.05}
        for m in ("naive", "linear") for lo in ("cos", "l2") for lk in ("cos", "l2") for la in range(3)
        for k in (-2, -1, 1, 2)
    ]  # fmt: skip
    return pd.DataFrame(rows).drop_duplicates(["mapping", "loss", "lookup", "layer", "offset"])


def test_chart_text_shows_notation_as_unicode_not_tex():
    assert (
        render.plain_notation("x_{i+k} instead of x_i, e_i^l, d_s = d_v + 1") == "xᵢ₊ₖ instead of xᵢ, eᵢˡ, dₛ = dᵥ + 1"
    )
    assert render.plain_notation("val_loss_last, A_eff") == "val_loss_last, A_eff"  # words keep their underscores
    # chapter 4's title as the notebook passes it
    spec = spec_of(id_charts.neighbour_chart(neighbour_rows(), "Nearest input embedding is x_{i+k} instead of x_i"))
    texts = list(texts_of(spec))
    assert any("xᵢ₊ₖ" in t for t in texts)
    assert not [t for t in texts if "_{" in t or "^{" in t]


def dash_symbols(svg: str, title: str) -> list[str]:
    """The symbol paths of the legend titled ``title`` in a rendered chart."""
    start = svg.index(f"legend titled '{title}'")
    end = svg.find('class="mark-group role-legend"', start)
    return re.findall(r'<path transform="translate\([^)]*\)" d="[^"]*"[^>]*>', svg[start : end if end > 0 else None])


@pytest.mark.parametrize("which", ["separators", "combo", "rate"])
def test_a_dash_legend_shows_its_dashes(which):
    """Solid and dashed lines got two identical filled circles in the legend (chapter 5's lookup)."""
    rows = neighbour_rows().drop(columns="offset").drop_duplicates(["mapping", "loss", "lookup", "layer"])
    rows = rows.rename(columns={"share": "rate"})
    seps = pd.DataFrame(
        [
            {"layer": la, "separator": s, "raw": 0.1 * la, "effective": 0.05 * la}
            for la in (1, 2)
            for s in ("first", "second")
        ]
    )
    splits = pd.concat([rows.assign(split=s, candidates="sentence") for s in ("test", "train")])
    chart, title = {
        "separators": (eff_charts.separator_chart(seps), "attention"),
        "combo": (am_charts.combo_chart(rows, "t"), "lookup"),
        "rate": (id_charts.rate_chart(splits, "t"), "split"),
    }[which]
    symbols = dash_symbols(svg_of(chart), title)
    assert len(symbols) == 2
    dashes = [re.search(r'stroke-dasharray="([^"]*)"', s).group(1) for s in symbols]
    assert dashes[0] != dashes[1]
    for s in symbols:  # drawn: a visible stroke, a line segment rather than a filled dot
        assert re.search(r'stroke="#[0-9a-f]{3,6}"', s) and re.search(r'd="M-?[\d.]+,0L', s)
    assert not render.look_alike_legends(chart.to_dict())


def axis_label_xs(svg: str) -> list[list[float]]:
    """The x positions of the shown labels of each horizontal axis in a rendered chart, per axis."""
    out = []
    for axis in re.findall(r"role-axis-label.*?</g>", svg, flags=re.S):
        shown = re.findall(r'<text[^>]*transform="translate\(([-\d.]+),([-\d.]+)\)[^>]*>([^<]+)</text>', axis)
        if len(shown) > 1 and len({y for _, y, _ in shown}) == 1:
            out.append(sorted(float(x) for x, _, _ in shown))
    return out


def test_context_share_heat_map_labels_do_not_overlap():
    """Chapter 6's heat map of the context share by relative position: 33 offsets on 240 px overlapped."""
    prof = pd.DataFrame(
        [{"layer": la, "offset": o, "context_share": 0.5, "mean_c": 0.1, "share": 0.1 + 0.01 * abs(o)}
         for la in range(1, 7) for o in range(-16, 17)]
    )  # fmt: skip
    svg = svg_of(hta_charts.distance_figure(prof, 15))
    labels = re.findall(r">(≤-16|≥16|-?\d+)</text>", svg)
    assert "≤-16" in labels and "≥16" in labels and "0" in labels
    xs = axis_label_xs(svg)
    assert len(xs) == 2  # both panels' position axes
    assert all(min(b - a for a, b in zip(x, x[1:])) >= 11 for x in xs)


def test_probe_table_shows_counts_as_integers_and_headers_in_words():
    summary = pd.DataFrame(
        [{"mapping": m, "loss": lo, "layer": la, "epochs run": 10 + la, "best epoch": 5 + la,
          "stopped early": la % 2 == 0, "best val loss": 0.1 * la - 1e-5}
         for m in ("linear", "mlp") for lo in ("cos", "l2") for la in range(7)]
    )  # fmt: skip
    overview = (
        summary.groupby(["mapping", "loss"])
        .agg(probes=("layer", "size"), stopped_early=("stopped early", "sum"), epochs_run=("epochs run", "median"),
             best_epoch_min=("best epoch", "min"), best_epoch_max=("best epoch", "max"),
             val_loss_first=("best val loss", "first"), val_loss_last=("best val loss", "last"))
        .round(3)
    )  # fmt: skip
    assert overview.epochs_run.dtype == float  # what the study hands over
    cells = re.findall(r">([^<>]+)</t[hd]>", id_text.probe_table(overview).to_html())
    assert not [c for c in cells if "_" in c]  # no snake_case header
    assert (
        "13" in cells
        and "13.0" not in cells
        and "5–11" in cells
        and "0.600" in cells
        and "0.000" in cells
        and "-0.000" not in cells
    )
    assert not [c for c in cells if re.fullmatch(r"\d+\.0", c)]


def test_search_chart_draws_distances_of_zero_as_markers_with_a_note():
    """Chapter 2's LP line was drawn along a floor at 1e-16: a log axis cannot show 0."""
    search = pd.DataFrame(
        [{"d_s": d, "layer": 1, "head": 0, "lp_tv_mean": 0.0, "me_tv_mean": 0.01 * d if d > 33 else 0.0,
          "search_tv_mean": 0.02 * d if d > 33 else 1e-18} for d in (16, 32, 34, 64)]
    )  # fmt: skip
    spec = spec_of(ns_charts.search_distance_chart(search, 32, "t"))
    lines, zeros, _ = spec["layer"]
    rows = spec["datasets"]
    drawn = {r["kind"] for r in rows[lines["data"]["name"]]}
    at_zero = rows[zeros["data"]["name"]]
    assert not [r for r in rows[lines["data"]["name"]] if r["tv"] <= 1e-12]  # no line along a floor
    assert {r["kind"] for r in at_zero} == {"row-stochastic, LP (paper's set)", "realisable: max-entropy",
                                           "realisable: search"}  # fmt: skip
    assert "row-stochastic, LP (paper's set)" not in drawn
    assert len({(r["d_s"], r["tv"]) for r in at_zero}) == len(at_zero)  # no marker hides another
    assert max(r["tv"] for r in at_zero) < min(r["tv"] for r in rows[lines["data"]["name"]])
    assert "distance 0" in spec["title"]["subtitle"]


def viewer_examples(n_tokens=(39, 39, 40), layers=6, heads=12):
    g = torch.Generator().manual_seed(0)
    out = []
    for n in n_tokens:
        a = torch.softmax(2 * torch.randn(layers, heads, n, n, generator=g), -1)
        out.append(([f"w{i}" for i in range(n)], a, a - 0.05 * torch.randn(layers, heads, n, n, generator=g)))
    return out


def test_head_viewer_stays_within_its_page_budget_and_its_text_is_readable():
    """Chapter 3's default viewer (3 sentences of 39-40 tokens, 6 x 12 heads) was 1.83 MB, 0.63 MB gzip-compressed,
    the largest part of a 1.6 MB (gzip) page; in hundredths it is 1.45 MB, 0.31 MB (measured on the real model)."""
    import gzip
    import json

    chart = eff_charts.head_viewer(viewer_examples())
    spec = spec_of(chart)
    assert render.spec_bytes(chart) < 1_600_000
    assert len(gzip.compress(json.dumps(spec).encode())) < 450_000
    sizes = [v for k, v in _walk(spec) if k.lower().endswith("fontsize")]
    assert sizes and min(sizes) >= 9
    assert spec["usermeta"] == {"narrow": "keep-width"}  # its token labels are thinned for 176 px panels


def _walk(spec):
    if isinstance(spec, dict):
        for k, v in spec.items():
            if k != "datasets":
                yield k, v
                yield from _walk(v)
    elif isinstance(spec, list):
        for v in spec:
            yield from _walk(v)


def fit_in_node(spec: dict, width: int) -> dict:
    """``window.vegaFit(spec, width)`` of the page script, run by Node."""
    import json
    import shutil
    import subprocess

    if not shutil.which("node"):
        pytest.skip("needs Node.js")
    call = f"window.vegaFit({json.dumps(spec)}, {width})"
    script = f"var window = {{}};\n{narrow.FIT_JS}\nprocess.stdout.write(JSON.stringify({call}));"
    return json.loads(subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True).stdout)


def test_a_phone_gets_stacked_views_plot_widths_that_fit_and_wrapped_titles():
    rows = neighbour_rows()
    side_by_side = alt.hconcat(
        alt.Chart(rows).mark_line().encode(x="layer:O", y="share:Q").properties(width=300, title="a " * 40),
        alt.Chart(rows).mark_point().encode(x="layer:O", y="share:Q").properties(width=300),
    )
    fitted = fit_in_node(spec_of(side_by_side), PHONE_AREA)
    assert "hconcat" not in fitted and len(fitted["vconcat"]) == 2
    assert all(v["width"] <= PHONE_AREA - 80 for v in fitted["vconcat"])
    assert isinstance(fitted["vconcat"][0]["title"], list)  # wrapped to the area
    assert fitted["config"]["legend"]["orient"] == "bottom"
    mass = pd.DataFrame([{"layer": 1, "head": 0, "category": "a", "raw": 0.5, "effective": 0.4}])
    faceted = fit_in_node(spec_of(eff_charts.mass_chart(mass, {"a": "A"})), PHONE_AREA)
    assert faceted["columns"] == 1 and "column" not in faceted["facet"] and faceted["spec"]["width"] <= PHONE_AREA - 80
    # a chart labelled for its width is stacked but keeps its widths
    viewer = fit_in_node(spec_of(eff_charts.head_viewer(viewer_examples((8,), 1, 1))), PHONE_AREA)
    assert "vconcat" in viewer and [v["width"] for v in viewer["vconcat"]] == [176, 176, 176]
    # on a desktop page nothing moves
    desktop = fit_in_node(spec_of(side_by_side), OUTPUT_AREA)
    assert "hconcat" in desktop and [v["width"] for v in desktop["hconcat"]] == [300, 300]


def test_token_labels_of_a_single_view_follow_the_width_a_phone_draws():
    """A chart that a narrow page may narrow computes its label stride from the drawn width (Vega's signal)."""
    axis = token_axis(TOKENS, "key", "width")
    assert "ceil(704 / width)" in axis.labelExpr  # 64 tokens x 11 px
    expr = render.sentence_label_expr([TOKENS, TOKENS[:10]], "width", label_px=14)
    assert "[896, 140][sentence] / width" in expr
    # evaluated as the browser would: every 4th of 64 tokens at 220 px, every token of 10 at 220 px
    spec = {
        "data": {"values": [{"k": i} for i in range(N)]},
        "params": [{"name": "sentence", "value": 0}],
        "mark": "tick",
        "encoding": {"x": {"field": "k", "type": "ordinal", "axis": {"labelExpr": expr, "labelOverlap": False}}},
        "width": 220,
    }
    shown = re.findall(r">(w\d+)</text>", vlc.vegalite_to_svg(spec))
    assert shown[:3] == ["w0", "w5", "w10"] and len(shown) == 13  # 14 px apart: every 5th of 64 at 220 px


def test_a_head_viewer_of_one_sentence_has_no_sentence_menu():
    """Each sentence adds about 0.1 MB (gzip) to chapter 3's page; a viewer of one offers no one-option menu."""
    params = spec_of(eff_charts.head_viewer(viewer_examples((36,), 1, 2)))["params"]
    bound = {p["name"] for p in params if "bind" in p}
    assert bound == {"layer", "head"} and "sentence" in {p["name"] for p in params}


def test_a_legend_in_two_columns_takes_one_on_a_phone():
    """Chapter 5's ablation legend (two columns of long labels) was 431 px in a 358 px area."""
    rows = [
        {"ablation": a, "loss": lo, "lookup": lk, "layer": la, "rate": 0.5, "chance": 0.1}
        for a in ("angle only (unit vectors): linear map", "rescaled ×[1/4, 4] at test: identity map")
        for lo in ("cos", "l2") for lk in ("cos", "l2") for la in range(3)
    ]  # fmt: skip
    spec = fit_in_node(spec_of(am_charts.ablation_chart(pd.DataFrame(rows), "t")), PHONE_AREA)
    legend = spec["layer"][0]["encoding"]["color"]["legend"]
    assert legend["columns"] == 1 and legend["labelLimit"] <= PHONE_AREA - 60


def _training_rows() -> pd.DataFrame:
    """Rows as ``studies.head_width.training_curves`` gives them: two members, three checkpoints each."""
    return pd.DataFrame(
        [
            {"member": f"m{d_v}", "d_v": d_v, "tokens_seen": t, "d_sub": 0.01 * k, "low": 0.0, "high": 0.02 * k,
             "cls": 1 + k, "sep": 2 + k}
            for d_v in (16, 32) for k, t in enumerate((0, 1_000_000, 2_000_000))
        ]
    )  # fmt: skip


@pytest.mark.parametrize("which", ["far share", "sink while training"])
def test_every_legend_tells_its_series_apart(which):
    """Two series drew the same mark in their legend: chapter 6's far share ("measured" and "uniform over the
    context", a filled circle each) and chapter 7's attention sink while training ([CLS] and final [SEP], a
    line stroked in transparent each). The book test looks at every chart of every chapter the same way."""
    from identifiability.charts import head_width as hw_charts

    far = pd.DataFrame({"layer": [1, 2, 3], "far_share": [0.1, 0.2, 0.3], "far_share_uniform": [0.3, 0.3, 0.3]})
    chart = {
        "far share": lambda: hta_charts.far_share_lines({"lee": far, "polarity": far.assign(far_share=0.2)}, 8),
        "sink while training": lambda: hw_charts.training_chart(_training_rows()),
    }[which]()
    assert not render.look_alike_legends(chart.to_dict())


def test_look_alike_legends_finds_a_dash_legend_on_a_line_drawn_with_points():
    """The check above can fail: a dash legend on a coloured line with points draws one filled circle per entry
    (chapter 6's far share before it drew its points apart); a line without points shows its dashes."""
    rows = pd.DataFrame({"x": [0, 1, 0, 1], "y": [0, 1, 1, 0], "kind": ["a", "a", "b", "b"], "corpus": "lee"})
    line = alt.Chart(rows).encode(x="x:Q", y="y:Q", color="corpus:N")
    same = line.mark_line(point=True).encode(strokeDash="kind:N")
    assert render.look_alike_legends(same.to_dict()) == [
        ("Symbol legend titled 'kind' for strokeDash with 2 values: a, b", ["a", "b"])
    ]
    apart = line.mark_line().encode(strokeDash=alt.StrokeDash("kind:N", legend=render.dash_legend()))
    assert not render.look_alike_legends(apart.to_dict())
