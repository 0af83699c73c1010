"""Shared fixtures. Tiny random models are built from configs (no download); ``real_lm`` is the embedded
all-MiniLM-L6-v2, loaded once per session."""

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
CORES = min(2, os.cpu_count() or 1)
torch.set_num_threads(CORES)

ARCHITECTURES = ["bert", "roberta", "electra", "distilbert", "albert", "gpt2"]
# Test tiers are folders, and this is the one place that marks them: each test gets its tier's name as a
# marker (pytest -m unit, -m "not book"). unit: tiny random models, no kernel, cluster, make or book build
# (tests/unit/conftest.py refuses them); integration: the real model, kernels, clusters, subprocesses;
# book: the chapters executed, the book built and checked in a browser.
TIERS = ("unit", "integration", "book")


def _tier(item) -> str:
    tier = next((p.name for p in item.path.parents if p.name in TIERS), None)
    if tier is None:
        raise pytest.UsageError(f"{item.nodeid}: every test lives in one tier's folder: {', '.join(TIERS)}")
    return tier


def pytest_itemcollected(item):
    # marked as each test is collected: `-m` selects among the collected tests before the hook below runs
    item.add_marker(_tier(item))


@pytest.hookimpl(trylast=True)  # after pytest groups the tests of each parametrised session fixture
def pytest_collection_modifyitems(config, items):
    tiers = {item: (TIERS.index(_tier(item)), _waits_for_background_runs(item)) for item in items}
    # unit, integration, book: the chapters compute meanwhile (ChapterRuns); in each tier the tests that read
    # them come last, so those that need nothing from them run while the last ones finish
    items.sort(key=tiers.__getitem__)


def _waits_for_background_runs(item) -> bool:
    return "chapter_run" in getattr(item, "fixturenames", ()) or hasattr(getattr(item, "module", None), "JOB_AHEAD")


@pytest.fixture(scope="session")
def tiny_lm():
    from identifiability.models import random_model

    return random_model("bert", seed=0)


@pytest.fixture(scope="session")
def tiny_model_folder(tmp_path_factory):
    """``tiny_model_folder(seed=0, name="tiny-bert")``: the folder of a tiny random BERT saved as a reader's
    model is (safetensors weights, config, tokenizer), made once per (seed, name) in the session. Tests only
    read it; a folder's results are filed under its name plus its content key."""
    from identifiability.models import random_model

    made: dict[tuple[int, str], Path] = {}

    def make(seed: int = 0, name: str = "tiny-bert") -> Path:
        if (seed, name) not in made:
            folder = tmp_path_factory.mktemp("models") / name
            lm = random_model("bert", seed=seed)
            lm.model.save_pretrained(folder, safe_serialization=True)
            lm.tokenizer.save_pretrained(folder)
            made[seed, name] = folder
        return made[seed, name]

    return make


@pytest.fixture(scope="module")
def module_data_folder(tmp_path_factory):
    """A data folder (caches, results) of the test module's own: IDENTIFIABILITY_DATA points at it."""
    with pytest.MonkeyPatch.context() as mp:
        folder = tmp_path_factory.mktemp("data")
        mp.setenv("IDENTIFIABILITY_DATA", str(folder))
        yield folder


@pytest.fixture(scope="session", params=ARCHITECTURES)
def tiny_any(request):
    """A tiny random model of every registered architecture."""
    from identifiability.models import random_model

    return random_model(request.param, seed=0)


@pytest.fixture(scope="session")
def real_lm():
    from identifiability.models import load_model

    return load_model()


@pytest.fixture(scope="session")
def sentences():
    return [
        "The cat sat on the mat.",
        "Hundreds of people have been forced to vacate their homes as strong winds pushed a huge bushfire towards "
        "the town.",
        "A new blaze near Goulburn has forced the closure of the Hume Highway.",
    ]


