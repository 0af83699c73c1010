"""Charts re-laid for a narrow page (a phone), in the browser, before they are drawn.

Scaling a chart down to the output area's width keeps its layout but shrinks its text with it: at 390 px axis
labels came out 4-7 px tall. Instead, :data:`FIT_JS` defines ``window.vegaFit(spec, width)``, which the
embedding script of :func:`identifiability.charts.render.chart_html` calls on each spec before it is drawn: in
an area narrower than the chart, side-by-side views are stacked (``hconcat`` becomes ``vconcat``, facets and
``concat`` get one column), legends move below their views, long titles wrap, and plot widths shrink to the
area (Vega-Lite's default tick count follows the width, so a short axis gets fewer ticks). Text keeps its
size. After drawing, the embedding script measures the chart and, if it still overflows, shrinks the widths
by the overflow and draws it again; what cannot shrink keeps its width inside a box that scrolls sideways.

A chart whose labels are thinned for its width (one column per token, :func:`render.label_stride`) sets
``usermeta: {"narrow": "keep-width"}`` (:data:`KEEP_WIDTH`): it may be stacked, never narrowed.

The script is added to the vega bundle (:func:`render.write_vega_bundle`), so a page carries it once.
JupyterLab draws the spec itself, at its own size, without it.
"""

from __future__ import annotations

KEEP_WIDTH = {"narrow": "keep-width"}

