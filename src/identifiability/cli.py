"""Command line: execute chapter notebooks with papermill and build the Jupyter Book.

    identifiability book [--model M] [--corpus C] [-p name=value ...] [--only 02_nonidentifiability]
    identifiability run notebooks/01_model_and_data.md [--model M] [-p n_sentences=20] [--out DIR]

Notebook sources are jupytext MyST files in ``notebooks/``; executed ``.ipynb`` files and HTML are build
output under ``_build/``. The book for the embedded default model goes to ``_build/html``; any other model
or corpus goes to ``_build/<model>/<corpus>/html`` so runs never overwrite each other.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .models import DEFAULT_MODEL, safe_key
from .results import REPO_ROOT, RESULTS_ROOT

NOTEBOOKS = REPO_ROOT / "notebooks"
BUILD = REPO_ROOT / "_build"


class ParameterError(ValueError):
    pass


def chapter_sources() -> list[Path]:
    """Chapter notebooks in the order of ``_toc.yml``."""
    import yaml

    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text())
    files = []
    for part in toc.get("parts", [{"chapters": toc.get("chapters", [])}]):
        for ch in part.get("chapters", []):
            f = ch.get("file", "")
            if f.startswith("notebooks/"):
                files.append(REPO_ROOT / f"{f}.md")
    return files


def declared_parameters(source: Path) -> dict:
    """{name: default} of the notebook's cell tagged ``parameters``."""
    import jupytext
    import papermill

    nb = jupytext.read(source)
    tmp = BUILD / ".inspect" / f"{source.stem}.ipynb"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(nb, tmp)
    declared = papermill.inspect_notebook(str(tmp))
    out = {}
    for name, info in declared.items():
        try:
            out[name] = eval(info["default"], {})  # literal defaults written by us in our own notebooks
        except Exception:
            out[name] = info["default"]
    return out


def coerce_parameters(source: Path, given: dict) -> dict:
    """Keep the parameters ``source`` declares, converted to the type of each default.

    Raises ParameterError with a one-line message for a value of the wrong type.
    """
    declared = declared_parameters(source)
    out = {}
    for name, value in given.items():
        if name not in declared:
            continue  # another chapter's parameter; papermill would insert a stray cell
        default = declared[name]
        out[name] = _coerce(name, value, default, source.stem)
    return out


def _coerce(name, value, default, where):
    if default is None or isinstance(value, type(default)) and not isinstance(value, bool) or value is None:
        return value
    kind = type(default)
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("1", "true", "yes"):
                return True
            if str(value).lower() in ("0", "false", "no"):
                return False
            raise ValueError
        if kind is int and isinstance(value, float) and not value.is_integer():
            raise ValueError
        return kind(value)
    except (TypeError, ValueError):
        raise ParameterError(
            f"parameter {name!r} of {where} must be {kind.__name__} (default {default!r}), got {value!r}; "
            f"e.g. -p {name}={default}"
        ) from None


def run_notebook(source: Path, out_dir: Path, parameters: dict, progress: bool = True) -> Path:
    """Execute one jupytext notebook with papermill; returns the executed .ipynb path."""
    import jupytext
    import papermill

    params = coerce_parameters(source, parameters)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{source.stem}.ipynb"
    nb = jupytext.read(source)
    papermill.execute_notebook(nb, str(target), parameters=params, kernel_name="python3",
                               progress_bar=progress, cwd=str(REPO_ROOT))
    return target


def run_key(model: str | None, corpus: str) -> Path:
    """Where a run's book goes: the default gets ``_build``, anything else its own folder."""
    if (model in (None, "", "default", DEFAULT_MODEL)) and corpus == "lee":
        return BUILD
    return BUILD / safe_key(model or DEFAULT_MODEL) / safe_key(Path(corpus).stem if os.sep in corpus else corpus)


def vendor(static: Path) -> None:
    """Put every script the pages load into ``static`` (no CDN at read time)."""
    from .charts import write_vega_bundle

    static.mkdir(parents=True, exist_ok=True)
    write_vega_bundle(static / "vega-bundle.js")
    npm = REPO_ROOT / ".cache" / "npm" / "node_modules"
    mathjax = npm / "mathjax" / "es5"
    copies = {
        # MathJax: the combined TeX->HTML component plus what it loads on demand (fonts, extensions,
        # menu); the speech engine (sre, 4 MB) is left out.
        "mathjax/tex-chtml.js": mathjax / "tex-chtml.js",
        "mathjax/output": mathjax / "output",
        "mathjax/input/tex/extensions": mathjax / "input" / "tex" / "extensions",
        "mathjax/ui": mathjax / "ui",
        "mathjax/a11y": mathjax / "a11y",
        "require.min.js": npm / "requirejs" / "require.js",
        "html-manager.js": npm / "@jupyter-widgets" / "html-manager" / "dist" / "embed-amd.js",
    }
    missing = [str(p) for p in copies.values() if not p.exists()]
    if missing:
        raise SystemExit(f"vendored scripts missing ({', '.join(missing)}): run `make vendor` (npm install) first")
    for name, src in copies.items():
        dst = static / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.exists():
            shutil.rmtree(dst) if dst.is_dir() else dst.unlink()
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)


