// Load every page of a built book in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core: no browser download) and report, per page and width (1280 and 390 px): charts drawn and
// whether each lies inside its output area, tables that neither fit nor sit in a labelled scroll container,
// output text that shows a Python repr, NaN or None or an unrounded number, printed lines wider than
// their box, how many output lines and printed blocks were read (so a page structure the check no longer
// recognises cannot pass for clean), console errors, requests that
// left localhost, the bytes of the first load (gzip-compressed, as a static host serves text), and whether
// moving each chart control changes the data the chart's vega view holds; and what a reader meets at each
// width (issue 25): the smallest chart text as drawn (its font size times the svg's scale on screen),
// sideways scroll of the page, code boxes whose content runs past them, chart controls with a single option
// or wider than their area, and each verdict line with the rows of the verdict chart that draws its claim;
// tables that scroll sideways without saying so, formulas cut by their box, and the search boxes in view
// (issue 53). With SCREENSHOTS set, it saves a screenshot of the window (not the whole page) per page and
// width there, as <page>-<width>.png.
// Usage: [SCREENSHOTS=folder] node check_pages.mjs <base-url> <page> [<page> ...]   -> JSON on stdout
import { createRequire } from "module";
import fs from "fs";
import path from "path";
import zlib from "zlib";
const require = createRequire(process.env.NPM_ROOT + "/");
const { chromium } = require("playwright-core");

const WIDTHS = [1280, 390];
const SHOTS = process.env.SCREENSHOTS;  // a folder: a screenshot of the window per page and width, when set
const TEXT = /(text\/|javascript|json|svg|xml)/;
const [base, ...pages] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});

