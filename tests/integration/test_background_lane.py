"""The suite's background lane (tests/book/background.py): a job runs after what it needs, in the lane or in
the foreground (IDENTIFIABILITY_TESTS_FOREGROUND=1), gets its folder, its needs' folders and tiny models' folders;
a failure names the job and what needed it; the thread count follows the lane's one rule."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from book.background import Lane, TinyModel, call


def record(folder: str, *args: str) -> None:
    """A job: writes its arguments to ``folder``/args; ``boom`` fails it."""
    if "boom" in args:
        raise ValueError("boom")
    Path(folder, "args").write_text(" ".join(args))


def wait_for_file(folder: str, path: str) -> None:
    """A job that runs until ``path`` exists (at most 60 s)."""
    deadline = time.monotonic() + 60
    while not Path(path).exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _lane(tmp_path, foreground: bool) -> Lane:
    def model(seed: int, name: str) -> Path:
        return tmp_path / f"{name}-{seed}"

    return Lane(tmp_path / "lane", dict(os.environ), model, cores=2, foreground=foreground)


@pytest.mark.parametrize("foreground", [False, True])
def test_a_job_runs_after_what_it_needs_and_gets_its_folders(tmp_path, foreground):
    lane = _lane(tmp_path, foreground)
    first = call(record, "one", TinyModel(3, "tiny"))
    second = call(record, first)
    lane.start(second)
    if foreground:  # nothing runs until a test asks
        assert not lane.busy() and not lane.folder(first).exists()
    try:
        folder = lane.result(second)
    finally:
        lane.close()
    assert (folder / "args").read_text() == str(lane.folder(first))
    assert (lane.folder(first) / "args").read_text() == f"one {tmp_path / 'tiny-3'}"
    assert second.needs == (first,)


def test_a_failed_job_says_so_and_what_needed_it(tmp_path):
    lane = _lane(tmp_path, foreground=False)
    failing = call(record, "boom")
    after = call(record, failing)
    lane.start(after)
    try:
        with pytest.raises(RuntimeError, match=r"needs .*:record boom, which failed"):
            lane.result(after)
        with pytest.raises(RuntimeError, match=r":record boom failed \(exit 1\):(.|\n)*ValueError: boom"):
            lane.result(failing)
    finally:
        lane.close()


@pytest.mark.parametrize("foreground", [False, True])
def test_one_thread_while_the_lane_works_all_cores_otherwise(tmp_path, foreground):
    import torch

    lane = _lane(tmp_path, foreground)
    release = tmp_path / "release"
    job = call(wait_for_file, str(release))
    assert lane.threads() == 2
    lane.start(job)
    try:
        assert lane.threads() == (2 if foreground else 1)  # in the foreground nothing runs beside a test
        release.touch()
        lane.result(job)
        assert lane.threads() == 2 and torch.get_num_threads() == 2  # set again after the wait
    finally:
        lane.close()
