"""Every stop is one line: Ctrl-C (a real SIGINT to the command line's process group, as a terminal sends it)
prints one line and exits 130, a chapter's kernel that dies prints one line naming the chapter and exits 1,
and neither leaves a notebook or results file behind nor touches the previous run's. The command line runs
as a separate process; each test waits for a marker the run writes, never for a time."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from identifiability import cli
from identifiability.base import paths, stops
from identifiability.base.errors import ChapterFailed
from identifiability.chapters import execution
from identifiability.chapters.contract import by_name

ACROSS_MODELS = by_name("across_models").stem
CONTEXT_MIXING = by_name("context_mixing").stem

CHAPTER = by_name("explore").stem  # the quickest chapter
BAR = re.compile(r"^[^|]*\d+%\|")  # one draw of a progress bar: 'Executing:  25%|██▌       | 1/4 [...]'
MARKER_WAIT = 600  # seconds: only so that a run that never writes its marker fails instead of hanging


def stop_lines(stderr: str) -> list[str]:
    """What a command wrote to stderr other than its progress bars' draws."""
    return [x for x in re.split(r"[\r\n]", stderr) if x.strip() and not BAR.match(x)]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")  # a zombie has exited; only its parent's reaping is left


def start(cmd: list[str], logs: Path) -> subprocess.Popen:
    """``cmd`` in its own process group (so a signal to the group is what a terminal's Ctrl-C is), its output
    into ``logs``/stdout and ``logs``/stderr (SIGINT's default action: tests/conftest.py)."""
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / "stdout", "w") as out, open(logs / "stderr", "w") as err:
        return subprocess.Popen(
            cmd,
            cwd=paths.source_root(),
            stdout=out,
            stderr=err,
            start_new_session=True,
        )


def wait_for(marker: Path, proc: subprocess.Popen, logs: Path) -> str:
    """The marker's text, once the run has written it (it is renamed into place whole)."""
    deadline = time.monotonic() + MARKER_WAIT
    while not marker.exists():
        if proc.poll() is not None:
            pytest.fail(f"the run ended ({proc.returncode}) before its marker: {(logs / 'stderr').read_text()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no marker after {MARKER_WAIT} s: {(logs / 'stderr').read_text()}")
        time.sleep(0.05)
    return marker.read_text()


def finish(proc: subprocess.Popen, logs: Path) -> tuple[int, str]:
    return proc.wait(timeout=MARKER_WAIT), (logs / "stderr").read_text()


_WAIT = (
    "\n```{code-cell} ipython3\nimport os, pathlib, time\n\nm = pathlib.Path(marker)\n"
    "m.with_suffix('.tmp').write_text(str(os.getpid()))\nm.with_suffix('.tmp').replace(m)\n"
    "while True:\n    time.sleep(0.05)\n```\n"
)


def _waiting_chapter(folder: Path, whole: bool) -> Path:
    """Chapter 8 with a cell more after its set-up (``whole``), or only its parameters cell, and then a cell
    that writes the kernel's pid to the file parameter ``marker`` names and waits for the test to stop the run."""
    text = (paths.source_root() / "notebooks" / f"{CHAPTER}.md").read_text(encoding="utf-8")
    declared = 'results_dir = ""\n'
    after = "ch.record(**views.record())\n```\n" if whole else "```\n"
    assert text.count(declared) == 1 and after in text, "chapter 8 changed: update this test's copy"
    text = text.replace(declared, declared + 'marker = ""\n')
    end = text.index(after, text.index(declared)) + len(after)
    text = text[:end] + _WAIT + (text[end:] if whole else "")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{CHAPTER}.md").write_text(text, encoding="utf-8")
    return folder / f"{CHAPTER}.md"


