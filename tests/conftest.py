"""Shared fixtures. Tiny random models are built from configs (no download); ``real_lm`` is the embedded
all-MiniLM-L6-v2, loaded once per session."""

import os
import signal
from pathlib import Path

import pytest
import torch
from book.background import Job, Lane

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# A shell that starts a job with `&` and no job control starts it with SIGINT ignored, and every process it starts
# inherits that. The suite runs as from a terminal (Python's own handler here, the default action in the commands
# it starts), so the Ctrl-C tests test the code, not the way pytest was started.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
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
    tiers = {item: (TIERS.index(_tier(item)), "background" in getattr(item, "fixturenames", ())) for item in items}
    # unit, integration, book: the background jobs compute meanwhile; in each tier the tests that read them
    # (those that ask for the background fixture) come last, so those that need nothing run while they finish
    items.sort(key=tiers.__getitem__)


@pytest.fixture(scope="session")
def tiny_lm():
    from identifiability.models.load import random_model

    return random_model("bert", seed=0)


@pytest.fixture(scope="session")
def tiny_model_folder(tmp_path_factory):
    """``tiny_model_folder(seed=0, name="tiny-bert")``: the folder of a tiny random BERT saved as a reader's
    model is (safetensors weights, config, tokenizer), made once per (seed, name) in the session. Tests only
    read it; a folder's results are filed under its name plus its content key."""
    from identifiability.models.load import random_model

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
    from identifiability.models.load import random_model

    return random_model(request.param, seed=0)


@pytest.fixture(scope="session")
def real_lm():
    from identifiability.models.load import load_model

    return load_model()


@pytest.fixture(scope="session")
def sentences():
    return [
        "The cat sat on the mat.",
        "Hundreds of people have been forced to vacate their homes as strong winds pushed a huge bushfire towards "
        "the town.",
        "A new blaze near Goulburn has forced the closure of the Hume Highway.",
    ]


# The suite's background work: each test module declares what its tests read in one tuple, BACKGROUND (jobs
# of tests/book/background.py); the session collects every collected module's jobs as it starts and runs them
# one at a time in a child process on one thread, beside the unit and integration tiers, which run first
# (pytest_collection_modifyitems), so the book tier finds most of them done. The lane's order and the tiers'
# are chosen by measuring the whole suite; those timings are kept in the commit messages, since a comment
# cannot say on which machine or at which commit they held.
FOREGROUND_ENV = "IDENTIFIABILITY_TESTS_FOREGROUND"  # 1: every job runs when first asked for, one after the other
CHAPTER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _foreground() -> bool:
    value = os.environ.get(FOREGROUND_ENV, "")
    if value not in ("", "0", "1"):
        raise pytest.UsageError(f"{FOREGROUND_ENV}={value!r}: set it to 1 (jobs in the foreground) or 0 (in the lane)")
    return value == "1"


def _declared(items) -> list[Job]:
    """Every job declared in ``BACKGROUND`` by the modules of the selected tests that ask for the background
    fixture, each once, in the lane's order (:attr:`Job.order`; among equals, the order met)."""
    jobs: dict[Job, None] = {}
    readers = (item for item in items if "background" in getattr(item, "fixturenames", ()))
    for module in dict.fromkeys(getattr(item, "module", None) for item in readers):
        declared = getattr(module, "BACKGROUND", ())
        if not isinstance(declared, tuple) or not all(isinstance(j, Job) for j in declared):
            raise pytest.UsageError(
                f"{module.__name__}.BACKGROUND: a tuple of jobs (chapter, book, call of book.background)"
            )
        jobs.update(dict.fromkeys(declared))
    return sorted(jobs, key=lambda job: job.order)


_LANES: list[Lane] = []  # the session's lane, for the summary below


def pytest_terminal_summary(terminalreporter):
    """The background lane's longest jobs, with when each started, and when its last one ended: what to shorten
    when the suite is slow (the lane and the tests beside it each hold one core)."""
    for lane in _LANES:
        if not lane.timings:
            continue
        terminalreporter.section("background lane")
        for what, start, seconds in sorted(lane.timings, key=lambda t: -t[2])[:10]:
            terminalreporter.write_line(f"{seconds:7.1f} s, started at {start:6.1f} s: {what}")
        end = max(start + seconds for _, start, seconds in lane.timings)
        terminalreporter.write_line(f"{len(lane.timings)} jobs; the last ended {end:.0f} s after the lane started")


@pytest.fixture(scope="session")
def background(tmp_path_factory, tiny_model_folder):
    """The session's :class:`Lane` (book/background.py): ``background.result(job)`` is a declared job's folder
    once it has run; its environment: this process's as the session began, one thread."""
    env = {**os.environ, **CHAPTER_ENV}
    lane = Lane(tmp_path_factory.mktemp("background"), env, tiny_model_folder, CORES, _foreground())
    _LANES.append(lane)
    yield lane
    lane.close()


@pytest.fixture(scope="session", autouse=True)
def _background_ahead(request, background):
    for job in _declared(request.session.items):
        background.start(job)


@pytest.fixture(autouse=True)
def _threads_by_the_rule(background):
    background.set_threads()  # the rule of Lane.threads, as each test starts
