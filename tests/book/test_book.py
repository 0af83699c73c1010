"""A clean Jupyter Book build of every chapter (executed once, with small parameters) and a real browser
check of the pages: charts drawn, controls redraw them, no network, no console errors."""

import functools
import http.server
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from identifiability import cli, paths

pytestmark = [pytest.mark.book, pytest.mark.real]

NPM_ROOT = paths.source_root() / ".cache" / "npm" / "node_modules"
# sphinx-thebe 0.3.1 declares THEBE_JS_URL twice on every page; it is harmless and not ours.
KNOWN_HARMLESS = ("THEBE_JS_URL",)
REPOSITORY = "https://github.com/example/identifiability-book"  # launch buttons are links: never fetched


@pytest.fixture(scope="module")
def html(chapter_run, tmp_path_factory):
    for source in cli.chapter_sources():
        chapter_run(source.stem)
    out = tmp_path_factory.mktemp("book")
    return cli.build_book(
        None,
        "lee",
        {},
        out=out,
        executed=chapter_run.dir / "notebooks",
        results_dir=chapter_run.dir / "results",
        repository=REPOSITORY,
    )


def test_book_has_every_page(html):
    for source in cli.chapter_sources():
        page = html / "notebooks" / f"{source.stem}.html"
        assert page.is_file(), page
        assert "vega-chart" in page.read_text(), f"{page.name} has no chart"
    for p in (
        "book/intro.html",
        "book/notation.html",
        "book/rerun.html",
        "book/this_build.html",
        "book/references.html",
    ):
        assert (html / p).is_file()
    build = (html / "book/this_build.html").read_text()
    assert "all-MiniLM-L6-v2" in build and "53aa51172d142c89" in build  # model and weight hash


def test_chapters_offer_a_download_and_a_binder_launch(html):
    for source in cli.chapter_sources():
        page = (html / "notebooks" / f"{source.stem}.html").read_text()
        assert f"_sources/notebooks/{source.stem}.ipynb" in page, f"{source.stem}: no .ipynb download"
        binder = f"https://mybinder.org/v2/gh/example/identifiability-book/main?urlpath=lab/tree/notebooks/{source.stem}.ipynb"
        assert binder in page, f"{source.stem}: no Binder button opening its notebook"
    assert "mybinder.org" not in (html / "book/intro.html").read_text()  # prose pages have nothing to launch


def test_math_printed_by_cells_is_typeset(html):
    """Markdown a cell prints (display(Markdown(...))) must go through the MyST parser like the prose:
    a "$d_s$" left as text is what commonmark rendering of outputs gives."""
    import re

    from bs4 import BeautifulSoup

    raw = re.compile(r"\$[^$\s][^$]{0,80}\$")
    for source in cli.chapter_sources():
        soup = BeautifulSoup((html / "notebooks" / f"{source.stem}.html").read_text(), "html.parser")
        for tag in soup(["pre", "code", "script", "style"]):
            tag.decompose()
        left = raw.findall(soup.get_text(" "))
        assert not left, f"{source.stem}: untypeset math {left[:3]}"


def test_claims_page_lists_every_claim_with_a_verdict(html):
    import html as html_lib
    import re

    from identifiability.results import load_claims

    page = (html / "book/claims.html").read_text()
    text = html_lib.unescape(re.sub(r"<[^>]+>", " ", page))
    text = re.sub(r"\s+", " ", text)
    for curly, plain in (("\u2018", "'"), ("\u2019", "'"), ("\u201c", '"'), ("\u201d", '"')):
        text = text.replace(curly, plain)  # Sphinx's smart quotes
    for c in load_claims():
        assert f">{c['id']}<" in page, c["id"]
        assert c["claim"][:30] in text, f"{c['id']}: the claim's text is not on the page"
        assert re.sub(r"\s+", " ", c["rule"])[:40] in text, f"{c['id']}: its rule is not on the page"
    assert "not measured" not in page, "a chapter did not record its verdict on a claim"
    assert len(re.findall(r"\(-?[\d.]+ to -?[\d.]+\)", text)) >= 5  # estimates with their intervals


def test_pages_load_no_script_from_elsewhere(html):
    for page in html.rglob("*.html"):
        text = page.read_text()
        for cdn in ("cdn.jsdelivr.net", "cdnjs.cloudflare.com", "unpkg.com"):
            assert f'src="https://{cdn}' not in text, f"{page} loads a script from {cdn}"


@pytest.fixture(scope="module")
def server(html):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(html))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    handler.log_message = lambda *a: None
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


def test_pages_in_a_real_browser(html, server):
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.fail(
            "Debian's chromium is needed for the browser check: apt-get install chromium (make test does it as root)"
        )
    pages = ["book/intro.html"] + [f"notebooks/{s.stem}.html" for s in cli.chapter_sources()]
    proc = subprocess.run(
        ["node", str(Path(__file__).parent / "browser" / "check_pages.mjs"), server, *pages],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NPM_ROOT": str(NPM_ROOT), "CHROMIUM": chromium},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert [r["page"] for r in report] == pages
    wide = [
        (r["page"], c["id"], c["width"], c["column"]) for r in report for c in r["charts"] if c["width"] > c["column"]
    ]
    assert not wide, f"charts wider than the text column, so cut off (page, id, px, column px): {wide}"
    for r in report:
        errors = [e for e in r["errors"] if not any(k in e for k in KNOWN_HARMLESS)]
        assert not errors, f"{r['page']}: console errors {errors}"
        assert not r["external"], f"{r['page']}: requests left the machine: {r['external'][:3]}"
        assert r["mathOk"], f"{r['page']}: math was not typeset (MathJax did not load)"
        assert all(c["drawn"] for c in r["charts"]), f"{r['page']}: undrawn charts {r['charts']}"
        moved = [i for i in r["interactions"] if i["moved"]]
        if r["page"].startswith("notebooks/"):
            assert r["charts"], f"{r['page']} shows no chart"
            assert moved, f"{r['page']} has no interactive chart control"
            # A control may leave a drawing unchanged when the data are equal across its values (e.g. every
            # head of chapter 2 has the same null-space dimensions), so each page needs one that redraws.
            assert any(i["changed"] for i in moved), f"{r['page']}: no control redraws its chart: {moved}"
