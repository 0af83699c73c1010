"""How a command stops: in one line on stderr, whatever stopped it.

- **Ctrl-C** (SIGINT) in any command: ``interrupted; run the same command again to resume`` (``to restart``
  where the command has nothing to resume), exit status 130 (128 + SIGINT, what a shell reports), no
  traceback (:func:`run`). A command that knows better what a rerun does raises :class:`Interrupted` with its
  own line: a fine-tune stopped in its first epoch has no checkpoint and restarts from the beginning. From
  the signal on, stderr is silent, so that what the unwinding prints (a library's traceback, a kernel's
  shutdown log, a progress bar's last draw, a cluster's closing messages) cannot bury that line.
- **A reader that goes away** (``identifiability compare ... | head``): no line and no traceback, exit
  status 141 (128 + SIGPIPE, what a shell reports for a command its pipe's reader left; :func:`stdout_closed`).
- **A chapter's kernel that dies by itself** (most often killed for memory): :func:`executing` turns
  nbclient's ``DeadKernelError`` into a ``ChapterFailed`` that names the chapter, the likely cause and a
  smaller parameter (exit status 1).

While a chapter executes, papermill writes its notebook to a hidden file beside the target
(:func:`executing`): the target is replaced only when the chapter ends, finished or failed with its
traceback. An interrupted chapter leaves no notebook, and the previous one stays as it was. Its results file
is written by its last cell and atomically (:func:`identifiability.base.fileio.atomic_write`): an interrupted
chapter never leaves one, half or whole, that a rerun could take as finished.

Imports nothing heavy: the command line installs the handler before torch loads.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import ChapterFailed

EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
RESUME = "interrupted; run the same command again to resume"
RESTART = "interrupted; run the same command again to restart"
# multiprocessing's resource tracker (a process of its own, started by Dask and torch's workers) warns at its
# exit about the semaphores of a process that a Ctrl-C ended, after the command's line; it frees them anyway.
# The filter reaches it through the environment, which it inherits when it starts.
QUIET_TRACKER = "ignore:resource_tracker:UserWarning"

# nbclient options of every chapter run. The kernel logs nothing below CRITICAL: on Ctrl-C it would print the
# traceback of a reply sent on a closed socket, and every run a warning about TCP without encryption (it
# listens on localhost only). "immediate": the kernel is killed rather than asked to stop, so a Ctrl-C during
# a long tensor operation does not wait for it; at a normal end the kernel is idle and has nothing left to do.
KERNEL_OPTIONS: dict = {"extra_arguments": ["--IPKernelApp.log_level=CRITICAL"], "shutdown_kernel": "immediate"}


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C, with the line that says what running the same command again does."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


class _Tracked:
    """A text stream that remembers whether what was last written ended a line (a progress bar's does not)."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.at_line_start = True

    def write(self, text: str) -> int:
        if text:
            self.at_line_start = text.endswith("\n")
        return self._stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


_saved_stderr: int | None = None  # a copy of fd 2 once stderr is silenced: where the one line goes
_at_line_start = True  # whether stderr's last output ended a line when it was silenced


def _silence() -> None:
    """Point fd 2 (and so sys.stderr, and what the interpreter prints at exit) at /dev/null, once."""
    global _saved_stderr, _at_line_start
    if _saved_stderr is not None:
        return
    # what is written from here on (a progress bar closed by the unwinding) goes nowhere, so it does not count
    _at_line_start = getattr(sys.stderr, "at_line_start", True)
    try:
        sys.stderr.flush()  # what was written before the signal goes where it was meant to
    except (OSError, ValueError):
        pass
    _saved_stderr = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)


def restore() -> None:
    """Undo :func:`_silence`: a KeyboardInterrupt that some library caught (one imported while the signal came
    did) never reached :func:`run`, and the command went on."""
    global _saved_stderr
    if _saved_stderr is None:
        return
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os.dup2(_saved_stderr, 2)
    os.close(_saved_stderr)
    _saved_stderr = None


stop_line = RESTART  # what a second Ctrl-C reports: the line of the command that is running (run sets it)


def on_sigint(signum, frame) -> None:
    """The SIGINT handler :func:`install` sets: the first Ctrl-C silences stderr and raises KeyboardInterrupt;
    a second one, during the first one's unwinding, reports :data:`stop_line` and ends the process."""
    if _saved_stderr is not None:
        # A second Ctrl-C while the first one unwinds (or after a library swallowed it): the reader wants out
        # now. Raising again inside that unwinding can abort the interpreter from a C++ thread ("terminate
        # called without an active exception"), after the line: end here, the line last.
        report(stop_line)
        os._exit(EXIT_INTERRUPTED)
    _silence()
    raise KeyboardInterrupt


def install() -> None:
    """Handle Ctrl-C as :func:`run` reports it: stderr goes silent and KeyboardInterrupt is raised. For a
    process that is a command; the command line calls it before anything heavy loads. Only the main thread
    can set a signal handler; elsewhere this does nothing."""
    try:
        signal.signal(signal.SIGINT, on_sigint)
    except ValueError:
        return
    warnings = os.environ.get("PYTHONWARNINGS", "")
    if QUIET_TRACKER not in warnings.split(","):
        os.environ["PYTHONWARNINGS"] = f"{warnings},{QUIET_TRACKER}" if warnings else QUIET_TRACKER
    if not isinstance(sys.stderr, _Tracked):
        sys.stderr = _Tracked(sys.stderr)
    if sys.excepthook is not _excepthook:
        global _previous_hook
        _previous_hook, sys.excepthook = sys.excepthook, _excepthook


