// First-load cost of each page of a built book in headless Chromium (driven by bench_pages.py).
// Per page and repeat, in a fresh browser context (empty cache): milliseconds from navigation start to the
// last chart drawn (every .vega-chart holds an svg or canvas; pages without charts: to the load event), and
// the bytes moved, gzip-compressed as a static host serves text (html, js, css, json, svg).
// Usage: node bench_pages.mjs <base-url> <repeats> <page> [<page> ...]   -> JSON on stdout
import { createRequire } from "module";
import zlib from "zlib";
const require = createRequire(process.env.NPM_ROOT + "/");
const { chromium } = require("playwright-core");

const [base, repeats, ...pages] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const TEXT = /(text\/|javascript|json|svg|xml)/;
const out = [];
for (let r = 0; r < Number(repeats); r++) {
  for (const page of pages) {  // interleaved: the machine is shared, so a slow spell hits every page alike
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const p = await ctx.newPage();
    const sizes = [];
    p.on("response", async (res) => {
      try {
        const body = await res.body();
        const type = res.headers()["content-type"] || "";
        const n = TEXT.test(type) ? zlib.gzipSync(body, { level: 6 }).length : body.length;
        sizes.push(n);
        if (process.env.BENCH_LIST) console.error(page, n, res.url().replace(base, ""));
      } catch { /* redirects and aborted requests carry no body */ }
    });
    await p.goto(base + page, { waitUntil: "load" });
    const charts = await p.$$eval(".vega-chart", (els) => els.length);
    await p.waitForFunction(() => [...document.querySelectorAll(".vega-chart")]
      .every((e) => e.querySelector("svg, canvas")), null, { polling: "raf", timeout: 60000 });
    const ms = await p.evaluate(() => performance.now());
    await p.waitForTimeout(500);  // late requests (fonts, MathJax components) still count as first load
    out.push({ page, repeat: r, ms, charts, bytes: sizes.reduce((a, b) => a + b, 0), requests: sizes.length });
    await ctx.close();
  }
}
await browser.close();
console.log(JSON.stringify(out));