@pytest.fixture
def chapter_run(tmp_path, tiny_model_folder, monkeypatch):
    """``chapter_run(whole)``: start the waiting chapter (:func:`_waiting_chapter`) on a tiny model through the
    command line, over an earlier run's executed notebook and results file, and wait for its marker; returns
    (process, kernel pid, logs, {file: its bytes before})."""
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "data"))
    out, results, marker = tmp_path / "out", tmp_path / "results", tmp_path / "marker"
    earlier = {out / f"{CHAPTER}.ipynb": b'{"an earlier": "finished run"}', results / f"{CHAPTER}.json": b"{}"}
    for f, data in earlier.items():
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(data)
    procs = []

    def run(whole: bool):
        cmd = [
            *(sys.executable, "-m", "identifiability.cli", "run", str(_waiting_chapter(tmp_path / "src", whole))),
            *("--model", str(tiny_model_folder(0, "tiny")), "--out", str(out)),
            *("-p", f"marker={marker}", "-p", f"results_dir={results}", "-p", "n_sentences=4"),
        ]
        procs.append(start(cmd, tmp_path / "logs"))
        kernel = int(wait_for(marker, procs[-1], tmp_path / "logs"))
        return procs[-1], kernel, tmp_path / "logs", earlier

    yield run
    for proc in procs:
        if proc.poll() is None:
            proc.kill()


def _untouched(earlier: dict[Path, bytes]) -> None:
    """The earlier run's files are as they were, and nothing else is beside them (no partial notebook)."""
    for f, data in earlier.items():
        assert f.read_bytes() == data
        assert sorted(p.name for p in f.parent.iterdir()) == [f.name]


def test_ctrl_c_during_a_chapter_is_one_line_exit_130_and_leaves_nothing(chapter_run):
    proc, kernel, logs, earlier = chapter_run(whole=True)  # the chapter's own cells have loaded the model
    os.killpg(proc.pid, signal.SIGINT)
    code, stderr = finish(proc, logs)
    assert code == stops.EXIT_INTERRUPTED
    assert stop_lines(stderr) == [stops.RESTART], stderr
    assert stderr.splitlines()[-1] == stops.RESTART  # on a line of its own, after the progress bar
    assert "Traceback" not in stderr
    assert not alive(kernel)  # the kernel was shut down with the command
    _untouched(earlier)  # no half-run notebook or results file a rerun could take as finished


def test_two_ctrl_c_a_moment_apart_end_with_the_one_line_last(chapter_run):
    proc, kernel, logs, earlier = chapter_run(whole=True)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.2)  # the second press while the first unwinds: the shape of the failure, not a wait for a result
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    code, stderr = finish(proc, logs)
    # 130, or killed by the second SIGINT once the interpreter, finishing, has put back the default action:
    # a shell reports both as 130, and either way the line was written last
    assert code in (stops.EXIT_INTERRUPTED, -signal.SIGINT)
    assert stop_lines(stderr) == [stops.RESTART], stderr
    assert stderr.splitlines()[-1] == stops.RESTART and "terminate called" not in stderr
    _untouched(earlier)


def test_a_kernel_that_dies_is_one_line_naming_the_chapter_and_exit_1(chapter_run):
    proc, kernel, logs, earlier = chapter_run(whole=False)  # the kernel alone: what it ran does not matter
    os.kill(kernel, signal.SIGKILL)  # what the kernel gets when the system runs out of memory
    code, stderr = finish(proc, logs)
    assert code == 1
    line = (
        f"error: chapter {CHAPTER}: the kernel died (most often out of memory); try smaller parameters such as "
        "-p n_sentences=2 (this run: 4)"
    )
    assert stop_lines(stderr) == [line], stderr
    _untouched(earlier)


def _live(field: str, value: int) -> set[int]:
    """The live processes whose ``field`` of /proc/<pid>/stat ("ppid": parent, "pgrp": process group) is
    ``value``."""
    at = {"ppid": 1, "pgrp": 2}[field]  # counted from the state, the first field after the name
    found = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[at]) == value and fields[0] not in ("Z", "X"):
                found.add(int(d.name))
    return found


