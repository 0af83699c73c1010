"""Sweeps on a real Dask LocalCluster (2 single-threaded worker processes) executing real chapters on tiny
random models: completion, the table, resuming, a killed worker, a failing run, and exact HTA spread over
the workers writing the cache chapter 6 reads."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import torch

from identifiability.base import cluster, paths
from identifiability.base.fileio import read_json
from identifiability.chapters.contract import by_name
from identifiability.models import keys
from identifiability.models.load import load_model
from identifiability.runs import aggregate, corpus_hta, sweep

from .background import TinyModel, call

# Chapters 1 and 3 with small parameters: about 10-20 s per run on a tiny model.
PARAMS = {
    "n_sentences": 12,
    "fig1_n_lengths": 3,
    "fig1_repeats": 1,
    "fig1_max_length": 48,
    "viewer_sentences": 1,
    "viewer_max_tokens": 24,
}


THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def threads_env() -> dict[str, str | None]:
    return {k: os.environ.get(k) for k in THREADS}


MODELS = (TinyModel(3, "tiny3"), TinyModel(4, "tiny4"))  # the two tiny models
FIRST, THIRD = (by_name(name).stem for name in ("model_and_data", "effective_attention"))  # the chapters swept


def first_sweep(folder: str, *models: str) -> None:
    """The first sweep of test_sweep_completes_builds_the_table_and_resumes, with a model folder that has no
    weights besides the two tiny ``models``, its report in ``folder``/report.json: a background job
    (tests/book/background.py), beside the other tiers."""
    import json

    bad = Path(folder) / "no-weights"
    bad.mkdir(parents=True, exist_ok=True)
    (bad / "config.json").write_text((Path(models[0]) / "config.json").read_text())
    os.environ[paths.DATA_ENV] = os.path.join(folder, "data")
    r = sweep.sweep([*models, str(bad)], ["lee"], [0, 1], [FIRST, THIRD], PARAMS, workers=2, progress=False)
    failed = [[w if isinstance(w, str) else w.label(), why] for w, why in r.failed]
    report = {"ran": len(r.ran), "skipped": len(r.skipped), "failed": failed, "table": str(r.table), "spread": r.spread}
    Path(folder, "report.json").write_text(json.dumps(report))


FIRST_SWEEP = call(first_sweep, *MODELS)
BACKGROUND = (FIRST_SWEEP,)


def wait_for(condition, seconds: float) -> bool:
    """Whether ``condition()`` holds within ``seconds`` (asked every 0.1 s)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture(scope="module")
def env(background, tiny_model_folder):
    # every test here reads the first sweep's data folder and sweeps into it too
    base = background.result(FIRST_SWEEP)
    models = [str(tiny_model_folder(m.seed, m.name)) for m in MODELS]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(paths.DATA_ENV, str(base / "data"))
        before = threads_env()
        client = cluster.connect(workers=2)
        try:
            yield {"models": models, "data": base / "data", "client": client, "base": base, "environ": before}
        finally:
            cluster.close(client, own=True)
        assert threads_env() == before  # a worker respawned meanwhile (a killed-worker test) wrote it again


def test_the_local_clusters_workers_start_with_the_allocator_settings(env):
    """glibc reads them when a process starts, so they must reach the workers before the spawn (Dask's own
    MALLOC_TRIM_THRESHOLD_=65536 would otherwise win)."""
    seen = env["client"].run(lambda: {k: os.environ.get(k) for k in cluster.ALLOCATOR_ENV})
    assert len(seen) == 2 and all(v == cluster.allocator_env() for v in seen.values()), seen


def test_the_local_clusters_workers_drop_only_the_heartbeat_lost_as_the_cluster_closes(env):
    """A Ctrl-C closes the cluster while a worker may be in its heartbeat: that worker's traceback would
    follow the command's one line (cluster.dask_setup). Any other error of a worker is still logged."""
    import logging

    def kept(message: str) -> bool:
        record = logging.LogRecord("distributed.worker", logging.ERROR, __file__, 1, message, None, None)
        return logging.getLogger("distributed.worker").filter(record)

    lost = "Failed to communicate with scheduler during heartbeat."
    assert set(env["client"].run(kept, lost).values()) == {False}
    assert set(env["client"].run(kept, "Unexpected exception during heartbeat. Closing worker.").values()) == {True}