# A chapter's one execution with its quick parameters runs in a child process with one thread. The book
# tier's chapters start in the background as the session begins, one at a time, then the book is built from
# them (a module's BOOK_AHEAD) and the tiny-model runs follow (RUNS_AHEAD); the book tier runs last
# (pytest_collection_modifyitems). So they compute beside the unit and integration tiers instead of before
# the book tier while nothing else runs; meanwhile this process's matrix products use one thread
# (_one_thread_beside_the_background_runs). Measured on 2 cores, whole suite: 665 and 742 s with the book
# built in the book tier and two threads here throughout; 551, 551, 572 s with the book built in the background
# (the unit tier alone fell from about 4 minutes beside the background runs to about 1.5); 519 s twice (5
# December 2026) with the browser check (CHECK_AHEAD) and the sweep tests' first sweep (JOB_AHEAD) there too,
# where the lane had idled while the last tiers' cluster and kernel tests kept the cores about half busy. On a
# faster machine (5 December 2026, later): 365 s, then 346 s with chapters 7 and 9's jobs in the lane too, which
# now ends about 50 s before the suite (the sweep tests' cluster, after it, is what is left).
CHAPTER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_EXECUTE = """
import json, sys
from pathlib import Path
from identifiability.chapters import CHAPTERS
from identifiability.execution import run_notebook
stem, out, params = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
run_notebook(CHAPTERS[stem].source, out / "notebooks", params, progress=False)
"""
# A test module's job (``JOB_AHEAD``): a function of that module, called with its string arguments in a child
# process that imports the module as pytest does (the tests folder first on its path)
_JOB = """
import importlib, sys
sys.path.insert(0, sys.argv[1])
module, name = sys.argv[2].rsplit(":", 1)
getattr(importlib.import_module(module), name)(*sys.argv[3:])
"""
_BUILD = """
import sys
from pathlib import Path
from identifiability.build import build_book
runs, out, repository = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
build_book(None, "lee", {}, out=out, executed=runs / "notebooks", results_dir=runs / "results", repository=repository)
"""


