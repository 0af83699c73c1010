"""The chapter contract: the book's chapters, and for each what it declares and how it runs.

Every chapter is one entry of :data:`CHAPTERS`, in the book's order (``_toc.yml`` lists the same):

- its source, ``notebooks/<stem>.md`` (jupytext MyST);
- its parameters, declared with their defaults in the source's cell tagged ``parameters``
  (:func:`declared_parameters`, read by :func:`identifiability.executed.cell_parameters`, the one reader of
  that cell); a given value is converted to its default's type, then checked against what the parameter
  allows (:data:`ALLOWED`: counts at least 1, seeds at least 0, a device this machine has, the choices of a
  choice parameter, length expressions that parse), or refused with one line (:class:`Parameter`,
  :func:`coerce_parameters`);
- the checks its parameters must pass against the model's config and the text before anything runs
  (``checks``, applied by :func:`identifiability.preflight.check`);
- how it runs: :func:`run_notebook` executes the source with papermill and cleans the executed notebook;
- for the sweep, its expected run time (which runs start first) and whether a sweep runs it by default;
- for the tests, the small parameters of its one real execution (``quick``).

The functions take a source path rather than a stem, so that ``identifiability run`` runs any notebook; a
source that is not a chapter of the book has no checks.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import paths, stops
from .errors import ChapterFailed, UserError
from .executed import PARAMETERS, cell_parameters, clean_executed
from .preflight import ChapterRules, ModelInfo, at_least, check, layer_head, window


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
    from .nullspace.common import parse_lengths

    try:
        return None if parse_lengths(value, d_v=64) else "gives no length"
    except ValueError as e:
        return f"is not a list of lengths: {str(e).splitlines()[0]}"


def _text(value: str) -> str | None:
    return None if value.strip() else "is empty"


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
            "n_per_quarter",
            "probes",
            "n_explorer",
            "max_offset",
        )
    },
    "max_tokens": Allowed(1, "tokens, special ones included"),
    "min_tokens": Allowed(1, "tokens, special ones included"),
    "exact_max_tokens": Allowed(1, "tokens, special ones included"),
    "n_pairs": Allowed(2, "sentence pairs for C5's middle separator (an interval)"),
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


@dataclass(frozen=True)
class ChapterSpec:
    """One chapter's entry in the contract (see the module docstring)."""

    stem: str
    checks: ChapterRules = ChapterRules()
    # Seconds a run takes on a single-threaded worker, only to choose the order in which a sweep starts its
    # runs (measured with make compare's parameters: chapter 6 150-320 s, chapters 3 and 4 40-55 s); a
    # chapter's finished runs on the same corpus replace it.
    expected_seconds: float = 60.0
    swept: bool = True  # False: a sweep runs it only when asked by name
    # The small parameters of its one real execution in the tests: the notebook tests assert on the results it
    # writes, and the book test renders the same executed notebook.
    quick: dict = field(default_factory=dict)
    # the packages that hold a module of the chapter's name (:attr:`name`): studies (its computation; the
    # result types its RESULTS lists are the chapter's results keys), charts, evidence (what each of its
    # claims' verdicts reads, built by the study) and verdicts (one entry point c<N> per claim); a chapter
    # that judges no claim has neither of the last two
    layers: tuple[str, ...] = ("studies", "charts", "evidence", "verdicts")
    # the types of parameters whose default is None ("not set"), e.g. chapter 2's layer
    optional: dict[str, type] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The chapter's one name, its stem without the number: every module of the chapter has it
        (``studies/<name>.py``, ``charts/<name>.py``, ...)."""
        return self.stem.split("_", 1)[1]

    def module(self, layer: str) -> str:
        """The dotted name of the chapter's module in ``layer`` (one of :attr:`layers`)."""
        if layer not in self.layers:
            raise KeyError(f"{self.stem} has no {layer} module; it has {', '.join(self.layers)}")
        return f"identifiability.{layer}.{self.name}"

    @property
    def source(self) -> Path:
        return paths.source_root() / "notebooks" / f"{self.stem}.md"


_SPECIAL_TOKEN = "a token besides the special ones"
# Chapters 4 and 5 sample the same sentences for their probes: min_tokens..max_tokens, each with a word.
_PROBE_RULES = (
    at_least("max_tokens", lambda p, m: int(p.get("min_tokens", 3)), "at least min_tokens"),
    at_least("min_tokens", lambda p, m: 3, _SPECIAL_TOKEN),
)
EXACT_MIN_TOKENS = 6  # chapter 6's short exact sentences: 6..exact_max_tokens tokens (its ``short``)


