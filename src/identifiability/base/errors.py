"""The base class of every error a user can fix by changing what they passed (a parameter, a model, a corpus,
a command-line option): the command line prints its message, one line that says what to do, and exits 2.

Each module raises its own subclass (``ParameterError``, ``PreflightError``, ``ModelNotAvailable``, ...);
whoever reports errors to a user catches :class:`UserError`. Imports nothing of the package.
"""

from __future__ import annotations


class UserError(Exception):
    """An input that cannot work; the message is one line that says what to pass instead."""


class SweepError(UserError, ValueError):
    """A sweep or cluster job that cannot start; the message is one line that says what to do."""


class ChapterFailed(RuntimeError):
    """A chapter stopped with an error; the message is its last line and where the full traceback is."""


def one_line(error: BaseException) -> str:
    """The first line of an error's message (its type's name when it has none); a first line that ends in a
    colon takes the next line with it ("Validation error for field 'x':" says what follows)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [type(error).__name__]
    return f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]
