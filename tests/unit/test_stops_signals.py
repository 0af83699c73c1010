"""The Ctrl-C handler's own rules (the whole command's behaviour is tested in tests/integration/test_stops.py):
a second Ctrl-C during the first one's unwinding ends the process at once with the command's line last, and
the resource tracker that multiprocessing starts inherits a filter for its leaked-semaphore warning."""

from __future__ import annotations

import os
import signal

import pytest

from identifiability.base import stops


@pytest.fixture
def handler(monkeypatch):
    """The handler installed as a command installs it, undone afterwards."""
    previous = signal.getsignal(signal.SIGINT)
    monkeypatch.setenv("PYTHONWARNINGS", "default::DeprecationWarning")
    stops.install()
    yield
    signal.signal(signal.SIGINT, previous)
    stops.restore()


def test_the_trackers_warning_is_filtered_through_the_environment_and_a_users_filters_stay(handler):
    filters = os.environ["PYTHONWARNINGS"].split(",")
    assert filters == ["default::DeprecationWarning", stops.QUIET_TRACKER]
    stops.install()  # a second install adds nothing
    assert os.environ["PYTHONWARNINGS"].split(",") == filters


def test_a_second_ctrl_c_while_the_first_unwinds_reports_the_line_and_exits_at_once(handler, monkeypatch):
    written, exits = [], []
    monkeypatch.setattr(stops, "report", written.append)

    def exit_now(status: int) -> None:  # os._exit never returns: neither does its stand-in
        exits.append(status)
        raise SystemExit(status)

    monkeypatch.setattr(os, "_exit", exit_now)
    monkeypatch.setattr(stops, "stop_line", stops.RESUME)
    try:
        stops.on_sigint(signal.SIGINT, None)  # the first: unwinding starts, stderr silent
    except KeyboardInterrupt:
        pass  # caught here: pytest.raises would let pytest take it as the session's own Ctrl-C
    else:
        raise AssertionError("the first Ctrl-C raised nothing")
    assert (written, exits) == ([], [])
    with pytest.raises(SystemExit):
        stops.on_sigint(signal.SIGINT, None)  # the second, during the unwinding
    assert written == [stops.RESUME] and exits == [stops.EXIT_INTERRUPTED]


def test_run_sets_the_line_a_second_ctrl_c_reports(handler):
    stops.run(lambda: 0, resumes=True)
    assert stops.stop_line == stops.RESUME
    stops.run(lambda: 0, resumes=False)
    assert stops.stop_line == stops.RESTART
