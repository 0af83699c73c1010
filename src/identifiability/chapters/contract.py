"""The chapter contract: the book's chapters, and for each what it declares and how it runs.

Every chapter is one entry of :data:`CHAPTERS`, in the book's order (``_toc.yml`` lists the same):

- its stem (the source ``notebooks/<stem>.md``, jupytext MyST) and its one name, the stem without its
  number, which every module of the chapter carries (``studies/<name>.py``, ``charts/<name>.py``, ...;
  :attr:`ChapterSpec.layers`); other modules name a chapter by :func:`by_name`, never by its stem;
- its parameters, declared with their defaults in the source's cell tagged ``parameters``, typed and checked
  by :mod:`identifiability.chapters.parameters` (:func:`coerce_parameters`);
- the checks its parameters must pass against the model's config and the text before anything runs
  (``checks``, applied by :func:`identifiability.chapters.preflight.check`);
- how it runs is :mod:`identifiability.chapters.execution` (papermill, a hidden notebook until the chapter ends);
- for the sweep, its expected run time (which runs start first) and whether a sweep runs it by default;
- for the tests, the small parameters of its one real execution (``quick``).

The functions take a source path rather than a stem, so that ``identifiability run`` runs any notebook; a
source that is not a chapter of the book has no checks.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..base import paths
from .executed import PARAMETERS
from .parameters import ALLOWED, Allowed, Parameter, ParameterError, declared_parameters, unknown
from .preflight import ChapterRules, Count, ModelInfo, at_least, check, layer_head, too_many, window

if TYPE_CHECKING:
    from ..models.keys import ModelRef

# What other modules need a chapter for, named by that need, never by the chapter's name (a chapter's roles,
# :attr:`ChapterSpec.roles`; :func:`by_role` finds the one chapter of a role):
CONTROL_RUNS = "control runs"  # the book makes the random-initialisation control's runs before it
CORPUS_HTA = "corpus HTA"  # its parameters are the defaults of exact HTA at corpus scale (identifiability hta)
MEASURES = "measures"  # make measures records it
ON_FAMILY = "on the family"  # make family judges its claims on every member of the family
HEAD_WIDTH = "head width"  # make family runs it on the pre-trained members and records it (C19-C21)
# the chapters whose results the comparison across models reads (identifiability.runs.model_comparison)
COMPARED_ATTENTION = "compared: effective attention"
COMPARED_IDENTITY = "compared: token identity"
COMPARED_HTA = "compared: HTA"
ROLES = (
    CONTROL_RUNS,
    CORPUS_HTA,
    MEASURES,
    ON_FAMILY,
    HEAD_WIDTH,
    COMPARED_ATTENTION,
    COMPARED_IDENTITY,
    COMPARED_HTA,
)


@dataclass(frozen=True)
class ChapterSpec:
    """One chapter's entry in the contract (see the module docstring)."""

    stem: str
    checks: ChapterRules = ChapterRules()
    # Seconds a run takes on a single-threaded worker with make compare's parameters, an estimate used only to
    # choose the order in which a sweep starts its runs; a chapter's finished runs on the same corpus replace it.
    expected_seconds: float = 60.0
    swept: bool = True  # False: a sweep runs it only when asked by name
    # Seconds it takes in `make book` on one thread at the book's parameters, an estimate used only to choose the
    # order in which the book starts its chapters (identifiability.book.build); a build's teachers' page shows the
    # times it measured.
    book_seconds: float = 30.0
    # The chapters whose results or cache it reads (their stems): the book starts it after they end.
    reads: tuple[str, ...] = ()
    # The small parameters of its one real execution in the tests: the notebook tests assert on the results it
    # writes, and the book test renders the same executed notebook.
    quick: dict = field(default_factory=dict)
    # the packages that hold a module of the chapter's name (:attr:`name`): studies (its computation; the
    # result types its RESULTS lists are the chapter's results keys), charts (its Altair charts), text (its
    # sentences and tables), evidence (what each of its claims' verdicts reads, built by the study) and
    # verdicts (one entry point c<N> per claim); a chapter that judges no claim has neither of the last two,
    # one that states nothing in generated text no text module
    layers: tuple[str, ...] = ("studies", "charts", "text", "evidence", "verdicts")
    # the types of parameters whose default is None ("not set"), e.g. chapter 2's layer
    optional: dict[str, type] = field(default_factory=dict)
    # what other modules need it for (:data:`ROLES`)
    roles: frozenset[str] = frozenset()
    # its parameters on the confirmation text (make confirm), None: not confirmed there
    confirm: dict | None = None

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
    at_least("twin_sentences", lambda p, m: 20, "the untrained twin's test split, 15% of them, needs 3 sentences"),
)
EXACT_MIN_TOKENS = 6  # chapter 6's short exact sentences: 6..exact_max_tokens tokens (its ``short``)


