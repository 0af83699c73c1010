"""Checks that run before any chapter executes, from the model's config and the corpus only (seconds, no
weights): the model's files, its architecture, every chapter parameter against the model and the text, and
last that each folder a chapter writes to takes a file (a ``results_dir`` given, the data folder:
:func:`check_writable`).
A bad input stops here with one line that names the fix; nothing that earlier runs computed is touched.

This module holds the machinery (rules, sentence-length windows, :func:`check`); which rules each chapter
has is part of its contract (:data:`identifiability.chapters.contract.CHAPTERS`).
"""

from __future__ import annotations

import errno
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..base import paths
from ..base.errors import UserError, one_line
from ..base.fileio import atomic_write
from ..corpus.corpora import CorpusError, drop_unusable, load_corpus, token_lengths
from ..models.adapters import adapter_for
from ..models.fingerprint import ModelNotAvailable, check_encoder_tensors
from ..models.keys import ModelRef, model_ref, read_config


class PreflightError(UserError, ValueError):
    """A parameter or input that cannot work; the message is one line that says what to pass instead."""


@dataclass(frozen=True)
class ModelInfo:
    """What the checks need to know of a model, read from its config (and its tokenizer for the corpus)."""

    n_layers: int
    n_heads: int
    d_v: int
    max_positions: int
    tokenizer: object


def model_info(model: str | None | ModelRef) -> ModelInfo:
    """Config and tokenizer of ``model`` (a name, or one resolved already; a local folder is checked file by
    file first, and its weights' tensor names against its config); no weights are read."""
    from transformers import AutoTokenizer

    ref = model_ref(model)
    source = ref.source
    config = read_config(ref.name, source)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False)
    except (OSError, ValueError) as e:
        raise ModelNotAvailable(f"cannot read the tokenizer of {ref.name!r}: {one_line(e)}") from e
    adapter = adapter_for(config.model_type)
    if Path(source).is_dir():  # a hub id's weights are checked by loading them, in the chapter
        check_encoder_tensors(Path(source), config)
    n_heads = int(config.num_attention_heads)
    return ModelInfo(
        int(config.num_hidden_layers),
        n_heads,
        int(config.hidden_size) // n_heads,
        adapter.max_positions(config),
        tokenizer,
    )


def middle_layer(n_layers: int) -> int:
    """The default layer of chapters that show one layer: the middle one, ⌈L/2⌉ in the book's 1..L."""
    return math.ceil(n_layers / 2)


# A rule sees the chapter's parameters and the model; it returns an error (one line) or None.
Rule = Callable[[dict, ModelInfo], "str | None"]


def at_least(name: str, minimum: Callable[[dict, ModelInfo], int], why: str) -> Rule:
    """A rule: parameter ``name`` is at least ``minimum(parameters, model)`` (``why`` says what needs it)."""

    def rule(p: dict, m: ModelInfo) -> str | None:
        need = minimum(p, m)
        if name in p and int(p[name]) < need:
            return f"{name}={p[name]} is too small: this chapter needs at least {need} ({why}); pass -p {name}={need}"
        return None

    return rule


def layer_head(p: dict, m: ModelInfo) -> str | None:
    """A rule: ``layer`` (1..L; None, not set: the middle one) and ``head`` are a layer and a head of the model."""
    layer, head = p.get("layer"), int(p.get("head", 0))
    if layer is not None and not 1 <= int(layer) <= m.n_layers:
        return (
            f"layer={layer} is not a layer with attention in this model: use 1..{m.n_layers} (0 is the embeddings; "
            f"leave it unset for the middle layer), e.g. -p layer={middle_layer(m.n_layers)}"
        )
    if not 0 <= head < m.n_heads:
        return f"head={head} is not a head of this model: use 0..{m.n_heads - 1}, e.g. -p head=0"
    return None


