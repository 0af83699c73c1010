"""Sweeps over models × corpora × seeds × chapters on Dask distributed.

    identifiability sweep --models M1,M2 --corpora lee,polarity --seeds 0,1,2 [--chapters 03,06]
                          [-p name=value ...] [--scheduler tcp://host:8786 | --workers N]

Each (model, corpus, seed, chapter) is one Dask task that executes the chapter with papermill on a worker
(``seed`` is the chapter's own ``seed`` parameter). The default cluster is a ``LocalCluster`` with one
single-threaded worker process per core; ``--scheduler`` connects to any running scheduler instead (e.g.
one started by ``dask-jobqueue`` on SLURM or PBS). Workers need no shared data folder: a worker executes a
run in its own data folder and sends the finished run's files back with the task's result; the client files
them in its own (:func:`file_run`). The model must be reachable from every worker by the same id or path.

A run is keyed by the model's content key, the corpus (and a text file's content), the chapter, its
parameters and a hash of the chapter source, the package source and the claims table (:class:`Run`). A
run is finished when its folder holds ``run.json``; finished runs are skipped, so a sweep can be stopped
and started again. A chapter executes into a private ``.partial-*`` folder of the worker; the client writes
the files it gets back into a private folder of its own, ``run.json`` last, and renames that folder into
place: a killed worker or a Ctrl-C never leaves a half-written or half-finished run behind, and a retried
task writes the same folder. A failing task is retried once (``retries=1``) and then reported with its
one-line reason while the others go on. Each attempt is logged on the scheduler (an event), so a run's
``attempts`` count the attempts of workers that were killed.

Chapters stay in-process on their worker: a papermill kernel inside a worker must not wait on the workers.
Exact HTA at corpus scale is its own job (:mod:`identifiability.runs.corpus_hta`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..base import cluster, paths
from ..base.errors import ChapterFailed, SweepError, UserError, one_line
from ..base.fileio import atomic_write, read_json, write_json
from ..chapters.contract import CHAPTERS, check_parameters, coerce_parameters, current_stem, find, preflight
from ..chapters.execution import run_notebook
from ..chapters.preflight import check_data_folder
from ..models import keys

RUN_FILE = "run.json"


class RunFailed(RuntimeError):
    """A run's chapter stopped with an error on a worker: the message (its first line says why), the executed
    notebook's bytes (None when the kernel died before writing it) and the worker's path of it, which the
    message names and the client replaces with where it keeps the notebook."""

    def __init__(self, message: str, notebook: bytes | None = None, named: str = ""):
        super().__init__(message, notebook, named)
        self.message, self.notebook, self.named = message, notebook, named

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Run:
    """One task of a sweep: a chapter executed on one model, corpus and seed with fixed parameters."""

    model: str  # as the user wrote it
    model_key: str  # the folder name results are filed under (:attr:`identifiability.models.keys.ModelRef.key`)
    content_key: str  # SHA-256 of the weights, config and tokenizer files
    corpus: str
    corpus_key: str  # name, plus a text file's SHA-256
    chapter: str  # notebook stem
    seed: int
    params: dict = field(default_factory=dict)  # the chapter's other parameters, as given (-p)
    source_hash: str = ""

    @property
    def key(self) -> str:
        """The run's identity: everything its results depend on."""
        d = asdict(self)
        d.pop("model")  # the same weights under another name are the same run
        d.pop("model_key")
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()

    def folder(self, root: Path) -> Path:
        return (
            root / self.model_key / keys.corpus_ref(self.corpus).key / self.chapter / f"seed{self.seed}-{self.key[:12]}"
        )

    def label(self) -> str:
        return f"{self.chapter} on {self.model_key}/{keys.corpus_ref(self.corpus).key} seed {self.seed}"


@dataclass
class Report:
    """What a sweep did: runs executed, skipped (already finished) and failed (with one-line reasons)."""

    ran: list[Run] = field(default_factory=list)
    skipped: list[Run] = field(default_factory=list)
    failed: list[tuple[Run | str, str]] = field(default_factory=list)
    table: Path | None = None
    seconds: float = 0.0
    spread: str = ""  # the claims' spread over seeds next to their own intervals (:func:`claims_spread`)

    def summary(self) -> str:
        lines = [self.spread] if self.spread else []
        lines += [
            f"{len(self.ran)} run(s) executed, {len(self.skipped)} already finished, {len(self.failed)} failed "
            f"in {self.seconds:.0f} s" + (f"; results table: {self.table}" if self.table else "")
        ]
        lines += [f"  failed: {r.label() if isinstance(r, Run) else r}: {why}" for r, why in self.failed]
        return "\n".join(lines)