class ChapterRuns:
    """``runs(stem)`` executes the chapter once per session (with its quick parameters from the chapter
    contract) and returns its results dict; ``runs.start(stems)`` queues executions without waiting;
    ``runs.dir`` holds ``notebooks/`` and ``results/``. With ``model`` (a model folder) the same on that
    model, in ``runs.folder(model)``. ``runs.book(repository)`` builds the book from the default model's
    executions (queued by ``runs.start_book``). Executions run one at a time, in the order asked."""

    def __init__(self, out: Path, env: dict):
        from concurrent.futures import ThreadPoolExecutor

        self.dir, self._env, self._runs, self._child = out, env, {}, None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="chapters")

    def close(self) -> None:
        """Drop the executions not started and stop the one running (a session that ends early, -x or
        Ctrl-C, does not wait for them)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._child is not None and self._child.poll() is None:
            self._child.kill()

    def folder(self, model: Path | None = None) -> Path:
        return self.dir if model is None else self.dir / "on" / f"{Path(model).parent.name}-{Path(model).name}"

    def start(self, stems, model: Path | None = None) -> None:
        for stem in stems:
            if (stem, self.folder(model)) not in self._runs:
                self._runs[stem, self.folder(model)] = self._pool.submit(self._execute, stem, model)

    def busy(self) -> bool:
        """Whether an execution is running or queued."""
        return any(not f.done() for f in self._runs.values())

    def start_book(self, repository: str) -> None:
        if ("book", repository) not in self._runs:
            self._runs["book", repository] = self._pool.submit(self._build, repository)

    def start_check(self, repository: str, check) -> None:
        """Queue ``check(html)`` on the book built for ``repository`` (queued with it if not yet)."""
        self.start_book(repository)
        if ("check", repository) not in self._runs:
            self._runs["check", repository] = self._pool.submit(lambda: check(self.dir / "book" / "html"))

    def checked(self, repository: str, check):
        """What ``check(html)`` returned on the book built for ``repository`` (run in the background once)."""
        self.book(repository)
        self.start_check(repository, check)
        return self._runs["check", repository].result()

    def start_job(self, make, tiny_model_folder) -> Path:
        """Queue a test module's job (:func:`_jobs_ahead`) in the background; returns its folder."""
        folder = self.dir / "jobs" / make.__module__.rsplit(".", 1)[-1]
        if ("job", folder) not in self._runs:
            job, args = make(folder, tiny_model_folder)
            what, name = f"the job of {make.__module__}", f"{job.__module__}:{job.__name__}"
            tests = str(Path(__file__).parent)
            self._runs["job", folder] = self._pool.submit(self._child_run, what, _JOB, tests, name, *args)
        return folder

    def job(self, make, tiny_model_folder) -> Path:
        """The folder of a test module's job, once it has run (queued now if it was not)."""
        folder = self.start_job(make, tiny_model_folder)
        self._runs["job", folder].result()
        return folder

    def book(self, repository: str) -> Path:
        """The html folder of the book built from the default model's executions (every chapter's, run first)."""
        from identifiability.chapters import CHAPTERS

        self.start(CHAPTERS)
        self.start_book(repository)
        self._runs["book", repository].result()
        return self.dir / "book" / "html"

    def __call__(self, stem: str, model: Path | None = None) -> dict:
        from identifiability.fileio import read_json

        self.start([stem], model)
        self._runs[stem, self.folder(model)].result()
        return read_json(self.folder(model) / "results" / f"{stem}.json")

    def _execute(self, stem: str, model: Path | None) -> None:
        import json
        import shutil

        from identifiability import paths
        from identifiability.chapters import CHAPTERS

        out = self.folder(model)
        params = {"results_dir": str(out / "results"), **CHAPTERS[stem].quick}
        if model is not None:
            params["model"] = str(model)
        elif stem == "09_across_models":  # its table: the chapters run so far, filed as a data folder files them
            filed = self.dir / "data" / "results" / paths.DEFAULT_MODEL / paths.DEFAULT_CORPUS
            filed.mkdir(parents=True, exist_ok=True)
            for f in (self.dir / "results").glob("0*.json"):
                shutil.copy2(f, filed / f.name)
            params["data_folder"] = str(self.dir / "data")
        self._child_run(f"chapter {stem}", _EXECUTE, stem, str(out), json.dumps(params))

    def _build(self, repository: str) -> None:
        self._child_run("the book build", _BUILD, str(self.dir), str(self.dir / "book"), repository)

    def _child_run(self, what: str, script: str, *args: str) -> None:
        import subprocess
        import sys

        cmd = [sys.executable, "-c", script, *args]
        self._child = subprocess.Popen(cmd, env=self._env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, stderr = self._child.communicate()
        if self._child.returncode:
            raise RuntimeError(f"{what} failed (exit {self._child.returncode}):\n{stderr[-4000:]}")


@pytest.fixture(scope="session")
def chapter_runs(tmp_path_factory):
    """The session's :class:`ChapterRuns` (its environment: this process's as the session began)."""
    runs = ChapterRuns(tmp_path_factory.mktemp("chapters"), {**os.environ, **CHAPTER_ENV})
    yield runs
    runs.close()


@pytest.fixture(autouse=True)
def _one_thread_beside_the_background_runs(chapter_runs):
    """One thread for this process's matrix products while the background runs compute, both cores once they
    are done: two OpenMP threads beside a busy process wait for each other at every barrier (measured on 2
    cores: tests/unit/test_hta.py took 12.4 s alone, 23.0 s with two threads beside a one-thread busy loop,
    13.6 s with one thread beside it)."""
    torch.set_num_threads(1 if chapter_runs.busy() else CORES)


@pytest.fixture(scope="session")
def chapter_run(chapter_runs):
    """What the chapter tests ask for (a test module may define its own ``chapter_run``)."""
    return chapter_runs


def _chapters_needed(items) -> list[str]:
    """The chapters the book tier's collected tests execute on the default model: a test_nb_<stem>.py module
    needs its own; a module with ``RUNS_AHEAD`` the runs it lists (:func:`_runs_on_tiny_models`); any other
    module that asks for ``chapter_run`` (the book build, the handout, chapter 9's table) needs all."""
    from identifiability.chapters import CHAPTERS

    needed = set()
    for item in items:
        if hasattr(getattr(item, "module", None), "RUNS_AHEAD"):
            continue
        if "book" in item.keywords and "chapter_run" in getattr(item, "fixturenames", ()):
            own = item.path.stem.removeprefix("test_nb_")
            needed |= {own} if own in CHAPTERS and own != "09_across_models" else set(CHAPTERS)
    return [stem for stem in CHAPTERS if stem in needed]  # the book's order: chapter 9 after 1-8


def _books_ahead(items) -> list[str]:
    """The repositories of the books that the book tier's collected modules build from the chapters'
    executions (a module's ``BOOK_AHEAD``), to be built in the background once the chapters ran."""
    modules = (getattr(item, "module", None) for item in items if "book" in item.keywords)
    return list(dict.fromkeys(m.BOOK_AHEAD for m in modules if hasattr(m, "BOOK_AHEAD")))


def _checks_ahead(items) -> list[tuple[str, object]]:
    """(repository, check) of the book tier's modules that check their ``BOOK_AHEAD`` book with a module's
    ``CHECK_AHEAD(html)``, to be run in the background once that book is built."""
    modules = (getattr(item, "module", None) for item in items if "book" in item.keywords)
    return list(dict.fromkeys((m.BOOK_AHEAD, m.CHECK_AHEAD) for m in modules if hasattr(m, "CHECK_AHEAD")))


def _jobs_ahead(items) -> list:
    """The book tier's modules' ``JOB_AHEAD``: ``make(folder, tiny_model_folder) -> (job, args)``, ``job`` a
    function of the module that the background lane calls as ``job(*args)`` (strings) in a child process after
    the other runs, writing its files in ``folder``: work that would otherwise hold up this process while the
    lane idles. The module's tests read the folder with ``chapter_runs.job``, and run after the tier's others."""
    modules = (getattr(item, "module", None) for item in items if "book" in item.keywords)
    return list(dict.fromkeys(m.JOB_AHEAD for m in modules if hasattr(m, "JOB_AHEAD")))


def _runs_on_tiny_models(items) -> list[tuple[str, int]]:
    """(chapter, seed of a tiny model from ``tiny_model_folder``) pairs that the book tier's collected modules
    list in ``RUNS_AHEAD``, to be executed in the background too."""
    modules = (getattr(item, "module", None) for item in items if "book" in item.keywords)
    runs = (r for module in modules for r in getattr(module, "RUNS_AHEAD", ()))
    return list(dict.fromkeys(runs))  # each once, in the order met


@pytest.fixture(scope="session", autouse=True)
def _chapters_ahead(request, chapter_runs, tiny_model_folder):
    chapter_runs.start(_chapters_needed(request.session.items))
    for repository in _books_ahead(request.session.items):
        chapter_runs.start_book(repository)
    for repository, check in _checks_ahead(request.session.items):
        chapter_runs.start_check(repository, check)
    for stem, seed in _runs_on_tiny_models(request.session.items):
        chapter_runs.start([stem], tiny_model_folder(seed))
    for make in _jobs_ahead(request.session.items):
        chapter_runs.start_job(make, tiny_model_folder)


@pytest.fixture(scope="session")
def quick_params():
    """{stem: the small parameters of the chapter's one real execution in the tests} (the chapter contract's
    ``quick``)."""
    from identifiability.chapters import CHAPTERS

    return {stem: spec.quick for stem, spec in CHAPTERS.items()}
