"""Sweeps and the exact-HTA job on a Dask cluster started outside the tool: a scheduler and two workers as
separate processes, started with Dask's own command-line tools (``dask scheduler``, ``dask worker``), each
worker with a data folder of its own (not the client's), and the commands run through the command line with
``--scheduler ADDRESS``. In the sweep, one worker and the chapter kernel it started are killed while it
executes a run (a machine that dies): the sweep still ends with one finished folder per run, in the client's
data folder. The HTA job's cache entries come back to the client's cache."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from identifiability.base import paths
from identifiability.base.fileio import read_json
from identifiability.chapters.contract import by_name

DASK = Path(sys.executable).with_name("dask")
# Chapter 1 with few sentences: a few seconds of computing per run on a tiny model.
PARAMS = {"n_sentences": 6}
FILES = [
    f"{by_name('model_and_data').stem}.ipynb",
    f"{by_name('model_and_data').stem}.json",
    "run.json",
]  # a finished run's folder
QUIET = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
WAIT = 300  # seconds before a marker that never comes fails the test (a hang, not a timing assertion)


def _wait_for(what: str, found):
    """Poll ``found()`` until it returns something true; fail after WAIT seconds."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"waited {WAIT} s for {what}")


# (the worker's process id, the tasks it is executing now), run on each worker by ``Client.run``; a lambda is
# sent by value (the workers cannot import this test module)
_executing = lambda dask_worker: (  # noqa: E731
    os.getpid(),
    [str(k) for k, ts in dask_worker.state.tasks.items() if ts.state == "executing"],
)


def _kill_tree(pid: int) -> None:
    """SIGKILL a process and every process below it (a worker's chapter kernels run in sessions of their own,
    so a process group would miss them)."""
    try:
        proc = psutil.Process(pid)
        family = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in family:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(family, timeout=30)