@dataclass(frozen=True)
class Window:
    """A sentence-length window a chapter samples sentences in: ``lo`` names a parameter or computes a
    minimum from the model, ``hi`` names a parameter (clipped to the model's positions); ``corpus`` names the
    parameter of another corpus sampled in the same window (None: the run's corpus); ``hint`` says how to
    widen it (default: ``-p lo=… / -p hi=…``)."""

    lo: str | Callable[[dict, ModelInfo], int]
    hi: str
    corpus: str | None = None
    hint: str | None = None

    def bounds(self, p: dict, m: ModelInfo) -> tuple[int, int, str]:
        """(min, max tokens, how to widen the window)."""
        low = int(p[self.lo]) if isinstance(self.lo, str) else self.lo(p, m)
        names = f"-p {self.lo}=… / -p {self.hi}=…" if isinstance(self.lo, str) else f"-p {self.hi}=…"
        return low, min(int(p[self.hi]), m.max_positions), self.hint or names


def window(
    lo: str | Callable[[dict, ModelInfo], int], hi: str, corpus: str | None = None, hint: str | None = None
) -> Window:
    """A sentence-length window of a chapter (see :class:`Window`)."""
    return Window(lo, hi, corpus, hint)


def too_many(count: str, n: int, have: int, corpus: str | Path, where: str) -> str | None:
    """The one line that refuses ``n`` sentences (parameter ``count``, or an option spelt ``--n``) where corpus
    ``corpus`` holds ``have`` (``where`` says which of its sentences, e.g. "with 3 to 64 tokens"), naming the
    most it holds; None when it holds them. A sample of more would be computed as fewer, after a long wait."""
    if n <= have:
        return None
    shown, fix = (
        (f"{count} {n}", f"{count} {have}") if count.startswith("--") else (f"{count}={n}", f"-p {count}={have}")
    )
    return f"{shown} is more than the {have} sentences of corpus {Path(corpus).name!r} {where}: pass {fix} or fewer"


@dataclass(frozen=True)
class Count:
    """A parameter ``name`` that says how many sentences a chapter samples from a corpus (``corpus`` names the
    parameter of another corpus; None: the run's corpus): a count asked for is at most the lines that corpus
    holds in all (:func:`too_many`). A sample takes what its sentence-length window holds where that is fewer,
    by design (``make compare``'s models and ``make confirm``'s lee_test rely on it), and a chapter's default
    is its "up to" on any text (``make book`` on a short one)."""

    name: str
    corpus: str | None = None


# A text rule sees the parameters, the model and the token counts of the run's corpus (special tokens
# included, lines of only special or unknown tokens left out); it returns an error (one line) or None.
TextRule = Callable[[dict, ModelInfo, list[int]], "str | None"]


@dataclass(frozen=True)
class ChapterRules:
    """What one chapter's parameters must satisfy: rules, sentence-length windows the corpus (or another
    corpus the chapter names) must have sentences in, rules on the whole text, the parameters that name
    further corpora (each must load), and the sentence counts the corpora must hold (:class:`Count`)."""

    rules: tuple[Rule, ...] = ()
    windows: tuple[Window, ...] = ()
    text: tuple[TextRule, ...] = ()
    corpora: tuple[str, ...] = ()
    counts: tuple[Count, ...] = ()


@dataclass
class _Texts:
    """Corpora read once per check: name -> (token counts, lines left out)."""

    tokenizer: object
    loaded: dict[str, tuple[list[int], int]]

    def lengths(self, name: str, stem: str, param: str | None) -> list[int]:
        """Token counts of corpus ``name`` (named by parameter ``param`` of chapter ``stem``; None: the run's
        corpus); PreflightError when no line is left once lines of only special or unknown tokens are out."""
        if name not in self.loaded:
            try:
                text, dropped = drop_unusable(load_corpus(name), self.tokenizer)
            except CorpusError as e:
                if param is None:
                    raise
                raise PreflightError(f"{stem}: {param}={name!r}: {one_line(e)}") from None
            self.loaded[name] = (token_lengths(text.sentences, self.tokenizer), dropped)
        lengths, dropped = self.loaded[name]
        if not lengths:
            raise PreflightError(
                f"{stem}: corpus {Path(name).name!r}: {dropped} lines are only special or unknown tokens: "
                "check the tokenizer or the text"
            )
        return lengths

    def dropped(self, name: str) -> str:
        n = self.loaded[name][1]
        return f"; {n} lines of only special or unknown tokens left out" if n else ""