def _joined_lengths(p: dict, m: ModelInfo, lengths: list[int]) -> str | None:
    """Chapter 2 cuts texts of exact lengths (its survey's, its example, its searched lengths, d_v + 4) from
    consecutive sentences of the corpus: the whole text must hold the longest of them."""
    from ..nullspace.common import parse_lengths

    cap = min(int(p["max_tokens"]), m.max_positions)
    need = max(parse_lengths(f"{p['lengths']},{p['search_lengths']},{p['example_length']},dv+4", m.d_v, cap))
    if sum(lengths) < need:
        return (
            f"the corpus has {sum(lengths)} tokens in all, fewer than the {need} of the longest text this chapter "
            "joins from consecutive sentences; use a longer text, or shorter -p lengths=… / -p search_lengths=… / "
            "-p example_length=…"
        )
    return None


MEASURES_MIN_TOKENS = 6  # chapter 10's short sentences: 6..max_tokens tokens (its study's ``sentences``)


def ratios_fit(p: dict, m: ModelInfo) -> str | None:
    """Chapter 7 cuts inputs of d_s = round(r d_v) tokens for each ratio r on every member, up to the trained
    positions, and needs an input on each: at least one ratio must give every member's head width 3 tokens
    (one besides the special ones) to the family's positions."""
    from ..pretrain.family import MEMBERS, POSITIONS

    ratios = [float(x) for x in str(p["ratios"]).split(",") if x.strip()]
    widths = sorted({member.d_v for member in MEMBERS})
    lo, hi = 3 / widths[0], POSITIONS / widths[-1]
    if any(all(3 <= round(r * d_v) <= POSITIONS for d_v in widths) for r in ratios):
        return None
    return (
        f"ratios={p['ratios']} gives some member no input: d_s = ratio x d_v must lie between 3 and the family's "
        f"{POSITIONS} positions for d_v {', '.join(map(str, widths))}; pass at least one ratio from {lo:g} to "
        f"{hi:g}, e.g. -p ratios=0.5,1,2"
    )


def family_members(p: dict, m: ModelInfo) -> str | None:
    """Each folder ``members`` names (chapter 7; empty: the family's in data/models) is a member of the family
    or its untrained twin, as ``identifiability pretrain`` saves them (its ``provenance.json`` says which)."""
    import json

    how = "pass folders identifiability pretrain made (data/models/mlm-*), or -p members= for those in data/models"
    for name in (x.strip() for x in str(p.get("members", "")).split(",") if x.strip()):
        folder = Path(name)
        if not folder.is_dir():
            return f"members: {name} {'is not a folder' if folder.exists() else 'does not exist'}: {how}"
        try:
            kind = json.loads((folder / "provenance.json").read_text(encoding="utf-8")).get("kind")
        except (OSError, ValueError, AttributeError):
            kind = None
        if kind not in ("pretrained-mlm", "random-init twin"):
            return f"members: {name} is not a member of the family (its provenance.json names none): {how}"
    return None


