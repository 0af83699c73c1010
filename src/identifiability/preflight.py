"""Checks that run before any chapter executes, from the model's config and the corpus only (seconds, no
weights): the model's files, its architecture, and every chapter parameter against the model and the text.
A bad input stops here with one line that names the fix; nothing that earlier runs computed is touched.

This module holds the machinery (rules, sentence-length windows, :func:`check`); which rules each chapter
has is part of its contract (:data:`identifiability.chapters.CHAPTERS`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .adapters import adapter_for
from .corpora import Corpus, drop_unusable, load_corpus, token_lengths
from .errors import UserError
from .fingerprint import ModelNotAvailable
from .keys import resolve


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


def model_info(model: str | None) -> ModelInfo:
    """Config and tokenizer of ``model`` (a local folder is checked file by file first); no weights are read."""
    from transformers import AutoConfig, AutoTokenizer

    _, source, _ = resolve(model)
    try:
        config = AutoConfig.from_pretrained(source, trust_remote_code=False)
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False)
    except (OSError, ValueError) as e:
        raise ModelNotAvailable(f"cannot read the config or tokenizer of {model!r}: {str(e).splitlines()[0]}") from e
    adapter = adapter_for(config.model_type)
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


# A window sees the chapter's parameters and the model; it returns (min, max tokens, the parameters that set it).
Window = Callable[[dict, ModelInfo], tuple[int, int, str]]


def window(lo: str | Callable[[dict, ModelInfo], int], hi: str) -> Window:
    """A sentence-length window of a chapter: (min, max, the parameters that set it). ``lo`` names a
    parameter, or computes a fixed minimum from the model."""

    def bounds(p: dict, m: ModelInfo) -> tuple[int, int, str]:
        low = int(p[lo]) if isinstance(lo, str) else lo(p, m)
        names = f"-p {lo}=… / -p {hi}=…" if isinstance(lo, str) else f"-p {hi}=…"
        return low, min(int(p[hi]), m.max_positions), names

    return bounds


@dataclass(frozen=True)
class ChapterRules:
    """What one chapter's parameters must satisfy: rules, and sentence-length windows the corpus must have
    sentences in."""

    rules: tuple[Rule, ...] = ()
    windows: tuple[Window, ...] = ()


def check(chapters: dict[str, tuple[ChapterRules, dict]], model: str | None, corpus: str) -> None:
    """Check each chapter's parameters against the model's config and the corpus: ``{chapter stem: (its rules,
    its parameters with defaults filled in)}``. Raises PreflightError, ModelNotAvailable,
    UnsupportedArchitecture or CorpusError with one line."""
    info = model_info(model)
    text: Corpus | None = None
    lengths: list[int] = []
    for stem, (rules, params) in chapters.items():
        for rule in rules.rules:
            err = rule(params, info)
            if err:
                raise PreflightError(f"{stem}: {err}")
        for bounds in rules.windows:
            if text is None:
                text, _ = drop_unusable(load_corpus(corpus), info.tokenizer)
                lengths = token_lengths(text.sentences, info.tokenizer)
            lo, hi, names = bounds(params, info)
            if not any(lo <= n <= hi for n in lengths):
                raise PreflightError(
                    f"{stem}: no sentence of corpus {Path(corpus).name!r} has {lo} to {hi} tokens "
                    f"(its sentences have {min(lengths, default=0)} to {max(lengths, default=0)}); widen the window "
                    f"with {names}, or use another corpus"
                )