def check_writable(folder: Path, what: str, instead: str) -> None:
    """PreflightError naming ``folder`` (``what`` it is, e.g. "the data folder") when a file cannot be written
    there (read-only, full, a file, or below one): what writes there would otherwise fail only at its end,
    naming a hidden temporary file. A probe is written the way results are (:func:`atomic_write`) and
    removed; the folder is made if it is missing. ``instead`` ends the line: where else to write."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise PreflightError(f"{what} {folder} is a file, not a folder: {instead}")
    probe = folder / f".write-check-{os.getpid()}"
    try:
        atomic_write(probe, lambda p: p.write_bytes(b"probe"))
        probe.unlink()
    except OSError as e:
        fix = "free space there" if e.errno in (errno.ENOSPC, errno.EDQUOT) else "make it writable"
        raise PreflightError(
            f"{what} {folder} cannot be written ({e.strerror or type(e).__name__}): {fix}, or {instead}"
        ) from None


def check_data_folder() -> None:
    """PreflightError naming the data folder when a file cannot be written there (:func:`check_writable`):
    the chapters write their results and caches there."""
    check_writable(paths.data_root(), "the data folder", f"set {paths.DATA_ENV} to a folder that can be")


def check(
    chapters: dict[str, tuple[ChapterRules, dict]],
    model: str | None | ModelRef,
    corpus: str,
    defaults: dict[str, dict] | None = None,
) -> None:
    """Check each chapter's parameters against the model's config and the corpus: ``{chapter stem: (its rules,
    its parameters with defaults filled in)}``, then the data folder (:func:`check_data_folder`, last: a check
    that fails before it makes no folder). ``defaults``: {stem: its declared parameters}, a sentence count at
    its default is not checked (:class:`Count`). The corpus is read (and tokenised) once, whichever chapters run.
    Raises PreflightError, ModelNotAvailable, UnsupportedArchitecture or CorpusError with one line."""
    info = model_info(model)
    texts = _Texts(info.tokenizer, {})
    for stem, (rules, params) in chapters.items():
        for rule in rules.rules:
            err = rule(params, info)
            if err:
                raise PreflightError(f"{stem}: {err}")
        lengths = texts.lengths(corpus, stem, None)
        for name in rules.corpora:
            if params.get(name):
                texts.lengths(str(params[name]), stem, name)
        for w in rules.windows:
            other = str(params.get(w.corpus) or "") if w.corpus else corpus
            if not other:
                continue  # that corpus is not used ("")
            have = texts.lengths(other, stem, w.corpus)
            lo, hi, names = w.bounds(params, info)
            fix = f"widen the window with {names}"
            if hi == info.max_positions and min(have) > hi:  # no window helps: the lines are too long to read
                fix = f"put one sentence per line (the model reads at most {hi} tokens)"
            if not any(lo <= n <= hi for n in have):
                raise PreflightError(
                    f"{stem}: no sentence of corpus {Path(other).name!r} has {lo} to {hi} tokens (its sentences "
                    f"have {min(have)} to {max(have)}{texts.dropped(other)}); {fix}, or use another corpus"
                )
        for c in rules.counts:
            name = str(params.get(c.corpus) or "") if c.corpus else corpus
            asked = params.get(c.name)
            if name and asked is not None and asked != (defaults or {}).get(stem, {}).get(c.name):
                have = len(texts.lengths(name, stem, c.corpus))
                err = too_many(c.name, int(asked), have, name, "in all")
                if err:
                    raise PreflightError(f"{stem}: {err}")
        for rule in rules.text:
            err = rule(params, info, lengths)
            if err:
                raise PreflightError(f"{stem}: {err}")
    for stem, (_, params) in chapters.items():
        if str(params.get("results_dir") or "").strip():  # a chapter's own results folder ("": the data folder's)
            where = Path(params["results_dir"])
            where = where if where.is_absolute() else paths.source_root() / where  # the kernel runs there
            check_writable(where, f"{stem}: results_dir", "pass -p results_dir= for the data folder's")
    check_data_folder()