def test_the_workers_compute_on_one_thread_and_this_process_keeps_its_own_setting(env):
    """Dask's nanny writes OMP_NUM_THREADS=1 (and more) into the starting process's environment; left there,
    every kernel the command starts afterwards computes on one thread."""
    seen = env["client"].run(lambda: os.environ.get("OMP_NUM_THREADS"))
    assert set(seen.values()) == {"1"}, seen
    assert threads_env() == env["environ"]


def test_sweep_completes_builds_the_table_and_resumes(env):
    bad = env["base"] / "no-weights"  # a folder with a config and no weights
    models = [*env["models"], str(bad)]
    report = read_json(env["base"] / "report.json")  # the first sweep ran ahead (first_sweep)
    assert report["ran"] == 8 and not report["skipped"]
    assert len(report["failed"]) == 1 and str(bad) in report["failed"][0][0]  # the others finished
    table = aggregate.read_table(Path(report["table"]))
    assert set(table.model_key) == {keys.model_ref(m).key for m in env["models"]}
    assert set(table.seed) == {0, 1} and set(table.chapter) == {FIRST, THIRD}
    c4 = table[(table.kind == "claim") & (table.quantity == "C4")]
    assert len(c4) == 4 and c4.verdict.notna().all() and (c4.low <= c4.value).all()
    spread = aggregate.seed_spread(table)
    assert (spread[spread.quantity == "C4"].seeds == 2).all()
    assert sum(line.split()[2:4] == ["C4", "2"] for line in report["spread"].splitlines()) == 2  # one per model

    again = sweep.sweep(models, ["lee"], [0, 1], [FIRST, THIRD], PARAMS, client=env["client"], progress=False)
    assert not again.ran and len(again.skipped) == 8  # a second invocation runs nothing


def test_the_across_models_page_shows_both_models_and_their_verdicts(env, tmp_path):
    import json

    from identifiability.chapters.execution import run_notebook

    # the table of the first sweep (a background job, FIRST_SWEEP), whichever tests ran before this one
    assert (env["data"] / "results.parquet").is_file(), "the first sweep wrote no table"
    spec = by_name("across_models")
    params = {"data_folder": str(env["data"]), "results_dir": str(tmp_path / "results")}
    nb = run_notebook(spec.source, tmp_path, params, progress=False)
    assert read_json(tmp_path / "results" / f"{spec.stem}.json")["results"]["models"] == 2
    markdown = "\n".join(
        "".join(o["data"]["text/markdown"])
        for c in json.loads(nb.read_text())["cells"]
        for o in c.get("outputs", [])
        if "text/markdown" in o.get("data", {})
    ).splitlines()
    named = [keys.model_ref(m).key for m in env["models"]]  # two "other" models: named by their keys
    head = next(line for line in markdown if line.startswith("| claim | corpus |"))
    assert sorted(head.strip("| ").split(" | ")[2:]) == sorted(named), head  # a column per model
    for claim in ("C4", "C5"):
        row = next(line for line in markdown if line.startswith(f"| {claim} | lee |"))
        assert row.count("**") == 4, row  # both models' verdicts


def _partials(root):
    return list(root.rglob(".partial-*")) if root.is_dir() else []


def test_runs_are_handed_out_one_per_free_worker_longest_first(env):
    """A worker never holds a queue of runs (submitted all at once, Dask spread 24 runs over the two workers'
    queues, and a long run left last kept one worker busy for minutes while the other idled), and the runs
    expected to be longest (here: from the finished runs of the first test) start first."""
    from datetime import datetime

    client, root, held, stop = env["client"], env["data"] / "sweeps", [], threading.Event()
    args = (env["models"][:1], ["lee"], [7, 8], [FIRST, THIRD], PARAMS)  # seeds no other test runs
    expected = sweep.longest_first(sweep.plan(*args)[0], root)
    assert expected[0].chapter == expected[1].chapter != expected[2].chapter == expected[3].chapter

    def watch():
        while not stop.is_set():
            held.append(sum(len(keys) for keys in client.processing().values()))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        report = sweep.sweep(*args, client=client, progress=False)
    finally:
        stop.set()
        watcher.join()
    assert len(report.ran) == 4 and not report.failed
    assert max(held) <= sum(client.nthreads().values()) == 2, max(held)
    start = {}
    for run in expected:
        m = read_json(run.folder(root) / sweep.RUN_FILE)
        start[run.key] = datetime.strptime(m["finished"], "%Y-%m-%dT%H:%M:%SZ").timestamp() - m["seconds"]
    # both runs of the longer chapter started before either run of the other (1 s: the manifest's clock)
    assert max(start[r.key] for r in expected[:2]) <= min(start[r.key] for r in expected[2:]) + 1, start