@pytest.fixture
def cluster(tmp_path):
    """``cluster(worker_data)``: a scheduler and two single-threaded workers (no nanny: the process started is
    the worker), each worker filing what it keeps under ``worker_data/<i>``, or ``None`` for the client's data
    folder. Returns (scheduler address, worker processes, a Dask client of the test's own). Every process is
    killed at the end, with whatever it started."""
    from distributed import Client

    started: list[subprocess.Popen] = []
    clients: list = []

    def start(worker_data: Path | None) -> tuple[str, list[subprocess.Popen], object]:
        scheduler_file = tmp_path / "scheduler.json"
        logs = tmp_path / "logs"
        logs.mkdir()

        def spawn(name: str, args: list[str], env: dict, cwd: Path) -> subprocess.Popen:
            log = open(logs / f"{name}.log", "wb")  # noqa: SIM115 (the process writes it until the end)
            p = subprocess.Popen([str(DASK), *args], env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
            log.close()
            started.append(p)
            return p

        env = {**os.environ, **QUIET}
        spawn("scheduler", ["scheduler", "--port", "0", "--no-dashboard", "--scheduler-file", str(scheduler_file)],
              env, tmp_path)  # fmt: skip
        _wait_for("the scheduler file", lambda: scheduler_file.is_file() and scheduler_file.stat().st_size)
        workers = []
        for i in range(2):
            wenv, cwd = dict(env), tmp_path
            if worker_data is not None:
                wenv[paths.DATA_ENV] = str(worker_data / str(i))
                cwd = worker_data / str(i)
                cwd.mkdir(parents=True, exist_ok=True)
            args = ["worker", "--scheduler-file", str(scheduler_file), "--nthreads", "1", "--nworkers", "1"]
            args += ["--no-nanny", "--no-dashboard", "--local-directory", str(tmp_path / f"scratch{i}")]
            workers.append(spawn(f"worker{i}", args, wenv, cwd))
        client = Client(scheduler_file=str(scheduler_file), timeout=60)
        clients.append(client)
        client.wait_for_workers(2, timeout=WAIT)
        return client.scheduler.address, workers, client

    try:
        yield start
    finally:
        for c in clients:
            c.close()
        for p in reversed(started):  # workers (with their kernels) first, the scheduler last
            _kill_tree(p.pid)
            p.wait(timeout=30)


def _cli(args: list[str], address: str, data: Path) -> subprocess.Popen:
    """The command line, as a client whose data folder is ``data``."""
    env = {**os.environ, **QUIET, paths.DATA_ENV: str(data)}
    return subprocess.Popen(
        [sys.executable, "-m", "identifiability.cli", *args, "--scheduler", address],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _kill_a_worker_running_a_run(
    client, workers: list[subprocess.Popen], private: Path, sweep: subprocess.Popen
) -> int:
    """Wait until a run executes on a worker (the scheduler's workers report an executing task and the run's
    private folder exists under ``private``), then kill that worker and its kernel; returns its pid."""

    def running() -> int | None:
        if sweep.poll() is not None:
            pytest.fail(f"the sweep ended before a worker was killed:\n{sweep.stdout.read()}")
        if not (private.is_dir() and any(private.rglob(".partial-*"))):
            return None
        busy = [pid for pid, keys in client.run(_executing).values() if keys]
        return busy[0] if busy else None

    pid = _wait_for("a run executing on a worker", running)
    assert pid in {w.pid for w in workers}, "the busy worker is not a process this test started"
    _kill_tree(pid)
    return pid


def _finished_runs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("run.json"))


def test_a_sweep_on_an_external_scheduler_survives_a_killed_worker(cluster, tiny_model_folder, tmp_path):
    model = tiny_model_folder(0, "tiny")
    data, elsewhere = tmp_path / "data", tmp_path / "workers"
    address, workers, client = cluster(elsewhere)
    args = ["sweep", "--models", str(model), "--corpora", "lee", "--seeds", "0,1", "--chapters", "01"]
    sweep = _cli(args + [x for k, v in PARAMS.items() for x in ("-p", f"{k}={v}")], address, data)
    try:
        killed = _kill_a_worker_running_a_run(client, workers, elsewhere, sweep)
        out, _ = sweep.communicate(timeout=WAIT)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert sweep.returncode == 0, out
    assert "2 run(s) executed, 0 already finished, 0 failed" in out, out
    assert next(w for w in workers if w.pid == killed).poll() is not None  # the worker is gone, not restarted
    runs = _finished_runs(data / "sweeps")
    assert sorted(p.name.split("-")[0] for p in runs) == ["seed0", "seed1"]  # exactly one folder per run
    for run in runs:
        assert sorted(p.name for p in run.iterdir()) == [
            f"{by_name('model_and_data').stem}.ipynb",
            f"{by_name('model_and_data').stem}.json",
            "run.json",
        ]
    assert sorted(read_json(r / "run.json")["attempts"] for r in runs) == [1, 2]  # the killed run ran again
    assert not list((data / "sweeps").rglob(".partial-*"))
    assert not list(elsewhere.rglob("run.json"))  # the runs were filed by the client, not in the workers' folders


def _entries(cache: Path) -> dict[str, bytes]:
    return {p.relative_to(cache).as_posix(): p.read_bytes() for p in sorted(cache.rglob("*")) if p.is_file()}


def test_exact_hta_on_an_external_scheduler_fills_the_clients_cache(cluster, tiny_model_folder, tmp_path):
    model = tiny_model_folder(0, "tiny")
    data, elsewhere = tmp_path / "data", tmp_path / "workers"
    address, _, _ = cluster(elsewhere)
    args = ["hta", "--model", str(model), "--corpus", "lee", "--n", "3", "--max-tokens", "16"]
    out, _ = _cli(args, address, data).communicate(timeout=WAIT)
    assert "exact HTA: 3 sentences, 0 cached before, 3 computed" in out, out
    mine = _entries(data / "cache" / "hta")
    assert sorted(Path(k).suffix for k in mine) == [".json"] * 3 + [".safetensors"] * 3, sorted(mine)
    theirs = {}
    for i in (0, 1):
        theirs |= _entries(elsewhere / str(i) / "cache" / "hta")
    assert theirs == mine  # the very entries the workers computed, byte for byte
    out, _ = _cli(args, address, data).communicate(timeout=WAIT)
    assert "exact HTA: 3 sentences, 3 cached before, 0 computed" in out, out