def source_hash(chapter_source: Path) -> str:
    """SHA-256 over the chapter's source, every module of the package and the claims table: a change to any
    of them makes a new run."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]  # the package: this module lives in runs/
    files = [chapter_source, paths.claims_file(), *sorted(package.rglob("*.py"))]
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def resolve_chapters(names: Sequence[str] | None) -> list[Path]:
    """Chapter sources for ``names`` (stems, or their two-digit prefixes); default: every chapter the contract
    marks as swept (:data:`identifiability.chapters.contract.CHAPTERS`). An unknown name raises ParameterError naming
    the closest chapter."""
    chosen = find(names) if names else [c for c in CHAPTERS.values() if c.swept]
    return [c.source for c in chosen]


def split_scoped(params: dict, sources: Sequence[Path]) -> tuple[dict, dict[str, dict]]:
    """Split ``-p`` parameters into those for every chapter (``name``) and those for one chapter
    (``chapter:name``, the chapter by stem or number, e.g. ``06:n_sentences=50``); returns (shared,
    {stem: its own}), the latter for every chapter of ``sources``. A chapter's own value wins over a shared
    one. A chapter that is not part of the sweep raises SweepError."""
    shared, scoped = {}, {s.stem: {} for s in sources}
    for key, value in params.items():
        if ":" not in key:
            shared[key] = value
            continue
        chapter, name = (x.strip() for x in key.split(":", 1))
        (source,) = resolve_chapters([chapter])
        if source.stem not in scoped:
            raise SweepError(
                f"-p {key}=...: chapter {source.stem} is not in this sweep's chapters ({', '.join(scoped)})"
            )
        scoped[source.stem][name] = value
    return shared, scoped


def plan(
    models: Sequence[str | keys.ModelRef],
    corpora: Sequence[str],
    seeds: Sequence[int],
    chapters: Sequence[str] | None,
    params: dict,
) -> tuple[list[Run], list[tuple[str, str]]]:
    """The sweep's runs, and (what, one-line reason) for every model or corpus that cannot run. Each model
    (a name, or one resolved already) and each corpus is resolved once, here.

    Parameters are checked for every chapter first (a bad ``-p`` stops the whole sweep); a model that cannot
    be fingerprinted, or fails the pre-flight checks on a corpus, is reported and left out, the rest goes on.
    """
    if not models or not corpora or not seeds:
        raise SweepError("give at least one model, one corpus and one seed, e.g. --models default --corpora lee")
    sources = resolve_chapters(chapters)
    params, scoped = split_scoped(params, sources)
    if "seed" in params or any("seed" in v for v in scoped.values()):
        raise SweepError("the seed is a sweep dimension: pass --seeds 0,1,2 instead of -p seed=...")
    names = [m.name if isinstance(m, keys.ModelRef) else m for m in models]
    check_parameters(sources, {"model": names[0], "corpus": corpora[0], **params})
    for s in sources:
        coerce_parameters(s, scoped[s.stem], strict=True)  # a chapter's own parameter must be its own
    check_data_folder()  # not one model's or corpus's problem: the whole sweep stops
    hashes = {s.stem: source_hash(s) for s in sources}
    runs, problems = [], []
    corpus_refs = [keys.corpus_ref(c) for c in corpora]
    for model, name in zip(models, names):
        try:
            ref = keys.model_ref(model)
            ckey, mkey = ref.content_key, ref.key
        except UserError as e:
            problems.append((f"model {name}", one_line(e)))
            continue
        for cref in corpus_refs:
            corpus = cref.name
            try:
                preflight(sources, {"model": name, "corpus": corpus, **params}, scoped, model=ref)
            except UserError as e:
                problems.append((f"{name} on {corpus}", one_line(e)))
                continue
            corpus_id = cref.identity
            for seed in seeds:
                for s in sources:
                    own = {**coerce_parameters(s, params, strict=False), **coerce_parameters(s, scoped[s.stem])}
                    own.pop("results_dir", None)
                    runs.append(Run(name, mkey, ckey, corpus, corpus_id, s.stem, int(seed), own, hashes[s.stem]))
    return runs, problems


def is_finished(run: Run, root: Path) -> bool:
    return (run.folder(root) / RUN_FILE).is_file()


def _slots(client) -> int:
    """Worker threads the cluster has now (a cluster that grows gets more runs at once)."""
    return max(1, sum(client.nthreads().values()))


def longest_first(runs: Sequence[Run], root: Path) -> list[Run]:
    """``runs`` in the order to start them: the longest expected first, so that no long run is left to run
    alone at the end while the other workers idle. Expected: the median seconds of the chapter's finished runs
    on the corpus under ``root``, else the chapter's ``expected_seconds`` in the contract."""
    seen: dict[tuple[str, str], list[float]] = {}
    for f in root.rglob(RUN_FILE) if root.is_dir() else []:
        m = read_json(f)
        seen.setdefault((current_stem(m["chapter"]), keys.corpus_ref(m["corpus"]).key), []).append(float(m["seconds"]))

    def expected(r: Run) -> float:
        past = seen.get((r.chapter, keys.corpus_ref(r.corpus).key))
        return statistics.median(past) if past else CHAPTERS[r.chapter].expected_seconds

    return sorted(runs, key=expected, reverse=True)  # stable: ties keep the plan's order


