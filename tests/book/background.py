"""The suite's background work, declared once per test module and run in one lane.

A test module declares the work its tests read in one tuple, ``BACKGROUND = (...)``, of :class:`Job` values
made by :func:`chapter` (a chapter executed with its quick parameters), :func:`book` (the book built from the
default model's executions) and :func:`call` (a function of the module called in a child process).
tests/conftest.py collects every collected module's declaration as the session starts and runs the jobs one at a
time, each in a child process on one thread, in the order of :attr:`Job.order`; a test asks for a job's folder
with ``background.result(job)`` (the ``background`` fixture: a :class:`Lane`), which waits for it only if it has
not ended. With IDENTIFIABILITY_TESTS_FOREGROUND=1 nothing starts ahead: each job runs when a test first asks
for it, in the foreground, after the jobs it needs (for debugging one job at a time).

Every job's function is called as ``function(folder, *args)`` in a child that imports its module as pytest does
(the tests folder first on its path); ``folder`` is the job's own folder in the lane's, where it writes."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from identifiability.chapters.contract import CHAPTERS, by_name

TESTS = Path(__file__).resolve().parent.parent  # the folder pytest puts first on the path (rootdir conftest)
CHAPTERS_FOLDER = "chapters"  # the default model's executions, the book's source
BOOK_FOLDER = "book"


@dataclass(frozen=True)
class TinyModel:
    """An argument of a job: the folder of the tiny random BERT ``tiny_model_folder(seed, name)``
    (tests/conftest.py), made in this process before the job starts."""

    seed: int = 0
    name: str = "tiny-bert"


@dataclass(frozen=True)
class Job:
    """One piece of background work: ``call`` ("module:function") called with the job's folder and ``args``
    (strings; a :class:`TinyModel` for a tiny model's folder; a job for its folder) after every job in
    ``needs``. The lane runs the declared jobs in ``order``: the default model's chapters in the book's order
    (0, i), the book (1,), work on the book (2,), chapters on tiny models (3, i), other calls (4,)."""

    call: str
    folder: str
    args: tuple[str | TinyModel | Job, ...] = ()
    needs: tuple[Job, ...] = ()
    order: tuple[int, ...] = (4,)

    @property
    def what(self) -> str:
        """The job in an error message."""
        shown = " ".join(
            a if isinstance(a, str) else a.call if isinstance(a, Job) else f"{a.name}(seed {a.seed})" for a in self.args
        )
        return f"{self.call} {shown}".strip()


def chapter(name: str, seed: int | None = None) -> Job:
    """The chapter named ``name`` executed with its quick parameters (the contract's ``quick``): on the default
    model after the chapters it reads (the contract's ``reads``, as the book runs them), or on the tiny model of
    ``seed``. Its folder holds ``notebooks/<stem>.ipynb`` and ``results/<stem>.json``."""
    spec = by_name(name)
    order = list(CHAPTERS).index(spec.stem)
    if seed is None:
        needs = tuple(chapter(CHAPTERS[stem].name) for stem in spec.reads)
        return Job(f"{__name__}:execute_chapter", CHAPTERS_FOLDER, (spec.stem,), needs, (0, order))
    model = TinyModel(seed)
    return Job(
        f"{__name__}:execute_chapter", f"{CHAPTERS_FOLDER}-on-{model.name}-{seed}", (spec.stem, model), (), (3, order)
    )


def every_chapter() -> tuple[Job, ...]:
    """Every chapter on the default model, in the book's order."""
    return tuple(chapter(spec.name) for spec in CHAPTERS.values())


def book(repository: str) -> Job:
    """The book built from every chapter's execution on the default model, its launch buttons linking
    ``repository``; its folder holds ``html/``."""
    return Job(f"{__name__}:build_book", BOOK_FOLDER, (repository,), every_chapter(), (1,))


def call(function: Callable, *args: str | TinyModel | Job) -> Job:
    """``function(folder, *args)``, a function of a test module, called in a child process; a job among
    ``args`` is its folder, and runs first. Ordered after the book when it needs a job (work on the book),
    else last."""
    import hashlib

    name = f"{function.__module__}:{function.__qualname__}"
    digest = hashlib.sha256(repr(args).encode()).hexdigest()[:10]  # a folder per call, its arguments apart
    folder = f"jobs/{function.__module__}.{function.__qualname__}-{digest}"
    needs = tuple(a for a in args if isinstance(a, Job))
    return Job(name, folder, tuple(args), needs, (2,) if needs else (4,))


def execute_chapter(folder: str, stem: str, model: str = "") -> None:
    """A chapter's execution (the child's side of :func:`chapter`). Chapter 9 on the default model tabulates
    the chapters it reads, filed as a data folder files them."""
    from identifiability.base import paths
    from identifiability.chapters.execution import run_notebook

    out = Path(folder)
    params = {"results_dir": str(out / "results"), **CHAPTERS[stem].quick}
    if model:
        params["model"] = model
    elif stem == by_name("across_models").stem:
        filed = out / "data" / "results" / paths.DEFAULT_MODEL / paths.DEFAULT_CORPUS
        filed.mkdir(parents=True, exist_ok=True)
        for read in CHAPTERS[stem].reads:
            shutil.copy2(out / "results" / f"{read}.json", filed / f"{read}.json")
        params["data_folder"] = str(out / "data")
    run_notebook(CHAPTERS[stem].source, out / "notebooks", params, progress=False)


def build_book(folder: str, repository: str) -> None:
    """The book of the default model's executions (the child's side of :func:`book`): the lane's folders are
    siblings, so the executions are in ``../chapters``."""
    from identifiability.book.build import build_book as build

    runs = Path(folder).parent / CHAPTERS_FOLDER
    build(
        None,
        "lee",
        {},
        out=Path(folder),
        executed=runs / "notebooks",
        results_dir=runs / "results",
        repository=repository,
    )


# the child's script: the job's module imported as pytest imports it (the tests folder first on its path)
_CHILD = """
import importlib, sys
sys.path.insert(0, sys.argv[1])
module, name = sys.argv[2].rsplit(":", 1)
getattr(importlib.import_module(module), name)(*sys.argv[3:])
"""


class Lane:
    """Runs :class:`Job` values one at a time, each in a child process with environment ``env``, in folders
    under ``out``. ``start(job)`` queues a job after its needs (in the foreground: nothing); ``result(job)`` is
    its folder once it has ended, waiting for it (in the foreground: running it and its needs now); ``busy()``
    says whether anything is queued or running. ``model(seed, name)`` makes a tiny model's folder; ``cores``: the
    threads this process computes on when the lane is idle (:meth:`threads`)."""

    def __init__(self, out: Path, env: dict, model: Callable[[int, str], Path], cores: int, foreground: bool):
        self.dir, self._env, self._model, self._cores, self.foreground = out, env, model, cores, foreground
        self._futures: dict[Job, Future] = {}
        self._args: dict[Job, list[str]] = {}
        self._child: subprocess.Popen | None = None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="background")
        # (job, its start and its seconds, from the lane's start): the suite's summary lists them, longest first
        self._t0 = time.perf_counter()
        self.timings: list[tuple[str, float, float]] = []

    def close(self) -> None:
        """Drop the jobs not started and stop the one running (a session that ends early, -x or Ctrl-C, does
        not wait for them)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._child is not None and self._child.poll() is None:
            self._child.kill()

    def folder(self, job: Job) -> Path:
        return self.dir / job.folder

    def start(self, job: Job) -> None:
        if self.foreground or job in self._futures:
            return
        for need in job.needs:
            self.start(need)
        self._resolve(job)
        self._futures[job] = self._pool.submit(self._run, job)

    def busy(self) -> bool:
        """Whether a job is running or queued."""
        return any(not f.done() for f in self._futures.values())

    def threads(self) -> int:
        """The suite's one rule for the thread count of the tests' process: one thread while the lane has a job
        running or queued (its children compute on one thread each), all ``cores`` otherwise; in the foreground
        nothing runs beside a test, so always all. Two OpenMP threads beside a busy process wait for each other at
        every barrier (tests/unit/test_hta.py took about twice as long with two threads beside a one-thread busy
        loop as alone, and about as long as alone with one thread)."""
        return 1 if self.busy() else self._cores

    def set_threads(self) -> None:
        """Apply :meth:`threads` to this thread's torch: as each test starts (tests/conftest.py) and after each
        wait for the lane (:meth:`result`), the two moments the lane's state can have changed under a test that
        computes (torch's setting is the calling thread's, so the lane's own thread cannot apply it)."""
        import torch

        torch.set_num_threads(self.threads())

    def result(self, job: Job) -> Path:
        """The job's folder once it has ended; a job that failed raises its error (with its stderr's tail)."""
        if self.foreground and job not in self._futures:
            for need in job.needs:
                self.result(need)
            self._resolve(job)
            self._futures[job] = done = Future()
            try:
                self._run(job)
                done.set_result(None)
            except Exception as e:
                done.set_exception(e)
        self.start(job)
        try:
            self._futures[job].result()
        finally:
            self.set_threads()
        return self.folder(job)

    def chapter(self, name: str, seed: int | None = None) -> dict:
        """The results of the chapter named ``name`` (:func:`chapter`), once executed."""
        from identifiability.base.fileio import read_json

        return read_json(self.result(chapter(name, seed)) / "results" / f"{by_name(name).stem}.json")

    def notebook(self, name: str, seed: int | None = None) -> Path:
        """The executed notebook of the chapter named ``name`` (:func:`chapter`)."""
        return self.result(chapter(name, seed)) / "notebooks" / f"{by_name(name).stem}.ipynb"

    def _resolve(self, job: Job) -> None:
        # in this process: tiny models are made once per session by the fixture that owns them
        args = (
            a if isinstance(a, str) else str(self.folder(a)) if isinstance(a, Job) else str(self._model(a.seed, a.name))
            for a in job.args
        )
        self._args[job] = [str(self.folder(job)), *args]

    def _run(self, job: Job) -> None:
        for need in job.needs:
            try:
                self._futures[need].result()
            except Exception as e:
                raise RuntimeError(f"{job.what} needs {need.what}, which failed") from e
        self.folder(job).mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-c", _CHILD, str(TESTS), job.call, *self._args[job]]
        start = time.perf_counter()
        self._child = subprocess.Popen(cmd, env=self._env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, stderr = self._child.communicate()
        self.timings.append((job.what, start - self._t0, time.perf_counter() - start))
        if self._child.returncode:
            raise RuntimeError(f"{job.what} failed (exit {self._child.returncode}):\n{stderr[-4000:]}")