// In the page: what a reader sees. Runs in the browser.
function inspect() {
  const box = (e) => e.getBoundingClientRect();
  const outputArea = (e) => e.closest(".cell_output") || e.closest("article") || document.body;
  const charts = [...document.querySelectorAll(".vega-chart")].map((e) => {
    const drawing = e.querySelector("svg, canvas");
    const area = outputArea(e);
    const d = drawing ? box(drawing) : null, a = box(area);
    // The smallest text as drawn: the font size in the svg's units times their scale on screen.
    let minText = null;
    for (const t of drawing?.tagName === "svg" ? drawing.querySelectorAll("text") : []) {
      const st = getComputedStyle(t), m = t.getScreenCTM(), s = t.textContent.trim();
      if (!s || !m || st.display === "none" || st.visibility === "hidden" || box(t).width === 0) continue;
      const px = parseFloat(st.fontSize) * Math.hypot(m.a, m.b);
      if (!minText || px < minText.px) minText = { px: Math.round(px * 10) / 10, text: s.slice(0, 40) };
    }
    return {
      id: e.id, drawn: !!drawing, minText,
      title: (e.querySelector("svg .role-title-text")?.textContent || e.querySelector("svg .role-axis-title text")?.textContent || "").slice(0, 60), width: Math.round(d?.width ?? 0), area: Math.round(a.width),
      inside: !!d && d.left >= a.left - 1 && d.right <= a.right + 1,
      controls: e.querySelectorAll(".vega-bindings input, .vega-bindings select").length,
    };
  });
  const tables = [...document.querySelectorAll("article table")].map((t, i) => {
    const area = outputArea(t), a = box(area), r = box(t);
    let scroller = null;
    for (let p = t.parentElement; p && p !== area.parentElement; p = p.parentElement) {
      const ox = getComputedStyle(p).overflowX;
      if (ox === "auto" || ox === "scroll") { scroller = p; break; }
    }
    const fits = r.left >= a.left - 1 && r.right <= a.right + 1;
    const labelled = !!scroller && (scroller.hasAttribute("aria-label") || scroller.hasAttribute("aria-labelledby"))
      && box(scroller).right <= a.right + 1;
    const where = t.closest(".cell_output") ? "output" : "text";
    const head = (t.querySelector("th, td")?.innerText || "").trim().slice(0, 40);
    return { index: i, where, head, width: Math.round(r.width), height: Math.round(r.height), area: Math.round(a.width), fits, labelled };
  });
  // Text a reader reads in outputs and tables (not code inputs, not chart internals).
  const lines = [];
  const take = (el, kind) => {
    const clone = el.cloneNode(true);
    clone.querySelectorAll("script, style, .vega-chart, .vega-bindings, svg, mjx-container, .MathJax").forEach((x) => x.remove());
    for (const line of clone.textContent.split("\n")) if (line.trim()) lines.push({ kind, text: line.trim().slice(0, 200) });
  };
  document.querySelectorAll(".cell_output").forEach((e) => take(e, "output"));
  document.querySelectorAll("article table td").forEach((e) => { if (!e.closest(".cell_output")) take(e, "table"); });
  const mathOk = !document.querySelector(".math") || !!document.querySelector("mjx-container");
  // Printed output whose lines run past its box: the reader must scroll sideways to read the end of a line.
  const cut = [...document.querySelectorAll(".cell_output pre")].filter((e) => e.scrollWidth > e.clientWidth + 1)
    .map((e) => ({ width: e.scrollWidth, box: e.clientWidth, text: e.textContent.split("\n").sort((a, b) => b.length - a.length)[0].slice(0, 120) }));
  const printed = document.querySelectorAll(".cell_output pre").length;
  // Code a reader must scroll sideways to read: code cells' inputs and the prose's code blocks.
  const code = [...document.querySelectorAll("article pre")].filter((e) => !e.closest(".cell_output"))
    .filter((e) => e.scrollWidth > e.clientWidth + 1)
    .map((e) => ({ kind: e.closest(".cell_input") ? "input" : "text", width: e.scrollWidth, box: e.clientWidth,
                   text: e.textContent.split("\n").sort((a, b) => b.length - a.length)[0].slice(0, 120) }));
  // Tables that scroll sideways without saying so (book.js marks their box, book.css writes the hint).
  const silent = [...document.querySelectorAll("article table")].filter((t) => t.scrollWidth > t.clientWidth + 1)
    .filter((t) => !getComputedStyle(t.parentElement, "::before").content.includes("Scroll"))
    .map((t) => (t.textContent || "").trim().replace(/\s+/g, " ").slice(0, 60));
  // Formulas (MathJax's CHTML) cut by a box: wider than a box that scrolls or clips them (the reader never sees
  // the whole formula at once), or reaching past the edge of a box that clips. A formula in a table that
  // scrolls, in a column past the edge, is not cut: scrolling the table shows it whole.
  const formulas = [...document.querySelectorAll("mjx-container")].flatMap((c) => {
    const m = c.querySelector("mjx-math"), r = m ? box(m) : null;
    if (!r || r.width === 0) return [];
    for (let p = c; p && p !== document.body; p = p.parentElement) {
      const ox = getComputedStyle(p).overflowX;
      if (ox === "visible") continue;
      const b = box(p), clips = ox === "hidden" || ox === "clip";
      if (r.width > p.clientWidth + 1 || (clips && (r.left < b.left - 1 || r.right > b.right + 1))) {
        const tex = window.MathJax?.startup?.document?.getMathItemsWithin?.(c)?.[0]?.math;
        return [{ text: (tex || c.textContent || "").trim().slice(0, 80), width: Math.round(r.width), box: Math.round(b.width) }];
      }
    }
    return [];
  });
  // The search boxes and buttons drawn on the page (issue 53: one in the sidebar and one in a top bar that
  // covered it), each with whether its middle is in the window as the page opens and drawn on top there.
  const search = [...document.querySelectorAll(".search-button__button, form.bd-search")]
    .filter((e) => !e.closest("dialog") && getComputedStyle(e).visibility === "visible")
    .filter((e) => box(e).width > 0 && box(e).height > 0)
    .map((e) => {
      const r = box(e), x = r.left + r.width / 2, y = r.top + r.height / 2;
      const inView = x >= 0 && x < window.innerWidth && y >= 0 && y < window.innerHeight;
      return { where: String(e.parentElement?.className || "").slice(0, 40), inView,
               covered: inView && !e.contains(document.elementFromPoint(x, y)) };
    });
  const root = document.scrollingElement || document.documentElement;
  const scroll = { width: root.scrollWidth, viewport: window.innerWidth, wide: root.scrollWidth > window.innerWidth ? widest() : [] };
  // The claims page's cards (identifiability.book.pages._claim_card): whether everything in a card fits inside it,
  // whether the claim in words comes first, and whether the fields stand one under another (a phone) or side
  // by side (a wide page).
  const cards = [...document.querySelectorAll("div.claim-card")].map((c) => {
    const r = box(c), head = c.querySelector(":scope > p"), dds = [...c.querySelectorAll("dl > dd")].map(box);
    // MathJax's assistive MathML (for screen readers) is clipped to nothing: a formula at a line's end may lay
    // it past the card without anything a reader sees, so it is not counted
    const wide = [...c.querySelectorAll("*")].filter((e) => box(e).right > r.right + 1 && box(e).width > 0
      && !e.closest("mjx-assistive-mml"));
    return { id: (head?.querySelector("a")?.textContent || "").trim(), fits: c.scrollWidth <= c.clientWidth + 1 && !wide.length,
             wide: wide.slice(0, 3).map((e) => (e.textContent || e.tagName).trim().slice(0, 40)),
             claimFirst: !!head && dds.length > 0 && box(head).bottom <= Math.min(...dds.map((d) => d.top)) + 1,
             stacked: dds.length > 1 && dds.every((d, i) => i === 0 || d.top >= dds[i - 1].bottom - 1) };
  });
  return { charts, tables, lines, mathOk, cut, printed, code, scroll, controls: controls(), verdicts: verdicts(charts), cards,
           silent, formulas, search };

  // The deepest elements that reach past the right edge of the window, outside any box that scrolls or clips.
  function widest() {
    const out = [];
    for (const e of document.body.querySelectorAll("*")) {
      const r = box(e);
      if (r.right <= window.innerWidth + 1 || r.width === 0) continue;
      let clipped = false;
      for (let p = e.parentElement; p && p !== document.body; p = p.parentElement)
        if (getComputedStyle(p).overflowX !== "visible") { clipped = true; break; }
      if (clipped || [...e.children].some((c) => box(c).right > window.innerWidth + 1)) continue;
      out.push({ tag: e.tagName.toLowerCase(), cls: String(e.className || "").slice(0, 40), right: Math.round(r.right),
                 text: (e.textContent || "").trim().slice(0, 60) });
      if (out.length === 5) break;
    }
    return out;
  }

  // Each control of a chart: its options (a select's or a radio group's; null for a slider or a checkbox) and
  // whether it lies inside the output area.
  function controls() {
    return [...document.querySelectorAll(".vega-bindings .vega-bind")].map((b) => {
      const sel = b.querySelector("select"), radios = b.querySelectorAll("input[type=radio]");
      const parts = [...b.querySelectorAll("select, input, label, span")].map(box).filter((r) => r.width > 0);
      const right = Math.max(...parts.map((r) => r.right), box(b).left);
      const area = box(outputArea(b));
      return { chart: b.closest(".vega-chart")?.id || "", name: (b.querySelector(".vega-bind-name")?.textContent || "").trim(),
               kind: sel ? "select" : radios.length ? "radio" : (b.querySelector("input")?.type || "?"),
               options: sel ? sel.options.length : radios.length || null,
               width: Math.round(right - Math.min(...parts.map((r) => r.left), right)), inside: right <= area.right + 1 };
    });
  }

  // Each verdict line ("**C5.** The claim that ... **partly holds**. ...": the claim's id in bold, then its outcome
  // in bold, verdicts.core.render) with the rows (quantity, verdict) of the verdict chart that draws its claim
  // (rows read from the data its vega view holds): the first such chart after the line, else the first on the
  // page (a chapter may draw its verdicts together in a section of their own); null when none does.
  function verdicts(charts) {
    const ID = /^(C\d+)\.$/;
    const OUTCOME = /^(partly holds|holds|fails|inconclusive|not testable on this model|not run in this build)\b/;
    const after = (a, b) => !!(a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING);
    const drawn = [...document.querySelectorAll(".vega-chart")].map((c) => ({ c, rows: chartRows(c.id) }));
    const out = [];
    for (const s of document.querySelectorAll("article strong")) {
      const id = s.textContent.trim().match(ID);
      if (!id) continue;
      const line = s.closest("p, li") || s.parentElement;
      // the outcome: the first bold after the id in the same line that names one
      const m = [...line.querySelectorAll("strong")].filter((b) => after(s, b))
        .map((b) => b.textContent.trim().match(OUTCOME)).find(Boolean);
      if (!m) continue;
      const draws = drawn.filter((d) => d.rows.some((r) => r.quantity === id[1] || r.quantity.startsWith(id[1] + ".")));
      const chart = draws.find((d) => after(s, d.c)) || draws[0];
      // a reason that goes through several models continues as the list right after its line (verdicts.core.itemised)
      const list = line.nextElementSibling && line.nextElementSibling.tagName === "UL" ? line.nextElementSibling.textContent : "";
      out.push({ claim: id[1], verdict: m[1], text: (line.textContent + " " + list).replace(/\s+/g, " ").trim().slice(0, 4000),
                 chart: chart ? chart.c.id : null, rows: chart ? chart.rows : [] });
    }
    return out;
  }

  function chartRows(id) {
    const view = (window.vegaViews || {})[id];
    if (!view) return [];
    const names = Object.keys(view.getState({ data: () => true, signals: () => false, recurse: true }).data ?? {});
    const seen = new Map();
    for (const n of names) for (const row of view.data(n) || []) {
      const q = row.quantity ?? row.claim;
      if (typeof q === "string" && typeof row.verdict === "string") seen.set(`${q}\t${row.verdict}`, { quantity: q, verdict: row.verdict });
    }
    return [...seen.values()];
  }
}

