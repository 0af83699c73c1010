"""Chapter parameters: the types and allowed values of the parameters the chapters declare, and the one reader
of a chapter's declarations.

A chapter declares its parameters with their defaults in its source's cell tagged ``parameters``
(:func:`declared_parameters`, read by :func:`identifiability.chapters.executed.cell_parameters`, the one reader of that
cell). A given value is converted to its default's type, then checked against what the parameter allows
(:data:`ALLOWED`: counts at least 1, seeds at least 0, a device this machine has, the choices of a choice
parameter, length expressions that parse), or refused with one line (:class:`Parameter`). The chapter
contract (:mod:`identifiability.chapters.contract`) applies these to a chapter's parameters.
"""

from __future__ import annotations

import difflib
import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import UserError
from .executed import PARAMETERS, cell_parameters


class ParameterError(UserError, ValueError):
    """A chapter parameter or chapter name that is not declared, or a value of the wrong type."""


@dataclass(frozen=True)
class Allowed:
    """The values a parameter allows beyond its type: at least ``minimum`` (``why`` says what needs it), one
    of ``choices``, or what ``test`` accepts (it returns the problem, a few words, or None). Checked for every
    given value before anything runs; a value left unset (None) is not checked."""

    minimum: float | None = None
    why: str = ""
    choices: tuple = ()
    test: Callable[[object], str | None] | None = None

    def problem(self, value) -> str | None:
        if value is None:
            return None
        if self.minimum is not None and value < self.minimum:
            return f"must be at least {self.minimum:g} ({self.why})"
        if self.choices and value not in self.choices:
            return f"must be one of {', '.join(map(str, self.choices))}"
        return self.test(value) if self.test else None


def _device(value: str) -> str | None:
    """Why ``value`` is not a torch device this machine has, or None."""
    import torch

    try:
        dev = torch.device(value)
    except (RuntimeError, ValueError):
        return "is not a device: use cpu, cuda, cuda:N or mps"
    if dev.type == "cuda" and not (torch.cuda.is_available() and (dev.index or 0) < torch.cuda.device_count()):
        have = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return f"is not available here: torch sees {have} CUDA devices"
    if dev.type == "mps" and not torch.backends.mps.is_available():
        return "is not available here: torch sees no MPS device"
    if dev.type not in ("cpu", "cuda", "mps"):
        return "is not a device the chapters run on: use cpu, cuda, cuda:N or mps"
    return None


def _lengths(value: str) -> str | None:
    """Why ``value`` is not a list of lengths for chapter 2 (integers or [k]dv[+-n]), or None."""
    from ..nullspace.common import parse_lengths

    try:
        return None if parse_lengths(value, d_v=64) else "gives no length"
    except ValueError as e:
        return f"is not a list of lengths: {str(e).splitlines()[0]}"


def _ratios(value: str) -> str | None:
    """Why ``value`` is not a comma-separated list of positive ratios d_s / d_v (chapter 7), or None."""
    try:
        r = [float(x) for x in value.split(",") if x.strip()]
    except ValueError:
        return "is not a list of numbers, e.g. 0.5,1,1.25,2"
    if not all(map(math.isfinite, r)):  # float() reads inf and nan
        return "needs finite numbers, e.g. 0.5,1,1.25,2"
    return None if r and min(r) > 0 else "needs at least one ratio, each above 0"


def _text(value: str) -> str | None:
    return None if value.strip() else "is empty"


SAMPLES = ("short", "proportional")  # chapter 10's samples (its study's ``sentences``)


def _measures(value: str) -> str | None:
    """Why ``value`` is not a list of registered measures (chapter 10's ``measures``), or None."""
    from ..contributions import MEASURES

    bad = [n for n in (x.strip() for x in value.split(",")) if n and n not in MEASURES]
    return f"names unknown measure(s) {', '.join(bad)}: choose from {', '.join(sorted(MEASURES))}" if bad else None