_previous_hook = sys.excepthook


def _excepthook(kind, value, tb) -> None:
    """A Ctrl-C before :func:`run` took over (while the command line's modules load): nothing began."""
    if issubclass(kind, KeyboardInterrupt):
        report(value.line if isinstance(value, Interrupted) else RESTART)
    else:
        _previous_hook(kind, value, tb)


def report(line: str) -> None:
    """Write ``line`` as the last thing on stderr, on a line of its own (after a half-drawn progress bar, or
    the ``^C`` a terminal echoes), and keep stderr silent from here on."""
    _silence()
    fd = _saved_stderr if _saved_stderr is not None else 2
    at_start = _at_line_start and not os.isatty(fd)
    os.write(fd, (("" if at_start else "\n") + line + "\n").encode())


def run(command: Callable[[], int], resumes: bool, handle: bool = True) -> int:
    """``command()``'s exit status; on Ctrl-C, its one line and :data:`EXIT_INTERRUPTED`.

    Args:
        resumes: whether running the same command again picks up where this one stopped (a sweep, exact
            HTA's cache) or starts it over (a chapter, a book); an :class:`Interrupted` says for itself.
        handle: False leaves Ctrl-C to the caller (a test or script that calls the command line's ``main``
            with its own arguments, inside a process that is not the command).
    """
    if not handle:
        return command()
    install()
    global stop_line
    stop_line = RESUME if resumes else RESTART
    restore()  # a Ctrl-C while the modules loaded that an import caught: it did not stop this command
    try:
        status = command()
    except KeyboardInterrupt as e:
        report(e.line if isinstance(e, Interrupted) else RESUME if resumes else RESTART)
        return EXIT_INTERRUPTED
    except BaseException:
        restore()  # a Ctrl-C that some library swallowed must not hide this error
        raise
    restore()
    return status


def stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (``... | head`` after head exited). If so, stdout is
    pointed at /dev/null, as Python's documentation advises (signal module, "Note on SIGPIPE"): the
    interpreter flushes it at exit, and what is left in its buffer would fail again, with a traceback. A
    BrokenPipeError while stdout's reader is there came from elsewhere, and is not this stop."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False  # not a file: nothing tells
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    if not any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0)):
        return False
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    return True


def kernel_died(chapter: str, params: dict) -> str:
    """The one line for a chapter whose kernel died: the chapter, the likely cause, a smaller parameter.

    Args:
        params: the parameters it ran with, its declared defaults included.
    """
    n = params.get("n_sentences")
    if isinstance(n, int) and not isinstance(n, bool) and n > 1:
        hint = f"try smaller parameters such as -p n_sentences={n // 2} (this run: {n})"
    else:
        hint = "try smaller parameters (-p name=value)"
    return f"chapter {chapter}: the kernel died (most often out of memory); {hint}"


@contextmanager
def executing(source: Path, target: Path, params: dict) -> Iterator[Path]:
    """The file papermill writes a chapter's executed notebook to: a hidden one beside ``target``
    (``.partial-<name>``), moved over ``target`` when execution ends, finished or failed with a traceback
    (the error names ``target``). Interrupted, or when the kernel died, it is removed and ``target`` stays as
    it was; a dead kernel raises ``ChapterFailed`` with :func:`kernel_died`'s line.

    Args:
        params: the chapter's parameters, its declared defaults included.
    """
    from nbclient.exceptions import DeadKernelError

    partial = target.with_name(f".partial-{target.name}")
    log = logging.getLogger("papermill")  # nbclient logs through papermill's logger
    log.addFilter(_no_kernel_died)
    try:
        yield partial
    except KeyboardInterrupt:
        partial.unlink(missing_ok=True)
        raise
    except DeadKernelError:
        partial.unlink(missing_ok=True)
        raise ChapterFailed(kernel_died(source.stem, params)) from None
    except BaseException:  # the chapter's own error: its notebook holds the traceback the message points to
        if partial.exists():
            os.replace(partial, target)
        raise
    finally:
        log.removeFilter(_no_kernel_died)
    os.replace(partial, target)


def _no_kernel_died(record: logging.LogRecord) -> bool:
    """Drops nbclient's "Kernel died while waiting for execute reply.": :func:`kernel_died` says it in full."""
    return not record.getMessage().startswith("Kernel died")


def _is_the_command_line() -> bool:
    """Whether this process is the command line: ``python -m identifiability.cli`` (the Makefile's way) or the
    ``identifiability`` script."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return getattr(spec, "name", None) == "identifiability.cli" or Path(sys.argv[0] if sys.argv else "").name == (
        "identifiability"
    )


# The command line imports this module before torch, whose import takes a while: a Ctrl-C then is one line too.
if _is_the_command_line():
    install()
