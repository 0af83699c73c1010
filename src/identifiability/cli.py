"""Command line: execute chapter notebooks with papermill and build the Jupyter Book.

    identifiability book [--model M] [--corpus C] [-p name=value ...] [--only 02_nonidentifiability]
                         [--repository https://github.com/<owner>/<repo>] [--branch main]
    identifiability run notebooks/01_model_and_data.md [--model M] [-p n_sentences=20] [--out DIR]
    identifiability compare OLD_RESULTS_DIR NEW_RESULTS_DIR   (what changed between two runs' results)

Notebook sources are jupytext MyST files in ``notebooks/``; executed ``.ipynb`` files and HTML are build
output under ``_build/``. The book for the embedded default model goes to ``_build/html``; any other model
or corpus goes to ``_build/<model>/<corpus>/html`` so runs never overwrite each other.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import paths
from .paths import DEFAULT_MODEL


class ParameterError(ValueError):
    pass


def _user_errors() -> tuple[type[Exception], ...]:
    from .adapters import UnsupportedArchitecture
    from .corpora import CorpusError
    from .fingerprint import ModelNotAvailable
    from .preflight import PreflightError

    return (ParameterError, PreflightError, ModelNotAvailable, UnsupportedArchitecture, CorpusError)


class ChapterFailed(RuntimeError):
    """A chapter stopped with an error; the message is its last line and where the full traceback is."""


def chapter_sources() -> list[Path]:
    """Chapter notebooks in the order of ``_toc.yml``."""
    import yaml

    root = paths.source_root()
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = []
    for part in toc.get("parts", [{"chapters": toc.get("chapters", [])}]):
        for ch in part.get("chapters", []):
            f = ch.get("file", "")
            if f.startswith("notebooks/"):
                files.append(root / f"{f}.md")
    return files


def declared_parameters(source: Path) -> dict:
    """{name: default} of the notebook's cell tagged ``parameters``.

    Read with ``ast`` rather than papermill's line-based inspector, which drops a parameter whose comment
    contains ``=`` (so a valid ``-p`` value would be ignored without a word).
    """
    import ast

    import jupytext

    cells = [c for c in jupytext.read(source).cells if "parameters" in c.metadata.get("tags", [])]
    if not cells:
        raise ParameterError(f"{source.name} has no cell tagged 'parameters'; add one (see notebooks/01_*.md)")
    out = {}
    for node in ast.parse(cells[0].source).body:
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            else getattr(node, "target", None)
        )
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(target, ast.Name) and node.value is not None:
            try:
                out[target.id] = ast.literal_eval(node.value)
            except ValueError:
                out[target.id] = ast.unparse(node.value)  # not a literal: passed through as text
    return out


def _unknown(name: str, declared, where: str) -> ParameterError:
    close = difflib.get_close_matches(name, list(declared), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return ParameterError(f"no parameter {name!r} in {where}; {hint}declared: {', '.join(sorted(declared))}")


def coerce_parameters(source: Path, given: dict, strict: bool = True) -> dict:
    """The parameters ``source`` declares, converted to the type of each default.

    Raises ParameterError with a one-line message for a value of the wrong type and, with ``strict``, for a
    name the chapter does not declare (naming the closest declared one). Without ``strict`` such names are
    left out: they belong to other chapters (papermill would insert a stray cell for them).
    """
    declared = declared_parameters(source)
    out = {}
    for name, value in given.items():
        if name not in declared:
            if strict:
                raise _unknown(name, declared, source.stem)
            continue
        out[name] = _coerce(name, value, declared[name], source.stem)
    return out


def check_parameters(sources: list[Path], given: dict) -> None:
    """Every name in ``given`` is declared by at least one of ``sources``, and every value has its type."""
    declared: dict = {}
    for source in sources:
        for name in declared_parameters(source):
            declared.setdefault(name, source)
    for name in given:
        if name not in declared:
            raise _unknown(name, declared, "any chapter of this build")
    for source in sources:
        coerce_parameters(source, given, strict=False)


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


def run_notebook(source: Path, out_dir: Path, parameters: dict, progress: bool = True, strict: bool = True) -> Path:
    """Execute one jupytext notebook with papermill; returns the executed .ipynb path.

    The kernel runs in the checkout and inherits this process's data folder (``IDENTIFIABILITY_DATA``), so a
    chapter files its results where this command looks for them.
    """
    import jupytext
    import papermill

    params = coerce_parameters(source, parameters, strict)
    os.environ.setdefault(paths.DATA_ENV, str(paths.data_root()))
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{source.stem}.ipynb"
    nb = jupytext.read(source)
    try:
        papermill.execute_notebook(
            nb,
            str(target),
            parameters=params,
            kernel_name="python3",
            progress_bar=progress,
            cwd=str(paths.source_root()),
        )
    except papermill.PapermillExecutionError as e:
        last = (str(e.evalue).strip().splitlines() or [""])[-1]
        raise ChapterFailed(f"{source.stem} stopped: {e.ename}: {last} (full traceback in {target})") from None
    from .book import clean_executed

    return clean_executed(target)  # one parameters cell with the values used, no stderr (identifiability.book)


def preflight(sources: list[Path], params: dict) -> None:
    """Check every chapter's parameters (with its defaults) against the model's config and the corpus before
    anything runs (:mod:`identifiability.preflight`)."""
    from .preflight import check

    chapters = {s.stem: {**declared_parameters(s), **coerce_parameters(s, params, strict=False)} for s in sources}
    check(chapters, params.get("model"), params.get("corpus", paths.DEFAULT_CORPUS))


def vendor(static: Path) -> None:
    """Put every script the pages load into ``static`` (no CDN at read time)."""
    from .charts.render import write_vega_bundle

    static.mkdir(parents=True, exist_ok=True)
    write_vega_bundle(static / "vega-bundle.js")
    npm = paths.source_root() / ".cache" / "npm" / "node_modules"
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


BINDERHUB = "https://mybinder.org"
_HOSTED = re.compile(r"^https://(github\.com|gitlab\.com)/[\w.-]+/[\w.-]+?(\.git)?/?$")


def repository_url(url: str | None) -> str | None:
    """The public repository the launch buttons point at: ``url`` if given, else this checkout's ``origin``
    remote when that is a GitHub or GitLab https address; None (no launch buttons) otherwise."""
    if url is None:
        try:
            url = subprocess.run(
                ["git", "remote", "get-url", "origin"],
                cwd=paths.source_root(),
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
        if not _HOSTED.match(url):
            return None
    if not _HOSTED.match(url):
        raise ParameterError(
            f"repository {url!r} must be a https://github.com/<owner>/<repo> or "
            "https://gitlab.com/<owner>/<repo> address (Binder builds it from there)"
        )
    return url.removesuffix("/").removesuffix(".git")


def stage_config(stage: Path, repository: str | None, branch: str = "main") -> None:
    """Copy the book's configuration into ``stage``; with a public repository, add its Binder launch
    buttons (plain links: the offline build and offline reading never touch them).

    Binder opens ``notebooks/<chapter>.ipynb``, which ``.binder/postBuild`` makes from the MyST sources.
    No Colab button: Colab opens only ``.ipynb`` files stored on GitHub and has none of the book's packages.
    """
    import yaml

    root = paths.source_root()
    for f in ("_config.yml", "_toc.yml", "references.bib"):
        if (root / f).exists():
            shutil.copy2(root / f, stage / f)
    # The README is a page of the book (book/readme in _toc.yml), so the pages can link to its commands.
    readme = (root / "README.md").read_text(encoding="utf-8").split("\n", 1)[1]
    (stage / "book").mkdir(parents=True, exist_ok=True)
    (stage / "book" / "readme.md").write_text(
        "# Set-up and commands (README)\n\nThe repository's `README.md`, as it was when this copy was built.\n"
        + readme,
        encoding="utf-8",
    )
    if repository is None:
        return
    cfg = yaml.safe_load((stage / "_config.yml").read_text(encoding="utf-8"))
    cfg["repository"] = {"url": repository, "branch": branch, "path_to_book": ""}
    cfg.setdefault("html", {})["use_repository_button"] = True
    cfg["launch_buttons"] = {
        **cfg.get("launch_buttons", {}),
        "binderhub_url": BINDERHUB,
        "notebook_interface": "jupyterlab",
    }
    (stage / "_config.yml").write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")


def build_book(
    model: str | None,
    corpus: str,
    parameters: dict,
    only: list[str] | None = None,
    out: Path | None = None,
    executed: Path | None = None,
    results_dir: Path | None = None,
    repository: str | None = None,
    branch: str = "main",
) -> Path:
    """Execute the chapters and build the HTML book; returns the html folder.

    ``executed``: a folder of already executed ``<chapter>.ipynb`` files to render instead of running the
    chapters again (the tests execute each chapter once and reuse it here), with their ``results_dir``.
    ``repository``/``branch``: the public repository for the Binder launch buttons (see
    :func:`repository_url`; default: this checkout's GitHub/GitLab ``origin``, else no buttons).
    """
    from tqdm import tqdm

    repository = repository_url(repository)  # a bad address fails here, before anything is removed or run
    src_root = paths.source_root()
    sources = [s for s in chapter_sources() if not only or s.stem in only]
    if only and len(sources) != len(set(only)):
        known = [s.stem for s in chapter_sources()]
        bad = next(o for o in only if o not in known)
        raise _unknown(bad, known, "the chapters of _toc.yml")
    results_dir = Path(results_dir or paths.results_dir(model, corpus)).resolve()
    # Relative to the checkout where it lies inside it (the notebooks run there), so no machine's absolute
    # path is printed on the pages.
    shown = results_dir.relative_to(src_root) if results_dir.is_relative_to(src_root) else results_dir
    params = {"model": model or DEFAULT_MODEL, "corpus": corpus, "results_dir": str(shown), **parameters}
    check_parameters(sources, params)  # fail early on a bad parameter, before an hour of compute
    if executed is None:
        preflight(sources, params)
    root = out or paths.build_dir(model, corpus)
    stage = root / "stage"
    if stage.exists():
        shutil.rmtree(stage)  # from clean: Sphinx keeps stale static files otherwise
    shutil.copytree(src_root / "book", stage / "book")
    stage_config(stage, repository, branch)
    vendor(stage / "book" / "_vendor")
    for source in tqdm(sources, desc="chapters", unit="notebook"):
        t0 = time.time()
        if executed is not None:
            (stage / "notebooks").mkdir(parents=True, exist_ok=True)
            shutil.copy2(executed / f"{source.stem}.ipynb", stage / "notebooks" / f"{source.stem}.ipynb")
            continue
        run_notebook(source, stage / "notebooks", params, strict=False)
        tqdm.write(f"  {source.stem}: {time.time() - t0:.0f} s")
    for source in chapter_sources():  # --only: the other chapters get a stub so every link still resolves
        if source not in sources:
            title = source.stem.split("_", 1)[-1].replace("_", " ").capitalize()
            (stage / "notebooks" / f"{source.stem}.md").write_text(
                f"# {title}\n\nThis chapter was not executed in this build (`--only`).\n", encoding="utf-8"
            )
    from . import book

    ran = {s.stem: book.parameters_used(stage / "notebooks" / f"{s.stem}.ipynb") for s in chapter_sources()}
    book.write_run_page(stage, params, results_dir, ran)
    book.write_teachers_page(
        stage,
        stage / "notebooks",
        [s.stem for s in chapter_sources()],
        os.cpu_count(),
        str(params.get("device", "cpu")),
    )
    _write_claims_page(stage, results_dir)
    book.prepare_pages(stage / "notebooks", root / "downloads")  # charts get the HTML the pages draw them with
    html = root / "html"
    if html.exists():
        shutil.rmtree(html)
    # Warnings are errors (-W): a broken reference or missing figure fails the build.
    cmd = [
        str(Path(sys.executable).parent / "jupyter-book"),
        "build",
        str(stage),
        "--path-output",
        str(root / "jb"),
        "-W",
        "-n",
        "--keep-going",
    ]
    subprocess.run(cmd, check=True)
    shutil.move(str(root / "jb" / "_build" / "html"), html)
    shutil.rmtree(root / "jb", ignore_errors=True)
    book.write_downloads(root / "downloads", html)  # the .ipynb each page offers: the executed chapter
    book.prune_static(html)  # ship only the scripts some page loads
    return html


def _fmt(x) -> str:
    if x is None:
        return "—"
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def _write_claims_page(stage: Path, results_dir: Path) -> None:
    """The paper-vs-replication table, from data/claims.csv and the verdict each chapter recorded."""
    from .results import claims_table

    esc = lambda t: str(t).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = [
        "# Paper vs replication",
        "",
        "Each claim of the paper, and each objection of the review: the paper's value, this build's estimate with "
        "its 95% interval, the null baseline (what chance or dimension counting alone would give), and the "
        "verdict that the claim's rule (listed below, fixed before the numbers) computes from them. Generated "
        "from `data/claims.csv` and the chapters' results files; each id links to its chapter, and the reason for "
        "each verdict is below the table.",
        "",
        "| | claim (where; the paper's value) | this build (95% interval) | baseline | verdict |",
        "|---|---|---|---|---|",
    ]
    table = claims_table(results_dir)
    for r in table:
        est = _fmt(r.get("estimate"))
        ci = r.get("ci95")
        if ci and ci[0] != ci[1]:
            est += f" ({_fmt(ci[0])} to {_fmt(ci[1])})"
        lines.append(
            f"| {{doc}}`{r['id']} <../notebooks/{r['chapter']}>` | {esc(r['claim'])} ({esc(r['source'])}, "
            f"{esc(r['where'])}; *{esc(r['paper_value'])}*) | {est} | {_fmt(r.get('baseline'))} | **{r['verdict']}** |"
        )
    lines += ["", "## Why each verdict", ""]
    for r in table:
        base = f" Baseline: {r['baseline_note']}." if r.get("baseline_note") else ""
        lines.append(f"**{r['id']} — {r['verdict']}.** {esc(r.get('reason', 'the chapter has not run'))}.{base}\n")
    lines += [
        "## The rules",
        "",
        "Each verdict follows a rule fixed from the paper's (or the review's) statement before the numbers were "
        "looked at; the rules are committed in `data/claims.csv` apart from, and before, the code that applies them "
        "(`identifiability.verdicts`).",
        "",
    ]
    lines += [f"**{r['id']}.** {r['rule']}\n" for r in table]
    (stage / "book" / "claims.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _parse_params(pairs: list[str]) -> dict:
    out = {}
    for p in pairs:
        if "=" not in p:
            raise ParameterError(f"parameter {p!r} must look like name=value, e.g. -p n_sentences=50")
        k, v = p.split("=", 1)
        out[k.strip()] = v
    return out


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _cluster_args(s) -> None:
    s.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. tcp://host:8786 (default: local)")
    s.add_argument("--workers", type=int, help="local cluster: single-threaded worker processes (default: cores)")


def _sweep_parsers(sub) -> None:
    s = sub.add_parser("sweep", help="run chapters over models x corpora x seeds on Dask (resumable)")
    s.add_argument("--models", type=_csv, default=[DEFAULT_MODEL], help="comma-separated ids or folders")
    s.add_argument("--corpora", type=_csv, default=[paths.DEFAULT_CORPUS], help="comma-separated corpora")
    s.add_argument("--seeds", type=_csv, default=["0"], help="comma-separated seeds (the chapters' seed)")
    s.add_argument("--chapters", type=_csv, help="comma-separated stems or numbers, e.g. 03,06 (default: all)")
    s.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        help="chapter parameter name=value (every chapter that declares it), or chapter:name=value (one "
        "chapter, by stem or number, e.g. 06:n_sentences=50)",
    )
    _cluster_args(s)
    h = sub.add_parser("hta", help="exact HTA for chapter 6's sentences, spread over a Dask cluster")
    h.add_argument("--model", default=DEFAULT_MODEL)
    h.add_argument("--corpus", default=paths.DEFAULT_CORPUS)
    h.add_argument("--n", type=int, help="sentences (default: chapter 6's n_sentences)")
    h.add_argument("--seed", type=int, help="sampling seed (default: chapter 6's)")
    h.add_argument("--max-tokens", type=int, help="longest sentence (default: chapter 6's max_tokens)")
    h.add_argument("--group", type=int, default=1, help="sentences per task (default 1)")
    _cluster_args(h)


def _sweep_main(a) -> int:
    from . import sweep

    try:
        if a.cmd == "hta":
            out = sweep.hta_job(a.model, a.corpus, a.n, a.seed, a.max_tokens, a.group, a.scheduler, a.workers)
            print(
                f"exact HTA: {out['sentences']} sentences, {out['cached_before']} cached before, "
                f"{out['computed']} computed in {out['seconds']:.0f} s"
            )
            return 0
        try:
            seeds = [int(x) for x in a.seeds]
        except ValueError:
            got = ",".join(a.seeds)
            raise ParameterError(f"--seeds must be whole numbers, e.g. --seeds 0,1,2; got {got}") from None
        params = _parse_params(a.param)
        report = sweep.sweep(a.models, a.corpora, seeds, a.chapters, params, a.scheduler, a.workers)
    except (sweep.SweepError, *_user_errors()) as e:
        print(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    print(report.summary())
    return 1 if report.failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="identifiability", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("book", "run"):
        s = sub.add_parser(name)
        s.add_argument(
            "--model", default=DEFAULT_MODEL, help="Hugging Face id or local folder (default: embedded MiniLM)"
        )
        s.add_argument("--corpus", default="lee", help="lee | lee_test | polarity | glue/<task> | path/to/file.txt")
        s.add_argument("-p", "--param", action="append", default=[], help="chapter parameter name=value")
        if name == "book":
            s.add_argument("--only", nargs="*", help="chapter notebook stems to run (default: all)")
            s.add_argument(
                "--repository",
                help="public GitHub/GitLab https address for the Binder launch "
                "buttons (default: the origin remote, if it is one)",
            )
            s.add_argument("--branch", default="main", help="branch the launch buttons open (default: main)")
        else:
            s.add_argument("notebooks", nargs="+", type=Path)
            s.add_argument("--out", type=Path, help="folder for the executed notebooks (default: _build/run)")
    _sweep_parsers(sub)
    from . import finetune  # its own subcommands: finetune, init-random

    finetune.add_parsers(sub)
    c = sub.add_parser("compare", help="compare two folders of results files (timings and paths skipped)")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    c.add_argument("--rtol", type=float, default=1e-6, help="relative tolerance for numbers (default 1e-6)")
    c.add_argument("--atol", type=float, default=0.0, help="absolute tolerance for numbers (default 0)")
    a = ap.parse_args(argv)
    user_errors = _user_errors()
    if a.cmd == "compare":
        from .compare import compare_folders

        try:
            result = compare_folders(a.old, a.new, rtol=a.rtol, atol=a.atol)
        except FileNotFoundError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(result.report())
        return 0 if result.identical else 1
    if a.cmd in ("sweep", "hta"):
        return _sweep_main(a)
    if a.cmd in ("finetune", "init-random"):
        return finetune.command(a, _user_errors())
    try:
        params = _parse_params(a.param)
        if a.cmd == "book":
            html = build_book(a.model, a.corpus, params, a.only, repository=a.repository, branch=a.branch)
            print(f"book written to {html}/index.html")
        else:
            base = {"model": a.model, "corpus": a.corpus, **params}
            check_parameters(a.notebooks, base)
            preflight(a.notebooks, base)
            for nb in a.notebooks:
                print(run_notebook(nb, a.out or paths.source_root() / "_build" / "run", base, strict=False))
    except ChapterFailed as e:  # what earlier chapters wrote stays where it is
        print(f"error: {e}", file=sys.stderr)
        return 1
    except user_errors as e:  # each one line that says what to do
        print(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    # `python -m identifiability.cli` runs this file as __main__, a second copy of the module: the modules it
    # calls raise identifiability.cli's exception classes, which only the package's own main() catches
    from identifiability.cli import main as package_main

    sys.exit(package_main())