def execute(run: Run, data_root: str | None = None, topic: str | None = None) -> dict:
    """Execute one run (on a worker) into a private folder of the worker's data folder (``data_root``, else
    its own); returns its files, ``{name: bytes}`` under ``files``, and its seconds and end time, for the
    client to file (:func:`file_run`). Raises :class:`RunFailed` with the executed notebook when the chapter
    fails."""
    from distributed import get_worker

    if data_root:
        os.environ[paths.DATA_ENV] = data_root  # a local cluster: the kernel files its caches where the client looks
    if topic:  # the attempt is counted on the scheduler: a worker killed mid-run loses its own files
        with contextlib.suppress(ValueError):  # not on a worker (called directly)
            get_worker().log_event(topic, {"run": run.key, "pid": os.getpid()})
    own = run.folder(paths.sweep_root())
    partial = own.parent / f".partial-{own.name}-{uuid.uuid4().hex[:8]}"
    t0 = time.time()
    try:
        params = {**run.params, "model": run.model, "corpus": run.corpus, "seed": run.seed}
        params["results_dir"] = str(partial)
        notebook = partial / f"{run.chapter}.ipynb"
        try:
            run_notebook(CHAPTERS[run.chapter].source, partial, params, progress=False, strict=False)
        except ChapterFailed as e:
            raise RunFailed(str(e), notebook.read_bytes() if notebook.is_file() else None, str(notebook)) from None
        files = {f.name: f.read_bytes() for f in (partial / f"{run.chapter}.json", notebook)}
        finished = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return {"files": files, "seconds": round(time.time() - t0, 2), "finished": finished}
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def file_run(run: Run, root: Path, result: dict, attempts: int) -> dict:
    """Write a finished run's files (:func:`execute`'s result) into its folder under ``root``, atomically: into
    a private folder, ``run.json`` last, renamed into place (what failed attempts left there goes). Returns
    the run's manifest."""
    final = run.folder(root)
    if (final / RUN_FILE).is_file():  # a run the scheduler lost and ran again, filed by the first
        return read_json(final / RUN_FILE)
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = final.parent / f".partial-{final.name}-{uuid.uuid4().hex[:8]}"
    partial.mkdir()
    try:
        for name, data in result["files"].items():
            if name == f"{run.chapter}.json":
                doc = json.loads(data)
                doc["params"]["results_dir"] = str(final)  # where it lives, not where it was written
                write_json(partial / name, doc)
            else:
                (partial / Path(name).name).write_bytes(data)
        manifest = {**asdict(run), "key": run.key, "attempts": attempts}
        manifest |= {"seconds": result["seconds"], "finished": result["finished"]}
        write_json(partial / RUN_FILE, manifest)
        if final.exists():  # not finished: an attempts count, a failed attempt's notebook
            shutil.rmtree(final)
        os.rename(partial, final)
        return manifest
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def file_failure(run: Run, root: Path, error: BaseException, attempts: int) -> str:
    """Keep a failed run's attempts count and executed notebook (``<chapter>.failed.ipynb``) in its folder;
    returns the error's line, naming that notebook."""
    why = one_line(error)
    final = run.folder(root)
    final.mkdir(parents=True, exist_ok=True)
    write_json(final / "attempts.json", {"attempts": attempts})
    if isinstance(error, RunFailed) and error.notebook is not None:
        kept = final / f"{run.chapter}.failed.ipynb"
        atomic_write(kept, lambda p: p.write_bytes(error.notebook))
        why = why.replace(error.named, str(kept))
    return why


def clean_partials(runs: Sequence[Run], root: Path) -> int:
    """Remove the private folders that killed attempts of ``runs`` left behind (and only theirs: another
    sweep may share the scheduler and the data folder); returns how many."""
    n = 0
    for run in runs:
        folder = run.folder(root)
        for p in folder.parent.glob(f".partial-{folder.name}-*"):
            shutil.rmtree(p, ignore_errors=True)
            n += 1
    return n


def _attempts(client, topic: str, run: Run) -> int:
    """How many attempts of ``run`` the workers logged under ``topic`` (at least the one that ended)."""
    return max(1, sum(msg.get("run") == run.key for _, msg in client.get_events(topic)))