def enough_sentences(p: dict, m: ModelInfo, lengths: list[int]) -> str | None:
    """Chapter 10's ``short`` sample scores ``n_sentences`` distinct sentences of 6 to max_tokens tokens: more
    than the corpus holds there would be computed as fewer, after a long wait; refused, naming how many. (Its
    ``proportional`` sample draws with replacement; ``record-measures`` checks its size.)"""
    if p.get("sample") == "proportional":
        return None
    n, where = int(p["n_sentences"]), Path(str(p.get("corpus", ""))).name
    hi = min(int(p["max_tokens"]), m.max_positions)
    have = sum(MEASURES_MIN_TOKENS <= k <= hi for k in lengths)
    if not have:
        return (
            f"no sentence of corpus {where!r} has {MEASURES_MIN_TOKENS} to {hi} tokens: widen with "
            "-p max_tokens=…, or use another corpus"
        )
    return too_many("n_sentences", n, have, where, f"with {MEASURES_MIN_TOKENS} to {hi} tokens")


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
                counts=(Count("n_sentences"),),
            ),
            layers=("studies", "charts", "text"),
            quick={"n_sentences": 40},
            book_seconds=7.0,
        ),
        ChapterSpec(
            "02_nonidentifiability",
            ChapterRules(
                (at_least("max_tokens", lambda p, m: m.d_v + 2, "inputs just past the threshold d_v + 1"), layer_head),
                (window(lambda p, m: 3, "max_tokens"),),
                (_joined_lengths,),
                counts=(Count("n_sentences"),),
            ),
            optional={"layer": int},
            book_seconds=53.0,
            roles=frozenset({ON_FAMILY}),
            confirm={},
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
                counts=(Count("n_sentences"),),  # texts of the corpus's sentences, joined where too few are long
            ),
            quick={
                "n_sentences": 12,
                "fig1_n_lengths": 8,
                "fig1_repeats": 2,
                "fig1_long_repeats": 2,
                "fig1_max_length": 96,
                "n_pairs": 8,
                "twin_sentences": 8,
                "viewer_sentences": 1,
                "viewer_max_tokens": 40,
            },
            book_seconds=48.0,
            roles=frozenset({ON_FAMILY, COMPARED_ATTENTION}),
            # lee_test's sentences longer than d_v + 2 tokens (its attention mass)
            confirm={"n_sentences": 70},
        ),
        ChapterSpec(
            "04_token_identity",
            ChapterRules(
                _PROBE_RULES,
                (window("min_tokens", "max_tokens"), window("min_tokens", "max_tokens", corpus="second_corpus")),
                corpora=("second_corpus",),
                counts=(Count("n_sentences"), Count("second_n_sentences", "second_corpus")),
            ),
            quick={"n_sentences": 60, "second_n_sentences": 40, "epochs": 3, "twin_sentences": 30, "twin_epochs": 2},
            book_seconds=320.0,
            roles=frozenset({ON_FAMILY, COMPARED_IDENTITY}),
            confirm={"n_sentences": 148, "second_corpus": ""},
        ),
        ChapterSpec(
            "05_angle_magnitude",
            ChapterRules(_PROBE_RULES, (window("min_tokens", "max_tokens"),), counts=(Count("n_sentences"),)),
            quick={"n_sentences": 60, "epochs": 3, "twin_sentences": 30, "twin_epochs": 2},
            book_seconds=110.0,
            reads=("04_token_identity",),  # its probes and hidden states, from chapter 4's cache
            roles=frozenset({ON_FAMILY}),
            confirm={"n_sentences": 148},
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
                counts=(Count("n_sentences"), Count("n_exact"), Count("n_second", "second_corpus")),
            ),
            expected_seconds=430.0,
            book_seconds=440.0,
            quick={
                "n_live": 1,
                "twin_sentences": 3,
                "n_sentences": 6,
                "n_second": 3,
                "n_exact": 2,
                "exact_max_tokens": 10,
                "max_tokens": 24,
                "n_explorer": 2,
                "use_cache": False,
            },
            roles=frozenset({ON_FAMILY, CORPUS_HTA, COMPARED_HTA}),
            confirm={"second_corpus": ""},
        ),
        # The explorer has no claims and no quantities to compare, and the comparison across models reads the
        # other runs rather than a model: a sweep runs them only when asked.
        ChapterSpec(
            "07_head_width",
            ChapterRules((ratios_fit, family_members)),
            expected_seconds=600.0,
            swept=False,
            quick={"n_sources": 3, "ratios": "1,1.25,2"},
            roles=frozenset({HEAD_WIDTH}),
            book_seconds=8.0,
        ),
        ChapterSpec(
            "08_explore",
            ChapterRules((at_least("max_tokens", lambda p, m: 3, _SPECIAL_TOKEN),)),
            swept=False,
            layers=("studies", "charts"),
            book_seconds=13.0,
        ),
        ChapterSpec(
            "09_across_models",
            ChapterRules(corpora=("judge_corpus",)),
            swept=False,
            book_seconds=8.0,
            roles=frozenset({CONTROL_RUNS}),
            # the results table of every finished run, the book's own chapters 1 to 8 among them (and chapter
            # 4's control runs, which the book makes before it: identifiability.book.build)
            reads=(
                "01_model_and_data",
                "02_nonidentifiability",
                "03_effective_attention",
                "04_token_identity",
                "05_angle_magnitude",
                "06_context_mixing",
                "07_head_width",
                "08_explore",
            ),
        ),
        ChapterSpec(
            "10_measures",
            ChapterRules(
                (at_least("max_tokens", lambda p, m: MEASURES_MIN_TOKENS, "sentences of at least 6 tokens"),),
                text=(enough_sentences,),
            ),
            expected_seconds=120.0,
            book_seconds=50.0,
            # chapter 6's exact HTA in the cache, reused where the two chapters' sentences meet (its proportional
            # sample is C10's draw)
            reads=("06_context_mixing",),
            quick={"n_sentences": 2, "max_tokens": 10},
            roles=frozenset({MEASURES}),
        ),
    )
}