def _takes_sigint(status: Path) -> bool:
    """Whether the process or thread a /proc status file describes neither blocks nor ignores SIGINT (its
    masks have bit n-1 for signal n)."""
    masks = dict(x.split(":", 1) for x in status.read_text().splitlines() if x.startswith(("SigBlk", "SigIgn")))
    return not any(int(m, 16) >> (signal.SIGINT - 1) & 1 for m in masks.values())


def test_a_local_clusters_workers_start_with_sigint_blocked_and_the_command_keeps_it():
    """The mechanism behind the one line: the worker processes (and any they start) never take a Ctrl-C,
    which once made a worker print a traceback after the command's line (CI, 2 December 2026); the
    command's own thread gets SIGINT back."""
    from identifiability.base import cluster

    before = _live("ppid", os.getpid())
    client = cluster.connect(workers=1)
    try:
        started = _live("ppid", os.getpid()) - before
        assert started, "the LocalCluster started no worker process"
        for pid in started:
            assert not _takes_sigint(Path(f"/proc/{pid}/status")), f"process {pid} would take a Ctrl-C"
        assert _takes_sigint(Path(f"/proc/self/task/{threading.main_thread().native_id}/status"))
    finally:
        cluster.close(client, own=True)


def test_a_ctrl_c_that_only_the_held_thread_could_take_arrives_as_the_body_ends():
    from identifiability.base.cluster import sigint_held

    reached = []
    with pytest.raises(KeyboardInterrupt):
        with sigint_held():
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            time.sleep(0.1)
            reached.append("the end of the body")
    assert reached == ["the end of the body"]


