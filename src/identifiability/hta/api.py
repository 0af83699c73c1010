"""The entry points: :func:`hta` for one sentence (it picks the engine) and :func:`hta_corpus` for many,
with an optional cache of the squared norms S on disk."""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
from tqdm import tqdm

from ..models.loaded_model import LoadedModel
from ..models.trace import SentenceTrace
from .core import Directions, prepare
from .folded import fold_spec, folded_S
from .generic import generic_S
from .naive import hta_naive
from .result import HTAResult


def available_method(lm: LoadedModel) -> str:
    """The engine :func:`hta` picks for ``lm`` with ``method="auto"``: "folded" or "generic"."""
    return "folded" if fold_spec(lm) is not None else "generic"


def hta(
    lm: LoadedModel,
    trace_or_text: str | SentenceTrace,
    mode: str = "exact",
    probes: int = 16,
    chunk: int | None = None,
    method: str = "auto",
    probe: str = "orthonormal",
    seed: int = 0,
    max_tokens: int | None = None,
) -> HTAResult:
    """Hidden Token Attribution of one sentence, all layers at once.

    Args:
        lm: the model.
        trace_or_text: a sentence, or a :class:`SentenceTrace` (its token ids are used).
        mode: "exact" (all d_s·d input directions) or "estimate" (``probes`` random directions per token).
        probes: probes per input token in estimate mode (error falls as 1/√probes).
        chunk: tangent directions per batch (default: about 8,192 / d_s); bounds the working memory.
        method: "auto" (the folded pass where it applies, else generic), "folded", "generic" or "naive".
        probe: "orthonormal" (default, lower variance) or "gaussian".
        seed: seed of the random probes.
        max_tokens: truncation limit for text input.
    Returns:
        An :class:`HTAResult`; ``.c`` is (L+1, d_s, d_s) with rows summing to 1, ``.norms`` the raw norms.
    """
    if mode not in ("exact", "estimate"):
        raise ValueError(f"mode must be 'exact' or 'estimate', got {mode!r}")
    if method not in ("auto", "folded", "generic", "naive"):
        raise ValueError(f"method must be auto, folded, generic or naive, got {method!r}")
    if method == "naive":
        if mode != "exact":
            raise ValueError("the naive reference is exact only")
        return hta_naive(lm, trace_or_text, max_tokens)
    t0 = time.perf_counter()
    inp = prepare(lm, trace_or_text, max_tokens)
    dirs = Directions(inp.x.shape[0], inp.x.shape[1], None if mode == "exact" else probes, probe, seed)
    S, used = None, "generic"
    if method in ("auto", "folded"):
        spec = fold_spec(lm)
        if spec is None and method == "folded":
            raise ValueError(f"the folded pass does not apply to {lm.name} ({lm.adapter.family}); use method='auto'")
        if spec is not None:
            S = folded_S(lm, inp, dirs, chunk, spec)
            used = "folded"
    if S is None:
        S, used = generic_S(lm, inp, dirs, chunk), "generic"
    return HTAResult(inp.text, inp.tokens, S, used, mode, dirs.probes, time.perf_counter() - t0, inp.special)


CACHE_VERSION = 2  # bump when a change alters the numbers, so stale caches are never read (2: one entry per sentence)


def cache_params(content_key: str, text: str, mode: str = "exact", seed: int = 0, probes: int = 16, **kwargs) -> dict:
    """Everything one sentence's cached S depends on: the model's weights, the text and every parameter
    that changes the numbers (the probes and their seed only in estimate mode). Chapter 6 and the
    distributed ``identifiability hta`` job use it alike, so either one's entries serve the other."""
    estimate = mode == "estimate"
    return {
        "version": CACHE_VERSION,
        "model": content_key,  # LoadedModel.content_key: the weights, not the name
        "text": text,
        "mode": mode,
        "seed": seed if estimate else None,
        "probes": probes if estimate else None,
        "probe": kwargs.get("probe", "orthonormal") if estimate else None,
        "max_tokens": kwargs.get("max_tokens"),
        "method": kwargs.get("method", "auto"),
    }


def cache_folder(model_key: str) -> str:
    """The folder below ``data/cache`` of a model's HTA entries (``model_key``: LoadedModel.key)."""
    return f"hta/{model_key}"


def hta_corpus(
    lm: LoadedModel,
    texts: Sequence[str | SentenceTrace],
    mode: str = "exact",
    probes: int = 16,
    progress: bool = True,
    desc: str | None = None,
    cache: bool = False,
    seed: int = 0,
    cache_root=None,
    **kwargs,
) -> list[HTAResult]:
    """:func:`hta` for many sentences, with a progress bar; sentence k uses probe seed ``seed + k``.

    With ``cache=True`` each sentence's squared norms are stored as safetensors under
    ``data/cache/hta/<model>/``, keyed by :func:`cache_params` (weights, text, parameters): a sentence
    computed once, by a chapter or by the distributed job, is never computed again.
    """
    from ..base.results import cached_tensors  # noqa: I001 (results imports torch only)

    items = list(texts)
    bar = tqdm(items, desc=desc or f"HTA ({mode})", unit="sentence", disable=not progress or len(items) < 2)
    out = []
    special_ids = set(lm.tokenizer.all_special_ids)
    for k, item in enumerate(bar):
        if not cache:
            out.append(hta(lm, item, mode=mode, probes=probes, seed=seed + k, **kwargs))
            continue
        text = item.text if isinstance(item, SentenceTrace) else item
        fresh: list[HTAResult] = []

        def pack(item=item, k=k, fresh=fresh) -> dict[str, torch.Tensor]:
            r = hta(lm, item, mode=mode, probes=probes, seed=seed + k, **kwargs)
            fresh.append(r)
            return {
                "S": r.S,
                "ids": torch.tensor(lm.tokenizer.convert_tokens_to_ids(r.tokens), dtype=torch.long),
                "seconds": torch.tensor([r.seconds], dtype=torch.float64),
                "method": torch.tensor([_METHODS.index(r.method)]),
            }

        params = cache_params(lm.content_key, text, mode, seed + k, probes, **kwargs)
        t = cached_tensors(cache_folder(lm.key), params, pack, **({"root": cache_root} if cache_root else {}))
        if fresh:
            out.append(fresh[0])
            continue
        ids = t["ids"].tolist()
        out.append(
            HTAResult(
                text,
                lm.tokenizer.convert_ids_to_tokens(ids),
                t["S"],
                _METHODS[int(t["method"][0])],
                mode,
                probes if mode == "estimate" else None,
                float(t["seconds"][0]),
                [i in special_ids for i in ids],
            )
        )
    return out


_METHODS = ("naive", "generic", "folded")  # the cache stores the engine as an index into this