_COUNT = "a count"
# What each parameter allows beyond its type: one table for the whole book, since a name means the same
# thing in every chapter that declares it (a test checks that every number a chapter declares has an entry).
# Checks that need the model or the text are the chapters' ``checks``.
ALLOWED: dict[str, Allowed] = {
    **{
        name: Allowed(1, _COUNT)
        for name in (
            "n_sentences",
            "example_min_tokens",
            "example_max_tokens",
            "lp_rounds",
            "search_steps",
            "fig1_max_length",
            "fig1_n_lengths",
            "fig1_repeats",
            "fig1_long_repeats",
            "viewer_sentences",
            "viewer_max_tokens",
            "epochs",
            "patience",
            "batch_size",
            "mlp_hidden",
            "second_n_sentences",
            "hist_bins",
            "n_second",
            "n_exact",
            "n_live",
            "probes",
            "n_explorer",
            "max_offset",
            "twin_epochs",
        )
    },
    "max_tokens": Allowed(1, "tokens, special ones included"),
    "min_tokens": Allowed(1, "tokens, special ones included"),
    "exact_max_tokens": Allowed(1, "tokens, special ones included"),
    "n_pairs": Allowed(2, "sentence pairs for C5's middle separator (an interval)"),
    "twin_sentences": Allowed(2, "sentences the untrained twin runs on (an interval needs two)"),
    "seed": Allowed(0, "a random seed"),
    "example_index": Allowed(0, "an index into the sampled sentences"),
    "head": Allowed(0, "heads are numbered from 0"),
    "rescale_max": Allowed(1, "factors are drawn in [1/rescale_max, rescale_max]"),
    "device": Allowed(test=_device),
    "precision": Allowed(choices=("float32", "float64")),
    "hta_mode": Allowed(choices=("estimate", "exact")),
    "lengths": Allowed(test=_lengths),
    "example_length": Allowed(test=_lengths),
    "search_lengths": Allowed(test=_lengths),
    "jacobian_max_length": Allowed(test=_lengths),
    "sentence": Allowed(test=_text),
    "n_sources": Allowed(3, "texts cut into inputs: C19 reads inputs cut from 3 different texts"),
    "ratios": Allowed(test=_ratios),
    "sample": Allowed(choices=SAMPLES),
    "measures": Allowed(test=_measures),
}


@dataclass(frozen=True)
class Parameter:
    """A parameter a chapter declares, with its default (from the parameters cell). A given value is
    converted to the default's type, then checked against what it allows (:meth:`coerce`, :data:`ALLOWED`)."""

    name: str
    default: object
    kind: type | None = None  # the type of a parameter whose default is None ("not set"); else the default's
    allowed: Allowed = Allowed()

    def coerce(self, value, chapter: str):
        """``value`` as the parameter's type and within what it allows; ParameterError with one line (and an
        example) otherwise."""
        value = self._convert(value, chapter)
        problem = self.allowed.problem(value)
        if problem:
            raise ParameterError(f"{chapter}: {self.name}={value!r} {problem}; pass e.g. -p {self.name}={self.default}")
        return value

    def _convert(self, value, chapter: str):
        """``value`` as the parameter's type; ParameterError with one line (and an example) otherwise. A default
        of None takes any value, unless the contract gives its type; then "none" or "" leaves it not set."""
        default = self.default
        if default is None and self.kind is not None:
            if value is None or str(value).strip().lower() in ("", "none"):
                return None
            default = self.kind()  # the type's zero, for the conversion and the message
        elif default is None or isinstance(value, type(default)) and not isinstance(value, bool) or value is None:
            return value
        kind = type(default)
        try:
            if kind is bool:
                if isinstance(value, bool):
                    return value
                if str(value).lower() in ("1", "true", "yes"):
                    return True
                if str(value).lower() in ("0", "false", "no"):
                    return False
                raise ValueError
            if kind is int and isinstance(value, float) and not value.is_integer():
                raise ValueError
            return kind(value)
        except (TypeError, ValueError):
            raise ParameterError(
                f"parameter {self.name!r} of {chapter} must be {kind.__name__} (default {self.default!r}), got "
                f"{value!r}; e.g. -p {self.name}={default}"
            ) from None


def declared_parameters(source: Path) -> dict:
    """{name: default} of the notebook's cell tagged ``parameters``.

    Read once per version of the file (its path, modification time and size): a sweep's plan, the pre-flight and
    each execution ask for it dozens of times, and parsing a chapter is far slower than a look-up."""
    try:
        stat = Path(source).stat()
    except OSError:
        return _read_declared(str(source))  # raises what reading it raises
    return dict(_declared_version(str(Path(source).resolve()), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=64)
def _declared_version(path: str, _mtime_ns: int, _size: int) -> dict:
    return _read_declared(path)


def _read_declared(path: str) -> dict:
    import jupytext

    source = Path(path)
    cells = [c for c in jupytext.read(source).cells if PARAMETERS in c.metadata.get("tags", [])]
    if not cells:
        raise ParameterError(f"{source.name} has no cell tagged 'parameters'; add one (see notebooks/01_*.md)")
    return cell_parameters(cells[0].source)


def unknown(name: str, declared: Iterable[str], where: str) -> ParameterError:
    close = difflib.get_close_matches(name, list(declared), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return ParameterError(f"no parameter {name!r} in {where}; {hint}declared: {', '.join(sorted(declared))}")