const REPR = [
  [/\b(PosixPath|WindowsPath|tensor|array|Series|DataFrame|Timestamp|np\.\w+)\(/, "a Python repr"],
  [/ object at 0x[0-9a-f]+/, "a Python repr"],
  [/\bdtype: \w+|^Name: .*, dtype|\bLength: \d+, dtype/, "a pandas repr"],
  [/\bNaN\b|\bnan\b/, "NaN"],
  [/\bNone\b/, "None"],
];
function rawOutput(lines) {
  const found = [];
  for (const { kind, text } of lines) {
    for (const [re, what] of REPR) if (re.test(text)) { found.push({ kind, what, text }); break; }
    for (const m of text.matchAll(/(?<![\w.])-?\d+\.\d+(?:e[+-]?\d+)?(?![\w.])/gi)) {
      const digits = m[0].replace(/^-/, "").replace(/e.*$/i, "").replace(".", "").replace(/^0+/, "");
      if (digits.length > 6) { found.push({ kind, what: "an unrounded number", text }); break; }
    }
  }
  return found;
}

// Each control of each chart: move it, and compare the data the vega view holds before and after.
async function moveControls(p, charts) {
  // Every named data set's rows, their plain fields only (derived rows also point into the scenegraph), less
  // the fields named like the chart's controls: a filter on "layer" changes every row's layer, which says
  // nothing about whether what is drawn changed.
  const dataOf = (id) => p.evaluate((id) => {
    const view = (window.vegaViews || {})[id];
    if (!view) return null;
    const controls = new Set([...document.querySelectorAll(`#${id} .vega-bind-name`)].map((e) => e.textContent.trim().toLowerCase()));
    const names = Object.keys(view.getState({ data: () => true, signals: () => false, recurse: true }).data ?? {});
    const plain = (row) => Object.entries(row).filter(([k, v]) => (v === null || typeof v !== "object") && !controls.has(k.toLowerCase()));
    const isScene = (rows) => rows.length > 0 && ("dirty" in rows[0] || "mark" in rows[0]);  // drawn items, not data
    return JSON.stringify(names.sort().filter((n) => !isScene(view.data(n))).map((n) => [n, view.data(n).map(plain)]));
  }, id);
  const drawingOf = (id) => p.$eval(`#${id}`, (e) => e.querySelector("svg")?.innerHTML ?? e.querySelector("canvas")?.toDataURL() ?? "");
  const out = [];
  for (const c of charts.filter((c) => c.controls > 0)) {
    const handles = await p.$$(`#${c.id} .vega-bindings input, #${c.id} .vega-bindings select`);
    for (const h of handles) {
      const name = await h.evaluate((e) => e.closest(".vega-bind")?.querySelector(".vega-bind-name")?.textContent?.trim() || e.name || "");
      const [data0, draw0] = [await dataOf(c.id), await drawingOf(c.id)];
      const kind = await h.evaluate((e) => (e.tagName === "SELECT" ? "select" : e.type));
      let moved = true;
      if (kind === "select") {
        const opts = await h.evaluate((e) => Array.from(e.options).map((o) => o.value));
        const cur = await h.evaluate((e) => e.value);
        const next = opts.find((o) => o !== cur);
        if (next === undefined) moved = false; else await h.selectOption(next);
      } else if (kind === "range") {
        await h.evaluate((e) => { e.value = Number(e.value) === Number(e.max) ? e.min : e.max;
          e.dispatchEvent(new Event("input", { bubbles: true })); e.dispatchEvent(new Event("change", { bubbles: true })); });
      } else if (kind === "checkbox") {
        await h.click();
      } else if (kind === "radio") {
        const checked = await h.evaluate((e) => e.checked);
        if (checked) moved = false; else await h.click();
      } else moved = false;
      // until the view's data and drawing have both changed, at most 3 s: a redraw takes longer on a busy machine
      let [data1, draw1] = [data0, draw0];
      for (let waited = 0; moved && waited < 3000 && (data1 === data0 || draw1 === draw0); waited += 100) {
        await p.waitForTimeout(100);
        [data1, draw1] = [await dataOf(c.id), await drawingOf(c.id)];
      }
      out.push({ chart: c.id, title: c.title, control: name || kind, kind, moved, view: data0 !== null,
                 dataChanged: data0 !== data1, drawingChanged: draw0 !== draw1 });
    }
  }
  return out;
}

// Pages are checked CONCURRENCY at a time: most of a page's time is waiting (for MathJax, for a chart to
// redraw after a control moves), which another page's checks fill. The report keeps the pages' order.
const CONCURRENCY = Number(process.env.CHECK_CONCURRENCY || 3);

async function checkPage(page) {
  const entry = { page, errors: [], external: [], bytes: 0, requests: 0, widths: {} };
  for (const width of WIDTHS) {
    const ctx = await browser.newContext({ viewport: { width, height: 900 } });
    const p = await ctx.newPage();
    const sizes = [];
    p.on("console", (m) => { if (m.type() === "error") entry.errors.push(`${width}px: ${m.text()}`); });
    p.on("pageerror", (e) => entry.errors.push(`${width}px: ${e}`));
    p.on("response", async (res) => {
      if (width !== WIDTHS[0]) return;
      try {
        const body = await res.body();
        sizes.push(TEXT.test(res.headers()["content-type"] || "") ? zlib.gzipSync(body).length : body.length);
      } catch { /* no body: a redirect or an aborted request */ }
    });
    await ctx.route("**/*", (route) => {
      const url = route.request().url();
      if (url.startsWith(base) || url.startsWith("data:") || url.startsWith("blob:")) return route.continue();
      if (!entry.external.includes(url)) entry.external.push(url);
      return route.abort();
    });
    await p.goto(base + page, { waitUntil: "load" });
    await p.waitForFunction(() => [...document.querySelectorAll(".vega-chart")].every((e) => e.querySelector("svg, canvas")),
      null, { timeout: 30000 }).catch(() => {});
    // MathJax's first typesetting done (its startup promise), then the fonts its output asked for loaded
    // (document.fonts, after a layout so that every font in use has been requested), at most 30 s: with pages
    // checked side by side a busy page typesets late
    await p.evaluate(() => Promise.race([
      Promise.resolve(window.MathJax?.startup?.promise)
        .then(() => new Promise((r) => requestAnimationFrame(() => r(document.body.offsetHeight))))
        .then(() => document.fonts.ready),
      new Promise((r) => setTimeout(r, 30000)),
    ]).then(() => true)).catch(() => {});
    const seen = await p.evaluate(inspect);
    const result = { charts: seen.charts, tables: seen.tables, raw: rawOutput(seen.lines), mathOk: seen.mathOk, cut: seen.cut,
                     read: seen.lines.length, printed: seen.printed, code: seen.code, scroll: seen.scroll,
                     controls: seen.controls, verdicts: seen.verdicts, cards: seen.cards, silent: seen.silent,
                     formulas: seen.formulas, search: seen.search };
    if (SHOTS) {  // what a reader sees first, the window only: Chromium cannot capture a page this tall whole
      result.screenshot = path.join(SHOTS, `${page.replace(/\.html$/, "")}-${width}.png`);
      fs.mkdirSync(path.dirname(result.screenshot), { recursive: true });
      await p.screenshot({ path: result.screenshot });
    }
    if (width === WIDTHS[0]) {
      result.interactions = await moveControls(p, seen.charts);
      entry.bytes = sizes.reduce((a, b) => a + b, 0);
      entry.requests = sizes.length;
    }
    entry.widths[width] = result;
    await ctx.close();
  }
  return entry;
}

const report = new Array(pages.length);
let next = 0;
async function lane() {
  while (next < pages.length) {
    const i = next++;
    report[i] = await checkPage(pages[i]);
  }
}
await Promise.all(Array.from({ length: Math.min(CONCURRENCY, pages.length) }, lane));
await browser.close();
console.log(JSON.stringify(report));