def _kernel_seconds() -> float:
    """On a worker: the CPU seconds its children (a chapter's kernel) have used, 0 without one."""
    import psutil

    return max((c.cpu_times().user for c in psutil.Process().children(recursive=True)), default=0.0)


def test_a_killed_worker_is_retried_and_leaves_nothing_partial(env):
    client, root = env["client"], env["data"] / "sweeps"
    killed = {}

    def kill_when_running():
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            busy = [w for w, keys in client.processing().items() if keys]
            # a chapter executing into its private folder, its kernel started and computing (a second of CPU)
            if busy and _partials(root) and client.run(_kernel_seconds, workers=[busy[0]])[busy[0]] > 1:
                pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
                os.kill(pid, signal.SIGKILL)
                killed["pid"] = pid
            time.sleep(0.2)

    t = threading.Thread(target=kill_when_running)
    t.start()
    report = sweep.sweep(env["models"][:1], ["lee"], [5, 6], [THIRD], PARAMS, client=client, progress=False)
    t.join()
    assert killed, "no worker was killed: the test did not test anything"
    assert len(report.ran) == 2 and not report.failed  # the lost run was retried on a fresh worker
    runs = sorted(root.rglob("run.json"))
    folders = [p.parent for p in runs if "seed5-" in p.parent.name or "seed6-" in p.parent.name]
    assert len(folders) == 2  # one folder per run: no duplicate
    assert sorted(read_json(f / "run.json")["attempts"] for f in folders) == [1, 2]  # the killed run was retried
    for f in folders:
        assert sorted(p.name for p in f.iterdir()) == [f"{THIRD}.ipynb", f"{THIRD}.json", "run.json"]
    # the killed worker's kernel notices its parent is gone and removes its partial folder
    assert wait_for(lambda: not _partials(root), 30), f"partial folders left: {_partials(root)}"


def test_a_failing_run_is_retried_once_then_reported(env, monkeypatch):
    good, _ = sweep.plan(env["models"][:1], ["lee"], [9], [FIRST], {"n_sentences": 3})
    # a window no sentence of the corpus fits: the chapter itself stops (the pre-flight would refuse it)
    failing = sweep.Run(**{**good[0].__dict__, "params": {"n_sentences": 3, "example_min_tokens": 900}})
    monkeypatch.setattr(sweep, "plan", lambda *a, **k: ([failing, *good], []))
    report = sweep.sweep([], [], [], client=env["client"], progress=False)
    assert [r.seed for r in report.ran] == [9] and len(report.failed) == 1  # the other run finished
    run, why = report.failed[0]
    assert run == failing and why.startswith(f"{FIRST} stopped: ") and "\n" not in why
    folder = failing.folder(env["data"] / "sweeps")
    assert read_json(folder / "attempts.json")["attempts"] == 2  # the first try and one retry
    kept = folder / f"{FIRST}.failed.ipynb"
    assert str(kept) in why and kept.is_file()  # the message names a notebook that exists
    assert not (folder / "run.json").exists()


def test_exact_hta_over_the_workers_fills_chapter_6s_cache(env, monkeypatch):
    model = env["models"][0]
    out = corpus_hta.hta_job(model, "lee", n=5, seed=0, max_tokens=16, group=2, client=env["client"], progress=False)
    assert out["sentences"] == 5 and out["computed"] == 5 and out["cached_before"] == 0
    again = corpus_hta.hta_job(model, "lee", n=5, seed=0, max_tokens=16, client=env["client"], progress=False)
    assert again["computed"] == 0 and again["cached_before"] == 5

    from identifiability.hta import api, hta

    lm = load_model(model)
    texts = corpus_hta.job_sentences(model, "lee", 5, 0, 16)
    monkeypatch.setattr(api, "hta", lambda *a, **k: pytest.fail("computed instead of read from the cache"))
    cached = api.hta_corpus(lm, texts, mode="exact", seed=0, cache=True, progress=False)
    monkeypatch.undo()
    for r in cached[:2]:
        fresh = hta(lm, r.text, mode="exact")
        assert r.tokens == fresh.tokens and torch.allclose(r.S, fresh.S, rtol=1e-5, atol=1e-7)