FIT_JS = r"""
window.vegaFit = (function () {
  var NARROW = 600;  // px: below this, lay out for a narrow area before drawing (desktop charts fit 688)
  var AXIS = 80;     // px a view needs beside its plot: y labels, y title, padding
  var CHAR = 8;      // px per character of a 13 px bold title, to wrap titles to the area
  var AXIS_CHAR = 6.5;  // px per character of an 11 px bold axis title
  var MIN_PLOT = 140;

  // every view of a spec: the top level, concat members, layers, a facet's inner spec; f(view, size) with the
  // plot size the view draws at (a layer's members draw at the layer's)
  function each(s, f, size) {
    size = { width: typeof s.width === "number" ? s.width : size && size.width,
             height: typeof s.height === "number" ? s.height : size && size.height };
    f(s, size);
    (s.layer || []).forEach(function (c) { each(c, f, size); });
    ["hconcat", "vconcat", "concat"].forEach(function (k) { (s[k] || []).forEach(function (c) { each(c, f); }); });
    if (s.spec) each(s.spec, f);
  }

  function lines(t, n) {  // a title (a string or lines) as lines of at most n characters, broken at spaces
    var out = [];
    [].concat(t).forEach(function (text) {
      var line = "";
      String(text).split(" ").forEach(function (w) {
        if (line && (line + " " + w).length > n) { out.push(line); line = w; }
        else { line = line ? line + " " + w : w; }
      });
      out.push(line);
    });
    return out.length === 1 ? out[0] : out;
  }

  function wrapTitle(v, n) {
    var t = v.title;
    if (typeof t === "string" || Array.isArray(t)) v.title = lines(t, n);
    else if (t && typeof t === "object") {
      if (t.text !== undefined) t.text = lines(t.text, n);
      if (t.subtitle !== undefined) t.subtitle = lines(t.subtitle, Math.floor(n * 1.1));
    }
  }

  function wrapAxisTitles(v, size) {  // axis titles longer than their plot's side
    ["x", "y"].forEach(function (c) {
      var e = v.encoding && v.encoding[c], side = size[c === "x" ? "width" : "height"];
      if (!e || typeof side !== "number") return;
      var n = Math.max(12, Math.floor(side / AXIS_CHAR));
      if (e.axis && typeof e.axis.title === "string") e.axis.title = lines(e.axis.title, n);
      else if (typeof e.title === "string") e.title = lines(e.title, n);
    });
  }

  function restack(s) {  // side by side -> one above the other
    if (s.hconcat) { s.vconcat = s.hconcat; delete s.hconcat; }
    if (s.concat) s.columns = 1;
    if (s.facet && s.facet.column && !s.facet.row) { s.facet = s.facet.column; s.columns = 1; }
    else if (s.facet && s.facet.field) s.columns = 1;
    ["vconcat", "concat", "layer"].forEach(function (k) { (s[k] || []).forEach(restack); });
    if (s.spec) restack(s.spec);
  }

  function narrowLegends(v, width) {  // a legend of several columns, or long labels, as wide as the area at most
    Object.keys(v.encoding || {}).forEach(function (c) {
      var l = v.encoding[c] && v.encoding[c].legend;
      if (!l || typeof l !== "object") return;
      if (l.columns > 1) l.columns = 1;
      if (l.labelLimit > width - 60) l.labelLimit = width - 60;
    });
  }

  function keepsWidth(spec) { return !!(spec.usermeta && spec.usermeta.narrow === "keep-width"); }

  function shrink(spec, max) {  // every plot wider than max becomes max wide; true if one changed
    var changed = false;
    if (keepsWidth(spec)) return false;
    each(spec, function (v) {
      if (typeof v.width === "number" && v.width > max) {
        v.width = Math.max(MIN_PLOT, Math.floor(max));
        changed = true;
      }
    });
    return changed;
  }

  function fit(spec, width) {
    if (!width) return spec;
    var n = Math.max(20, Math.floor((width - 10) / CHAR));
    each(spec, function (v, size) { wrapTitle(v, n); wrapAxisTitles(v, size); });  // at any width
    if (width >= NARROW) return spec;
    restack(spec);
    spec.config = spec.config || {};
    // below the views, entries one per line (a row of entries would be as wide as all of them)
    spec.config.legend = Object.assign({ orient: "bottom", columns: 1 }, spec.config.legend || {});
    each(spec, function (v) { narrowLegends(v, width); });
    shrink(spec, width - AXIS);
    each(spec, wrapAxisTitles);
    if (keepsWidth(spec) && spec.title) {  // it may scroll: its title starts where the reader looks
      spec.title = typeof spec.title === "object" && !Array.isArray(spec.title) ? spec.title : { text: spec.title };
      spec.title.anchor = "start";
    }
    return spec;
  }

  // after drawing: the chart overflows by `over` px; narrow it once more, false if it cannot be
  fit.again = function (spec, over) {
    var max = 0;
    each(spec, function (v) { if (typeof v.width === "number") max = Math.max(max, v.width); });
    return max > 0 && shrink(spec, max - over - 2);
  };
  return fit;
})();

// Draw `spec` into the element `id`, fitted to its width; a chart still wider than its area afterwards keeps
// its size inside a labelled box that scrolls sideways. The view is kept for the book's browser test.
window.vegaDraw = function (id, spec) {
  var e = document.getElementById(id), width = e.clientWidth;
  spec = window.vegaFit(spec, width);
  function draw(tries) {
    e.innerHTML = "";
    return vegaEmbed(e, spec, { actions: false, renderer: "svg" }).then(function (r) {
      e.style.display = "block";
      // an area not laid out (a hidden output: width 0) has nothing to fit to
      var d = e.querySelector("svg"), over = d && width ? d.getBoundingClientRect().width - width : 0;
      if (over > 1 && tries < 2 && window.vegaFit.again(spec, over)) { r.finalize(); return draw(tries + 1); }
      if (over > 1) {
        var box = document.createElement("div");
        box.className = "vega-scroll";
        box.setAttribute("role", "region");
        box.setAttribute("tabindex", "0");
        box.setAttribute("aria-label", "Chart wider than the page: scroll sideways to see the whole chart");
        d.parentNode.insertBefore(box, d);
        box.appendChild(d);
      }
      (window.vegaViews = window.vegaViews || {})[id] = r.view;
    });
  }
  return draw(0).catch(console.error);
};
"""