def sweep(
    models: Sequence[str | keys.ModelRef],
    corpora: Sequence[str],
    seeds: Sequence[int],
    chapters: Sequence[str] | None = None,
    params: dict | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    client=None,
    progress: bool = True,
    slots: int | None = None,
) -> Report:
    """Run every (model, corpus, seed, chapter) not finished yet, then rebuild the results table.

    ``client``: an existing Dask client (the caller closes it); else one from
    :func:`identifiability.base.cluster.connect`.
    ``slots``: at most this many runs at once (default: one per worker thread).
    """
    from distributed import as_completed
    from tqdm import tqdm

    from .aggregate import write_table

    t0 = time.time()
    root = paths.sweep_root()
    runs, problems = plan(models, corpora, seeds, chapters, params or {})
    report = Report(failed=[(what, why) for what, why in problems])
    todo = [r for r in runs if not is_finished(r, root)]
    report.skipped = [r for r in runs if is_finished(r, root)]
    if todo:
        clean_partials(todo, root)
        own = client is None
        client = client or cluster.connect(scheduler, workers)
        try:
            link = cluster.dashboard(client)
            if link and progress:
                print(f"Dask dashboard: {link}")
            # Runs are handed out one per free worker thread, longest first: submitted all at once, Dask
            # spreads independent tasks over the workers' own queues at once, and a worker that drew the
            # short runs idles at the end while another still holds long ones.
            waiting = list(reversed(longest_first(todo, root)))
            running = as_completed()
            futures = {}
            topic, data_root = f"identifiability-attempts-{uuid.uuid4().hex}", cluster.local_data(client)
            tries = {r.key: r.folder(root) / "attempts.json" for r in todo}  # failed attempts of earlier sweeps
            before = {k: read_json(t)["attempts"] if t.is_file() else 0 for k, t in tries.items()}

            def submit_more() -> None:
                while waiting and running.count() < (slots or _slots(client)):  # not yet returned: running or done
                    run = waiting.pop()
                    key = f"{run.chapter}-{run.model_key}-{run.corpus_key.split(':')[0]}-s{run.seed}-{run.key[:8]}"
                    fut = client.submit(execute, run, data_root, topic, key=key, retries=1, pure=False)
                    futures[fut] = run
                    running.add(fut)

            bar = tqdm(total=len(todo), desc="sweep", unit="run", disable=not progress)
            submit_more()
            for fut in running:
                run = futures.pop(fut)
                attempts = before[run.key] + _attempts(client, topic, run)
                if fut.status == "finished":
                    file_run(run, root, fut.result(), attempts)
                    report.ran.append(run)
                else:
                    report.failed.append((run, file_failure(run, root, fut.exception(), attempts)))
                    bar.write(f"failed: {run.label()}: {report.failed[-1][1]}")
                bar.update()
                submit_more()
            bar.close()
        finally:
            try:
                cluster.close(client, own)
            finally:
                # a worker stopped mid-run leaves its private folder behind; removed however the sweep stops, a
                # second Ctrl-C or an error while the cluster closes included
                clean_partials(todo, root)
    report.table = write_table()
    report.spread = claims_spread(report.table, [*report.ran, *report.skipped])
    report.seconds = time.time() - t0
    return report


def claims_spread(table_path: Path, runs: Sequence[Run]) -> str:
    """Each claim of ``runs``: the estimate over seeds (mean, and min to max) next to the chapter's own 95%
    interval (mean bounds over seeds) and the verdicts the seeds gave; a text table for the terminal."""
    import pandas as pd

    from .aggregate import read_table, seed_spread

    if not runs:
        return ""
    t = read_table(table_path)
    keys = {(r.model_key, r.corpus, r.chapter, r.seed) for r in runs}
    ours = pd.Series([k in keys for k in zip(t.model_key, t.corpus, t.chapter, t.seed)], index=t.index)
    mine = t[ours & (t.kind == "claim") & (t.source == "sweep")]  # a book build on the same seed is another run
    mine = mine[~mine.quantity.str.contains(".", regex=False)]  # whole claims; their parts are in the table
    if mine.empty:
        return ""
    s = seed_spread(mine)
    fmt = lambda x: "—" if x != x else f"{x:.3g}"  # noqa: E731 (NaN is the only value not equal to itself)
    s = s.sort_values(["quantity", "model_key", "corpus"])
    wm, wc = max(5, *s.model_key.str.len()), max(6, *s.corpus.str.len())
    rows = [
        f"{r.model_key:<{wm}} {r.corpus:<{wc}} {r.quantity:<5} {r.seeds:>5}  {fmt(r['mean']):>8}  "
        f"{fmt(r['min']) + ' to ' + fmt(r['max']):>18}  {fmt(r.own_low) + ' to ' + fmt(r.own_high):>18}  {r.verdicts}"
        for _, r in s.iterrows()
    ]
    head = (
        f"{'model':<{wm}} {'corpus':<{wc}} {'claim':<5} {'seeds':>5}  {'estimate':>8}  {'range over seeds':>18}  "
        f"{'own 95% interval':>18}  verdicts"
    )
    return "\n".join([head, *rows])