def build_book(model: str | None, corpus: str, parameters: dict, only: list[str] | None = None,
               out: Path | None = None, executed: Path | None = None, results_dir: Path | None = None) -> Path:
    """Execute the chapters and build the HTML book; returns the html folder.

    ``executed``: a folder of already executed ``<chapter>.ipynb`` files to render instead of running the
    chapters again (the tests execute each chapter once and reuse it here), with their ``results_dir``.
    """
    from tqdm import tqdm

    root = out or run_key(model, corpus)
    stage = root / "stage"
    if stage.exists():
        shutil.rmtree(stage)  # from clean: Sphinx keeps stale static files otherwise
    shutil.copytree(REPO_ROOT / "book", stage / "book")
    for f in ("_config.yml", "_toc.yml", "references.bib"):
        if (REPO_ROOT / f).exists():
            shutil.copy2(REPO_ROOT / f, stage / f)
    vendor(stage / "book" / "_vendor")
    # Relative to the repository (the notebooks run there), so no machine's absolute path is printed.
    results_dir = results_dir or (RESULTS_ROOT / safe_key(model or DEFAULT_MODEL) / safe_key(corpus)).relative_to(REPO_ROOT)
    params = {"model": model or DEFAULT_MODEL, "corpus": corpus, "results_dir": str(results_dir), **parameters}
    sources = [s for s in chapter_sources() if not only or s.stem in only]
    for source in sources:  # fail early on a bad parameter, before an hour of compute
        coerce_parameters(source, params)
    for source in tqdm(sources, desc="chapters", unit="notebook"):
        t0 = time.time()
        if executed is not None:
            (stage / "notebooks").mkdir(parents=True, exist_ok=True)
            shutil.copy2(executed / f"{source.stem}.ipynb", stage / "notebooks" / f"{source.stem}.ipynb")
            continue
        run_notebook(source, stage / "notebooks", params)
        tqdm.write(f"  {source.stem}: {time.time() - t0:.0f} s")
    for source in chapter_sources():  # --only: the other chapters get a stub so every link still resolves
        if source not in sources:
            title = source.stem.split("_", 1)[-1].replace("_", " ").capitalize()
            (stage / "notebooks" / f"{source.stem}.md").write_text(
                f"# {title}\n\nThis chapter was not executed in this build (`--only`).\n", encoding="utf-8")
    _write_run_page(stage, params, REPO_ROOT / results_dir)
    _write_claims_page(stage, REPO_ROOT / results_dir)
    html = root / "html"
    if html.exists():
        shutil.rmtree(html)
    # Warnings are errors (-W): a broken reference or missing figure fails the build.
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(stage),
           "--path-output", str(root / "jb"), "-W", "-n", "--keep-going"]
    subprocess.run(cmd, check=True)
    shutil.move(str(root / "jb" / "_build" / "html"), html)
    shutil.rmtree(root / "jb", ignore_errors=True)
    return html


def _write_run_page(stage: Path, params: dict, results_dir: Path) -> None:
    from .results import read_json

    lines = ["# This build", "", "Which model, text and parameters produced the pages of this copy of the book.", "",
             "| parameter | value |", "|---|---|"]
    lines += [f"| `{k}` | `{v}` |" for k, v in params.items() if k != "results_dir"]
    provenance = {}
    for f in sorted(results_dir.glob("*.json")):
        provenance = read_json(f).get("provenance", {})
        break
    if provenance:
        lines += ["", "## The model", "", "| | |", "|---|---|"]
        lines += [f"| {k} | `{v}` |" for k, v in provenance.items()]
    (stage / "book" / "this_build.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_claims_page(stage: Path, results_dir: Path) -> None:
    """The paper-vs-replication table, from data/claims.csv and what each chapter recorded."""
    from .results import claims_table

    esc = lambda t: str(t).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["# Paper vs replication", "",
             "Each claim of the paper, and each objection of the review, with the quantity that tests it, the "
             "value this build measured and the verdict the chapter drew from it. Generated from "
             "`data/claims.csv` and the chapters' results files.", "",
             "| | claim | where | paper | this build | verdict | chapter |", "|---|---|---|---|---|---|---|"]
    for r in claims_table(results_dir):
        lines.append(f"| {r['id']} | {esc(r['claim'])} | {esc(r['source'])}: {esc(r['where'])} | {esc(r['paper_value'])} "
                     f"| {esc(r['our_value'])} | **{r['verdict']}** | {{doc}}`../notebooks/{r['chapter']}` |")
    (stage / "book" / "claims.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _parse_params(pairs: list[str]) -> dict:
    out = {}
    for p in pairs:
        if "=" not in p:
            raise ParameterError(f"parameter {p!r} must look like name=value, e.g. -p n_sentences=50")
        k, v = p.split("=", 1)
        out[k.strip()] = v
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="identifiability", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("book", "run"):
        s = sub.add_parser(name)
        s.add_argument("--model", default=DEFAULT_MODEL, help="Hugging Face id or local folder (default: embedded MiniLM)")
        s.add_argument("--corpus", default="lee", help="lee | lee_test | polarity | glue/<task> | path/to/file.txt")
        s.add_argument("-p", "--param", action="append", default=[], help="chapter parameter name=value")
        if name == "book":
            s.add_argument("--only", nargs="*", help="chapter notebook stems to run (default: all)")
        else:
            s.add_argument("notebooks", nargs="+", type=Path)
            s.add_argument("--out", type=Path, default=BUILD / "run")
    a = ap.parse_args(argv)
    try:
        params = _parse_params(a.param)
        if a.cmd == "book":
            html = build_book(a.model, a.corpus, params, a.only)
            print(f"book written to {html}/index.html")
        else:
            base = {"model": a.model, "corpus": a.corpus, **params}
            for nb in a.notebooks:
                print(run_notebook(nb, a.out, base))
    except ParameterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