def _joined_lengths(p: dict, m: ModelInfo, lengths: list[int]) -> str | None:
    """Chapter 2 cuts texts of exact lengths (its example, its searched lengths, d_v + 4) from consecutive
    sentences of the corpus: the whole text must hold the longest of them."""
    from .nullspace.common import parse_lengths

    cap = min(int(p["max_tokens"]), m.max_positions)
    need = max(parse_lengths(f"{p['search_lengths']},{p['example_length']},dv+4", m.d_v, cap))
    if sum(lengths) < need:
        return (
            f"the corpus has {sum(lengths)} tokens in all, fewer than the {need} of the longest text this chapter "
            "joins from consecutive sentences; use a longer text, or shorter -p search_lengths=… / -p example_length=…"
        )
    return None


CHAPTERS: dict[str, ChapterSpec] = {
    c.stem: c
    for c in (
        ChapterSpec(
            "01_model_and_data",
            ChapterRules(
                (
                    at_least(
                        "max_tokens", lambda p, m: int(p.get("example_min_tokens", 8)), "its example sentence's minimum"
                    ),
                ),
                (window("example_min_tokens", "example_max_tokens"),),
            ),
            layers=("studies", "charts"),
            quick={"n_sentences": 40},
        ),
        ChapterSpec(
            "02_nonidentifiability",
            ChapterRules(
                (at_least("max_tokens", lambda p, m: m.d_v + 2, "inputs just past the threshold d_v + 1"), layer_head),
                (window(lambda p, m: 3, "max_tokens"),),
                (_joined_lengths,),
            ),
            optional={"layer": int},
            quick={
                "n_sentences": 3,
                "lengths": "8,dv,dv+1,dv+2,48",
                "example_length": "dv+8",
                "search_lengths": "dv+1,dv+2,dv+8",
                "search_steps": 4,
                "jacobian_max_length": "dv+2",
                "lp_rounds": 1,
            },
        ),
        ChapterSpec(
            "03_effective_attention",
            ChapterRules(
                (
                    at_least("max_tokens", lambda p, m: m.d_v + 2, "sentences longer than d_v"),
                    at_least("viewer_max_tokens", lambda p, m: m.d_v + 8, "viewer sentences a few tokens past d_v"),
                    at_least("fig1_max_length", lambda p, m: m.d_v + 2, "lengths on both sides of d_v"),
                    at_least("n_pairs", lambda p, m: 2, "sentence pairs for C5's middle separator (an interval)"),
                ),
                (window(lambda p, m: m.d_v + 1, "max_tokens"),),
            ),
            quick={
                "n_sentences": 12,
                "fig1_n_lengths": 8,
                "fig1_repeats": 2,
                "fig1_long_repeats": 2,
                "fig1_max_length": 96,
                "n_pairs": 8,
                "viewer_sentences": 1,
                "viewer_max_tokens": 40,
            },
        ),
        ChapterSpec(
            "04_token_identity",
            ChapterRules(
                _PROBE_RULES,
                (window("min_tokens", "max_tokens"), window("min_tokens", "max_tokens", corpus="second_corpus")),
                corpora=("second_corpus",),
            ),
            quick={"n_sentences": 60, "second_n_sentences": 40, "epochs": 3},
        ),
        ChapterSpec(
            "05_angle_magnitude",
            ChapterRules(_PROBE_RULES, (window("min_tokens", "max_tokens"),)),
            quick={"n_sentences": 60, "epochs": 3},
        ),
        ChapterSpec(
            "06_context_mixing",
            ChapterRules(
                (
                    at_least("max_tokens", lambda p, m: 3, _SPECIAL_TOKEN),
                    at_least("exact_max_tokens", lambda p, m: EXACT_MIN_TOKENS, "its short exact sentences"),
                ),
                (
                    window(lambda p, m: 3, "max_tokens"),
                    window(lambda p, m: EXACT_MIN_TOKENS, "exact_max_tokens"),
                    window(lambda p, m: 3, "max_tokens", corpus="second_corpus"),
                ),
                corpora=("second_corpus",),
            ),
            expected_seconds=430.0,
            quick={
                "n_per_quarter": 1,
                "n_sentences": 6,
                "n_second": 3,
                "n_exact": 2,
                "exact_max_tokens": 10,
                "max_tokens": 24,
                "n_explorer": 2,
                "use_cache": False,
            },
        ),
        # The explorer has no claims and no quantities to compare, and the comparison across models reads the
        # other runs rather than a model: a sweep runs them only when asked.
        ChapterSpec(
            "07_explore",
            ChapterRules((at_least("max_tokens", lambda p, m: 3, _SPECIAL_TOKEN),)),
            swept=False,
            layers=("studies", "charts"),
        ),
        ChapterSpec("08_across_models", ChapterRules(corpora=("judge_corpus",)), swept=False),
    )
}


def by_name(name: str) -> ChapterSpec:
    """The chapter whose one name is ``name`` (``"context_mixing"``): how modules other than this one refer to
    a chapter, so that its file stem is spelt here only."""
    for spec in CHAPTERS.values():
        if spec.name == name:
            return spec
    raise KeyError(f"no chapter named {name!r}; names: {', '.join(c.name for c in CHAPTERS.values())}")