# Stems chapters had in earlier builds, {old stem: its stem now}: inserting the head-width chapter
# (07_head_width) after chapter 6 moved the explorer and the comparison across models one place on. A
# reader's data folder from an older build still holds results files under the old stems, and whatever reads
# results by stem across builds (``identifiability compare``, the results table, a build's claims and run
# pages) reads them under the stem of now, through :func:`current_stem` and :func:`results_file`. A new
# stem is never an old one, so one look-up suffices.
RENAMED: dict[str, str] = {"07_explore": "08_explore", "08_across_models": "09_across_models"}


def current_stem(stem: str) -> str:
    """The stem a chapter has now that had ``stem`` in an earlier build (:data:`RENAMED`); any other unchanged."""
    return RENAMED.get(stem, stem)


def superseded(path: Path) -> bool:
    """Whether ``path`` is a results file under an old stem (``<old stem>.json``) beside one under the
    chapter's stem of now: the newer build's file is the one to read, the old one is left out."""
    stem = Path(path).stem
    return stem in RENAMED and Path(path).with_name(f"{RENAMED[stem]}{Path(path).suffix}").is_file()


def results_file(folder: str | Path, stem: str) -> Path:
    """``folder/<stem>.json``; where that file does not exist but one under an earlier stem of the same chapter
    does (a data folder from an older build, :data:`RENAMED`), that one."""
    path = Path(folder) / f"{stem}.json"
    if not path.is_file():
        for old, new in RENAMED.items():
            if new == stem and (Path(folder) / f"{old}.json").is_file():
                return Path(folder) / f"{old}.json"
    return path


def by_role(role: str) -> ChapterSpec:
    """The one chapter of ``role`` (one of :data:`ROLES`)."""
    found = [c for c in CHAPTERS.values() if role in c.roles]
    if len(found) != 1:
        raise KeyError(f"{len(found)} chapters have the role {role!r}; the contract gives it to exactly one")
    return found[0]


def with_role(role: str) -> list[ChapterSpec]:
    """The chapters of ``role`` (one of :data:`ROLES`), in the book's order."""
    return [c for c in CHAPTERS.values() if role in c.roles]


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


def check_source(source: Path) -> None:
    """ParameterError naming the chapters when ``source`` is not a notebook ``identifiability run`` can
    execute: a file jupytext reads, with a cell tagged ``parameters``. Any such notebook runs, a chapter of
    the book or not (a copy of one, a notebook of a reader's own)."""
    import jupytext

    if not source.exists():
        why = "does not exist"
    elif source.is_dir():
        why = "is a folder, not a notebook"
    else:
        try:
            cells = jupytext.read(source).cells
        except (OSError, ValueError):  # jupytext's format errors are ValueErrors, as a bad encoding is
            why = "is not a notebook"
        else:
            if any(PARAMETERS in c.metadata.get("tags", []) for c in cells):
                return
            why = "is not a chapter notebook (no cell tagged 'parameters')"
    raise ParameterError(f"{source} {why}: run a chapter, notebooks/<chapter>.md, one of {', '.join(CHAPTERS)}")


def parameters(source: Path) -> dict[str, Parameter]:
    """Each parameter ``source`` declares, as a :class:`Parameter`."""
    optional = spec_of(source).optional
    return {
        name: Parameter(name, d, optional.get(name), ALLOWED.get(name, Allowed()))
        for name, d in declared_parameters(source).items()
    }


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
                raise unknown(name, declared, source.stem)
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
            raise unknown(name, declared, "any chapter of this build")
    for source in sources:
        coerce_parameters(source, given, strict=False)


def preflight(
    sources: Sequence[Path], params: dict, scoped: dict[str, dict] | None = None, model: ModelRef | None = None
) -> None:
    """Check every chapter's parameters (with its defaults) against the model's config and the corpus before
    anything runs (:func:`identifiability.chapters.preflight.check`, with each chapter's ``checks``); ``scoped``:
    {stem: parameters of that chapter alone}, which win over ``params`` (a sweep's ``03:name=value``); ``model``:
    ``params["model"]`` as the command resolved it (else the name is resolved here)."""
    scoped = scoped or {}
    declared = {s.stem: declared_parameters(s) for s in sources}
    chapters = {
        s.stem: (
            spec_of(s).checks,
            {
                **declared[s.stem],
                **coerce_parameters(s, params, strict=False),
                **coerce_parameters(s, scoped.get(s.stem, {}), strict=False),
            },
        )
        for s in sources
    }
    check(
        chapters, params.get("model") if model is None else model, params.get("corpus", paths.DEFAULT_CORPUS), declared
    )