@pytest.mark.parametrize("via", ["command line", "make"])
def test_ctrl_c_during_a_sweep_on_a_local_cluster_is_one_line_and_stops_every_worker(
    via, tmp_path, tiny_model_folder, monkeypatch
):
    """The LocalCluster's worker processes are in the terminal's process group and get the Ctrl-C too: they
    must not print (a warning, a traceback) after the command's line, and none may outlive the command.
    Through make, make gets it too, and must not add its own "*** [sweep] Error 130" line."""
    data = tmp_path / "data"
    monkeypatch.setenv(paths.DATA_ENV, str(data))
    model = str(tiny_model_folder(0, "tiny"))
    if via == "make":  # this interpreter; its install is taken as done
        cmd = ["make", "-s", "-o", ".venv/.installed", "sweep", f"PY={sys.executable}", f"MODELS={model}"]
        cmd += ["CORPORA=lee", "SEEDS=0", "CHAPTERS=08", "WORKERS=1"]
    else:
        cmd = [sys.executable, "-m", "identifiability.cli", "sweep", "--models", model, "--corpora", "lee"]
        cmd += ["--seeds", "0", "--chapters", "08", "--workers", "1"]
    logs = tmp_path / "logs"
    proc = start(cmd, logs)
    deadline = time.monotonic() + MARKER_WAIT
    while not any(data.rglob(".partial-*")):  # a worker has started the run: its private folder
        assert proc.poll() is None, (
            f"the sweep ended ({proc.returncode}) before its run began: {(logs / 'stderr').read_text()}"
        )
        assert time.monotonic() < deadline, "the run never began"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    code, stderr = finish(proc, logs)
    # make dies by the interrupt itself, which a shell reports as 130 too
    assert code == (-signal.SIGINT if via == "make" else stops.EXIT_INTERRUPTED), stderr
    assert stop_lines(stderr) == [stops.RESUME], stderr
    deadline = time.monotonic() + 60  # a kernel notices within about a second that its worker has gone
    while _live("pgrp", proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _live("pgrp", proc.pid), "a worker or kernel outlived the sweep"
    assert not list(data.rglob(".partial-*")), "the interrupted run left its private folder"


# -- the pieces, in this process -------------------------------------------------------------------------


def test_the_dead_kernel_line_suggests_half_the_sentences_or_says_what_to_do():
    assert stops.kernel_died(by_name("context_mixing").stem, {"n_sentences": 50}).endswith(
        "try smaller parameters such as -p n_sentences=25 (this run: 50)"
    )
    assert stops.kernel_died(by_name("across_models").stem, {}) == (
        f"chapter {ACROSS_MODELS}: the kernel died (most often out of memory); try smaller parameters (-p name=value)"
    )


def test_a_dead_kernel_is_a_chapter_failure_and_the_previous_notebook_stays(tmp_path, monkeypatch, caplog):
    """nbclient's DeadKernelError, raised where papermill raises it: after it wrote part of the notebook, and
    (when the kernel died while a cell ran) logged a line of its own, which the one line replaces."""
    import papermill
    from nbclient.exceptions import DeadKernelError

    def dies(nb, output_path, **kwargs):
        Path(output_path).write_text('{"half": "a run"}')
        logging.getLogger("papermill").error("Kernel died while waiting for execute reply.")
        raise DeadKernelError("Kernel died")

    monkeypatch.setattr(papermill, "execute_notebook", dies)
    source = paths.source_root() / "notebooks" / f"{CONTEXT_MIXING}.md"
    (tmp_path / f"{CONTEXT_MIXING}.ipynb").write_text("earlier")
    with pytest.raises(ChapterFailed, match=rf"chapter {CONTEXT_MIXING}: the kernel died .* -p n_sentences=10 "):
        execution.run_notebook(source, tmp_path, {"n_sentences": 20})
    assert [p.name for p in tmp_path.iterdir()] == [f"{CONTEXT_MIXING}.ipynb"]
    assert (tmp_path / f"{CONTEXT_MIXING}.ipynb").read_text() == "earlier"
    assert not [r for r in caplog.records if "Kernel died" in r.getMessage()]


def test_a_failing_chapter_still_leaves_its_notebook_where_the_error_says(tmp_path, monkeypatch):
    import papermill

    def fails(nb, output_path, **kwargs):
        Path(output_path).write_text(json.dumps({"the": "traceback"}))
        raise papermill.PapermillExecutionError(3, 4, "boom", "ValueError", "boom", [])

    monkeypatch.setattr(papermill, "execute_notebook", fails)
    source = paths.source_root() / "notebooks" / f"{CONTEXT_MIXING}.md"
    with pytest.raises(ChapterFailed, match=f"ValueError: boom .full traceback in .*{CONTEXT_MIXING}.ipynb"):
        execution.run_notebook(source, tmp_path, {})
    assert [p.name for p in tmp_path.iterdir()] == [f"{CONTEXT_MIXING}.ipynb"]
    assert json.loads((tmp_path / f"{CONTEXT_MIXING}.ipynb").read_text()) == {"the": "traceback"}


def test_a_failing_chapter_is_one_line_with_the_notebook_and_keeps_what_came_before(tmp_path, capsys):
    src = tmp_path / "99_failing.md"
    before = tmp_path / "before.json"
    src.write_text(
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "kernelspec:\n  name: python3\n  display_name: Python 3\n  language: python\n---\n\n"
        "```{code-cell} ipython3\n:tags: [parameters]\n\nmodel = 'all-MiniLM-L6-v2'\ncorpus = 'lee'\n```\n\n"
        f"```{{code-cell}} ipython3\nopen({str(before)!r}, 'w').write('{{}}')\n```\n\n"
        "```{code-cell} ipython3\nraise ValueError('the corpus has no sentence of 9 tokens\\nsecond line')\n```\n"
    )
    out = tmp_path / "executed"
    assert cli.main(["run", str(src), "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]  # above it: papermill's progress bar
    assert err.startswith("error: 99_failing stopped: ValueError: second line")
    assert str(out / "99_failing.ipynb") in err and (out / "99_failing.ipynb").is_file()
    assert before.is_file()  # what ran before the error stays
