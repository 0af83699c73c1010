// Load every page of a built book in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core: no browser download) and report, per page: drawn charts, console errors, requests that
// left localhost, and whether moving each chart control changes what is drawn.
// Usage: node check_pages.mjs <base-url> <page> [<page> ...]   -> JSON on stdout
import { createRequire } from "module";
const require = createRequire(process.env.NPM_ROOT + "/");
const { chromium } = require("playwright-core");

const [base, ...pages] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const report = [];
for (const page of pages) {
  const ctx = await browser.newContext();
  const p = await ctx.newPage();
  const errors = [], external = [];
  p.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  p.on("pageerror", (e) => errors.push(String(e)));
  await ctx.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith(base) || url.startsWith("data:") || url.startsWith("blob:")) return route.continue();
    external.push(url);
    return route.abort();
  });
  await p.goto(base + page, { waitUntil: "load" });
  await p.waitForTimeout(1500);
  // width: the drawing against the article's text column (a wider chart is cut off or scrolls sideways)
  const charts = await p.$$eval(".vega-chart", (els) => els.map((e) => ({
    id: e.id, drawn: !!e.querySelector("svg, canvas"),
    width: Math.round(e.querySelector("svg, canvas")?.getBoundingClientRect().width ?? 0),
    column: Math.round((e.closest("article") || document.body).getBoundingClientRect().width),
    controls: e.querySelectorAll(".vega-bindings input, .vega-bindings select").length })));
  // Move every control of every chart and check the drawing changes.
  const interactions = [];
  for (const c of charts.filter((c) => c.controls > 0)) {
    const handles = await p.$$(`#${c.id} .vega-bindings input, #${c.id} .vega-bindings select`);
    for (const h of handles) {
      const before = await p.$eval(`#${c.id}`, (e) => (e.querySelector("svg") || e.querySelector("canvas"))?.outerHTML?.length + ":" + (e.querySelector("svg")?.innerHTML ?? e.querySelector("canvas")?.toDataURL()));
      const kind = await h.evaluate((e) => e.tagName === "SELECT" ? "select" : e.type);
      let moved = true;
      if (kind === "select") {
        const opts = await h.evaluate((e) => Array.from(e.options).map((o) => o.value));
        const cur = await h.evaluate((e) => e.value);
        const next = opts.find((o) => o !== cur);
        if (next === undefined) moved = false; else await h.selectOption(next);
      } else if (kind === "range") {
        await h.evaluate((e) => { const v = Number(e.value) === Number(e.max) ? e.min : e.max;
          e.value = v; e.dispatchEvent(new Event("input", { bubbles: true })); e.dispatchEvent(new Event("change", { bubbles: true })); });
      } else if (kind === "checkbox") {
        await h.click();
      } else if (kind === "radio") {
        const radios = await p.$$(`#${c.id} .vega-bindings input[type=radio]`);
        if (radios.length > 1) await radios[radios.length - 1].click(); else moved = false;
      } else moved = false;
      await p.waitForTimeout(300);
      const after = await p.$eval(`#${c.id}`, (e) => (e.querySelector("svg") || e.querySelector("canvas"))?.outerHTML?.length + ":" + (e.querySelector("svg")?.innerHTML ?? e.querySelector("canvas")?.toDataURL()));
      interactions.push({ chart: c.id, control: kind, moved, changed: before !== after });
    }
  }
  const mathOk = await p.evaluate(() => !document.querySelector(".math") || !!document.querySelector("mjx-container"));
  report.push({ page, charts, errors, external, interactions, mathOk });
  await ctx.close();
}
await browser.close();
console.log(JSON.stringify(report));