def chapter_sources() -> list[Path]:
    """The chapters' sources, in the book's order."""
    return [c.source for c in CHAPTERS.values()]


def spec_of(source: Path) -> ChapterSpec:
    """The contract entry of ``source`` (a notebook that is not a chapter of the book gets an empty one)."""
    return CHAPTERS.get(Path(source).stem, ChapterSpec(Path(source).stem))


def find(names: Iterable[str]) -> list[ChapterSpec]:
    """The chapters ``names`` name, by stem or by number (``03``); ParameterError naming the closest chapter
    for a name that is neither."""
    out = []
    for name in names:
        hits = [c for c in CHAPTERS.values() if name in (c.stem, c.stem.split("_", 1)[0])]
        if len(hits) != 1:
            close = difflib.get_close_matches(name, list(CHAPTERS), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ParameterError(
                f"no chapter {name!r}; {hint}chapters: {', '.join(CHAPTERS)} (or their numbers, e.g. 03)"
            )
        out.append(hits[0])
    return out


def declared_parameters(source: Path) -> dict:
    """{name: default} of the notebook's cell tagged ``parameters``."""
    import jupytext

    cells = [c for c in jupytext.read(source).cells if PARAMETERS in c.metadata.get("tags", [])]
    if not cells:
        raise ParameterError(f"{source.name} has no cell tagged 'parameters'; add one (see notebooks/01_*.md)")
    return cell_parameters(cells[0].source)


def parameters(source: Path) -> dict[str, Parameter]:
    """Each parameter ``source`` declares, as a :class:`Parameter`."""
    optional = spec_of(source).optional
    return {
        name: Parameter(name, d, optional.get(name), ALLOWED.get(name, Allowed()))
        for name, d in declared_parameters(source).items()
    }


def _unknown(name: str, declared: Iterable[str], where: str) -> ParameterError:
    close = difflib.get_close_matches(name, list(declared), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return ParameterError(f"no parameter {name!r} in {where}; {hint}declared: {', '.join(sorted(declared))}")


def coerce_parameters(source: Path, given: dict, strict: bool = True) -> dict:
    """The parameters ``source`` declares, converted to the type of each default.

    Raises ParameterError with a one-line message for a value of the wrong type and, with ``strict``, for a
    name the chapter does not declare (naming the closest declared one). Without ``strict`` such names are
    left out: they belong to other chapters (papermill would insert a stray cell for them).
    """
    declared = parameters(source)
    out = {}
    for name, value in given.items():
        if name not in declared:
            if strict:
                raise _unknown(name, declared, source.stem)
            continue
        out[name] = declared[name].coerce(value, source.stem)
    return out


def check_parameters(sources: Sequence[Path], given: dict) -> None:
    """Every name in ``given`` is declared by at least one of ``sources``, and every value has its type."""
    declared: set[str] = set()
    for source in sources:
        declared |= set(declared_parameters(source))
    for name in given:
        if name not in declared:
            raise _unknown(name, declared, "any chapter of this build")
    for source in sources:
        coerce_parameters(source, given, strict=False)


def preflight(sources: Sequence[Path], params: dict) -> None:
    """Check every chapter's parameters (with its defaults) against the model's config and the corpus before
    anything runs (:func:`identifiability.preflight.check`, with each chapter's ``checks``)."""
    chapters = {
        s.stem: (spec_of(s).checks, {**declared_parameters(s), **coerce_parameters(s, params, strict=False)})
        for s in sources
    }
    check(chapters, params.get("model"), params.get("corpus", paths.DEFAULT_CORPUS))


def run_notebook(source: Path, out_dir: Path, parameters: dict, progress: bool = True, strict: bool = True) -> Path:
    """Execute one jupytext notebook with papermill; returns the executed .ipynb path, cleaned
    (:func:`identifiability.executed.clean_executed`: one parameters cell with the values used, no stderr).

    The kernel runs in the checkout and inherits this process's data folder (``IDENTIFIABILITY_DATA``), so a
    chapter files its results where this command looks for them.
    """
    import jupytext
    import papermill

    params = coerce_parameters(source, parameters, strict)
    os.environ.setdefault(paths.DATA_ENV, str(paths.data_root()))
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{source.stem}.ipynb"
    nb = jupytext.read(source)
    # a hidden file until the chapter ends; Ctrl-C or a dead kernel leave the previous notebook (identifiability.stops)
    with stops.executing(source, target, {**declared_parameters(source), **params}) as partial:
        try:
            papermill.execute_notebook(
                nb,
                str(partial),
                parameters=params,
                kernel_name="python3",
                progress_bar=progress,
                cwd=str(paths.source_root()),
                **stops.KERNEL_OPTIONS,
            )
        except papermill.PapermillExecutionError as e:
            last = (str(e.evalue).strip().splitlines() or [""])[-1]
            raise ChapterFailed(f"{source.stem} stopped: {e.ename}: {last} (full traceback in {target})") from None
        clean_executed(partial)
    return target
