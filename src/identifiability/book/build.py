"""The book build: stage the sources, vendor the page scripts, execute the chapters, write the generated
pages, and run Jupyter Book.

The book for the embedded default model goes to ``_build/html``; any other model or corpus goes to
``_build/<model>/<corpus>/html`` (:attr:`identifiability.models.keys.Target.build_dir`) so runs never overwrite
each other.
With a public GitHub or GitLab repository, each chapter page gets a Binder launch button (plain links).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..base import paths
from ..base.errors import ChapterFailed
from ..chapters import contract as chapters
from ..chapters.contract import CHAPTERS, chapter_sources, check_parameters, find, preflight
from ..chapters.executed import parameters_used
from ..chapters.execution import run_notebook
from ..chapters.parameters import ParameterError, declared_parameters
from ..models import keys
from . import course, findings, handout, pages
from . import render as book


def vendor(static: Path) -> None:
    """Put every script the pages load into ``static`` (no CDN at read time)."""
    from ..charts.render import write_vega_bundle

    static.mkdir(parents=True, exist_ok=True)
    write_vega_bundle(static / "vega-bundle.js")
    npm = paths.source_root() / ".cache" / "npm" / "node_modules"
    mathjax = npm / "mathjax" / "es5"
    copies = {
        # MathJax: the combined TeX->HTML component plus what it loads on demand (the CHTML fonts,
        # extensions, menu); the speech engine (sre, 4 MB) and the SVG output, which no page uses, are left out.
        "mathjax/tex-chtml.js": mathjax / "tex-chtml.js",
        "mathjax/output/chtml": mathjax / "output" / "chtml",
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
    # no repository button: its GitHub icon alone loads a 118 kB font on every page (a page's first load is
    # held under 1.2 MB gzip); the teachers' page names the repository
    cfg["launch_buttons"] = {
        **cfg.get("launch_buttons", {}),
        "binderhub_url": BINDERHUB,
        "notebook_interface": "jupyterlab",
    }
    (stage / "_config.yml").write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")


# Chapter 9 in every build: the book's model and its random-initialisation control (seconds to make) through
# chapter 4 on the held-out text, small enough to add under a minute to a build; `make compare` adds the
# fine-tunes and larger runs, which the page then prefers.
CONTROL_PARAMS = {"n_sentences": 80, "second_corpus": "", "epochs": 3}


CONTROL = "control runs"  # the job that makes chapter 9's control runs
CONTROL_SECONDS = 55.0  # its seconds in `make book`, one run after the other on one thread (as book_seconds)


def control_runs(
    model: str | keys.ModelRef,
    judge_corpus: str,
    seed: int = 0,
    params: dict | None = None,
    client=None,
    slots: int | None = None,
) -> list[str]:
    """Make the random-initialisation control of ``model`` (kept in the data folder's ``models/``) and run
    chapter 4 on ``model`` and on it (``params``, default :data:`CONTROL_PARAMS`) as sweep runs, which later
    builds reuse; returns a line per run that could not be made (the page then says what is missing).
    ``client``: a Dask client to run them on (the caller's to close; ``slots`` of its workers at most), else a
    local cluster of two workers. ``model``: a name, or a ref the caller resolved already."""
    from ..base.errors import one_line
    from ..models.finetune import init_random
    from ..runs.sweep import sweep

    try:
        model = keys.model_ref(model)
        control = init_random(model, seed=0)["folder"]
        report = sweep([model, control], [judge_corpus], [seed], ["04"], params or CONTROL_PARAMS, workers=2,
                       client=client, progress=False, slots=slots)  # fmt: skip
    except Exception as e:  # noqa: BLE001 - no other page needs these runs: the build goes on, chapter 9 says so
        return [one_line(e)]
    return [f"{what if isinstance(what, str) else what.label()}: {why}" for what, why in report.failed]


def timed_run(source: Path, out: Path, params: dict) -> tuple[float, str | None]:
    """:func:`identifiability.chapters.execution.run_notebook` as a cluster worker's task, without progress bar;
    returns its seconds and the line that says why the chapter stopped, or None. The line is returned, not
    raised: a task that raises makes its worker log the traceback as well."""
    t0 = time.time()
    try:
        run_notebook(source, out, params, progress=False, strict=False)
    except ChapterFailed as e:
        return time.time() - t0, str(e)
    return time.time() - t0, None


def book_jobs(sources: list[Path]) -> dict[str, tuple[float, frozenset[str]]]:
    """The book's jobs, {name: (expected seconds, the jobs it waits for)}: a chapter stem each, and chapter 9's
    control runs (:data:`CONTROL`, before chapter 9) when chapter 9 is among ``sources``. A chapter waits for
    the chapters it reads (:attr:`ChapterSpec.reads`) that are among ``sources``."""
    stems = {s.stem for s in sources}
    jobs = {}
    for s in sources:
        spec = chapters.spec_of(s)
        after = {r for r in spec.reads if r in stems}
        if chapters.CONTROL_RUNS in spec.roles:
            jobs[CONTROL] = (CONTROL_SECONDS, frozenset())
            after.add(CONTROL)
        jobs[s.stem] = (spec.book_seconds, frozenset(after))
    return jobs


def start_order(jobs: dict[str, tuple[float, frozenset[str]]]) -> dict[str, float]:
    """Each job's priority: its expected seconds plus those of the longest chain of jobs that wait for it. A
    free worker takes the ready job of highest priority, so the longest chains start first and the short
    chapters fill in at the end (on 2 cores chapter 6 on one worker, chapters 4 then 5 on the other)."""
    memo: dict[str, float] = {}

    def tail(name: str) -> float:
        if name not in memo:
            waiting = [n for n, (_, after) in jobs.items() if name in after]
            memo[name] = jobs[name][0] + max((tail(n) for n in waiting), default=0.0)
        return memo[name]

    return {name: tail(name) for name in jobs}


def next_job(pending: set[str], done: set[str], jobs: dict, order: dict[str, float]) -> str | None:
    """The ready job (every job it waits for done) of highest priority, ties in book order; None if none is
    ready."""
    ready = [n for n in jobs if n in pending and jobs[n][1] <= done]
    return max(ready, key=lambda n: order[n], default=None)


def book_threads(cores: int) -> tuple[int, int]:
    """(workers, threads per chapter) of the book's cluster on ``cores`` cores: two chapters at a time, each on
    half the cores (one thread each on 2 cores, 3 cores: three of one thread)."""
    threads = max(1, cores // 2)
    return max(1, cores // threads), threads


def execute_chapters(
    sources: list[Path], out: Path, params: dict, model: keys.ModelRef | None = None
) -> dict[str, int]:
    """Execute ``sources`` into ``out`` as the book does: on a local Dask cluster of workers that run one
    chapter at a time each (:func:`book_threads`), the longest chains first (:func:`start_order`), each chapter
    once the chapters it reads have ended, chapter 9 after its control runs (:func:`control_runs`, on the same
    workers). On one core, or for one job alone, they run here one after the other, in book order, with a
    progress bar per chapter. Two chapters side by side on one thread each finish sooner than one after the
    other on two threads, since two threads of one matrix product wait for each other at every barrier; the
    longest chains first keep both workers busy to the end (the teachers' page shows each chapter's time).
    Every chapter started ends before a failure is raised (nothing computed is lost), and none starts after
    it. Returns {stem: threads} of the chapters that ran beside others."""
    from tqdm import tqdm

    jobs = book_jobs(sources)
    workers, threads = book_threads(os.cpu_count() or 1)
    by_stem = {s.stem: s for s in sources}
    if workers < 2 or len(jobs) < 2:
        for name in jobs:  # book order, the control runs just before chapter 9
            if name == CONTROL:
                _control(by_stem, params, model)
            else:
                t0 = time.time()
                run_notebook(by_stem[name], out, params, strict=False)
                tqdm.write(f"  {name}: {time.time() - t0:.0f} s")
        return {}
    from ..base import cluster

    os.environ.setdefault(paths.DATA_ENV, str(paths.data_root()))  # the workers' kernels file results here
    order = start_order(jobs)
    print(f"{len(jobs)} jobs on {workers} workers of {threads} thread{'s' * (threads > 1)}, longest chains first")
    client = cluster.connect(workers=workers, threads=threads)
    pending, done, running, stopped = set(jobs), set(), {}, []
    # no rate or time left: the jobs' lengths differ a hundredfold, so any estimate of the time left misleads
    layout = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} jobs [{elapsed}{postfix}]"
    bar = tqdm(total=len(jobs), desc="chapters", mininterval=5, bar_format=layout)
    try:
        while pending or running:
            while len(running) < workers and not stopped:
                name = next_job(pending, done, jobs, order)
                if name is None:
                    break
                pending.discard(name)
                if name == CONTROL:
                    # its sweep hands its runs to the workers
                    fut = _Thread(_control, by_stem, params, model, client, 1)
                else:
                    fut = client.submit(timed_run, by_stem[name], out, params, key=f"book-{name}", pure=False)
                running[name] = (fut, time.time())
            if stopped and not running:
                break
            time.sleep(0.5)
            for name, (fut, t0) in list(running.items()):
                if not fut.done():
                    continue
                del running[name]
                done.add(name)
                failure = fut.result()[1] if name != CONTROL else fut.result()
                stopped += [failure] if failure else []
                bar.update()
                tqdm.write(f"  {name}: {time.time() - t0:.0f} s" + (" (stopped)" if failure else ""))
            now = time.time()
            bar.set_postfix_str(", ".join(f"{n} {now - t0:.0f} s" for n, (_, t0) in running.items()), refresh=False)
            bar.update(0)
    finally:
        bar.close()
        cluster.close(client, own=True)
    if stopped:
        raise ChapterFailed(
            stopped[0] + (f" (and {len(stopped) - 1} more, each in its notebook)" if len(stopped) > 1 else "")
        )
    return {name: threads for name in done if name != CONTROL}


class _Thread:
    """``fn(*args)`` on a daemon thread (an interrupted build never waits for it), read as a future is."""

    def __init__(self, fn, *args):
        self._result, self._error = None, None
        self._thread = threading.Thread(target=self._run, args=(fn, args), daemon=True)
        self._thread.start()

    def _run(self, fn, args) -> None:
        try:
            self._result = fn(*args)
        except BaseException as e:  # noqa: BLE001 - raised again by result(), in the thread that reads it
            self._error = e

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self):
        if self._error is not None:
            raise self._error
        return self._result


def _control(
    by_stem: dict[str, Path], params: dict, model: keys.ModelRef | None = None, client=None, slots: int | None = None
) -> None:
    """Chapter 9's control runs (:func:`control_runs`), with a line for each run that is missing; returns
    None (they never stop the book: chapter 9 says what is missing)."""
    from tqdm import tqdm

    source = next(s for s in by_stem.values() if chapters.CONTROL_RUNS in chapters.spec_of(s).roles)
    judge = params.get("judge_corpus") or declared_parameters(source)["judge_corpus"]
    model = params["model"] if model is None else model
    for line in control_runs(model, judge, int(params.get("seed", 0)), client=client, slots=slots):
        tqdm.write(f"  the comparison across models lacks a run: {line}")


def build_book(
    model: str | None | keys.ModelRef,
    corpus: str | keys.CorpusRef,
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
    ``model`` and ``corpus``: names, or refs the caller resolved already (:func:`identifiability.models.keys.target`).
    """
    repository = repository_url(repository)  # a bad address fails here, before anything is removed or run
    src_root = paths.source_root()
    chosen = {c.stem for c in find(only)} if only else set(CHAPTERS)
    sources = [s for s in chapter_sources() if s.stem in chosen]
    target = keys.target(model, corpus)
    model, corpus = target.model.name, target.corpus.name
    results_dir = Path(results_dir or target.results_dir).resolve()
    # Relative to the checkout where it lies inside it (the notebooks run there), so no machine's absolute
    # path is printed on the pages.
    shown = results_dir.relative_to(src_root) if results_dir.is_relative_to(src_root) else results_dir
    params = {"model": model, "corpus": corpus, "results_dir": str(shown), **parameters}
    check_parameters(sources, params)  # fail early on a bad parameter, before an hour of compute
    if executed is None:
        preflight(sources, params, model=target.model)
    root = out or target.build_dir
    stage = root / "stage"
    if stage.exists():
        shutil.rmtree(stage)  # from clean: Sphinx keeps stale static files otherwise
    shutil.copytree(src_root / "book", stage / "book")
    stage_config(stage, repository, branch)
    vendor(stage / "book" / "_vendor")
    beside = {}
    if executed is None:
        beside = execute_chapters(sources, stage / "notebooks", params, target.model)
    else:
        (stage / "notebooks").mkdir(parents=True, exist_ok=True)
        for source in sources:
            shutil.copy2(executed / f"{source.stem}.ipynb", stage / "notebooks" / f"{source.stem}.ipynb")
    for source in chapter_sources():  # --only: the other chapters get a stub so every link still resolves
        if source not in sources:
            title = source.stem.split("_", 1)[-1].replace("_", " ").capitalize()
            (stage / "notebooks" / f"{source.stem}.md").write_text(
                f"# {title}\n\nThis chapter was not executed in this build (`--only`).\n", encoding="utf-8"
            )
    ran = {s.stem: parameters_used(stage / "notebooks" / f"{s.stem}.ipynb") for s in chapter_sources()}
    pages.write_run_page(stage, params, results_dir, ran)
    pages.write_teachers_page(
        stage,
        stage / "notebooks",
        [s.stem for s in chapter_sources()],
        os.cpu_count(),
        str(params.get("device", "cpu")),
        repository=repository,
        beside=beside,
    )
    course.write_course(stage, stage / "notebooks")  # the sessions, exercises and prerequisites
    findings.write_claims_page(stage, results_dir, target.model)
    findings.write_findings(stage, results_dir)
    book.prepare_pages(stage / "notebooks", root / "downloads")  # charts get the HTML the pages draw them with
    handout.publish(root / "downloads", stage / "notebooks", sources)  # each page links its student version
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
    # Its own session: a Ctrl-C reaches this process alone, which stops the build in one line
    # (identifiability.base.stops) and kills it, rather than Sphinx printing its own report.
    subprocess.run(cmd, check=True, start_new_session=True)
    shutil.move(str(root / "jb" / "_build" / "html"), html)
    shutil.rmtree(root / "jb", ignore_errors=True)
    book.write_downloads(root / "downloads", html)  # the .ipynb each page offers: the executed chapter
    book.prune_static(html)  # ship only the scripts some page loads
    return html
