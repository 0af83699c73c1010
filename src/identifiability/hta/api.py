"""The entry points: :func:`hta` for one sentence (it picks the engine) and :func:`hta_corpus` for many,
with an optional cache of the squared norms S on disk."""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
from tqdm import tqdm

from ..loaded_model import LoadedModel
from ..trace import SentenceTrace
from .core import _Directions, _prepare
from .folded import _folded_S, fold_spec
from .generic import _generic_S
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
    inp = _prepare(lm, trace_or_text, max_tokens)
    dirs = _Directions(inp.x.shape[0], inp.x.shape[1], None if mode == "exact" else probes, probe, seed)
    S, used = None, "generic"
    if method in ("auto", "folded"):
        spec = fold_spec(lm)
        if spec is None and method == "folded":
            raise ValueError(f"the folded pass does not apply to {lm.name} ({lm.adapter.family}); use method='auto'")
        if spec is not None:
            S = _folded_S(lm, inp, dirs, chunk, spec)
            used = "folded"
    if S is None:
        S, used = _generic_S(lm, inp, dirs, chunk), "generic"
    return HTAResult(inp.text, inp.tokens, S, used, mode, dirs.probes, time.perf_counter() - t0, inp.special)


CACHE_VERSION = 1  # bump when a change alters the numbers, so stale caches are never read


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

    With ``cache=True`` the squared norms are stored as safetensors under ``data/cache/hta/<model>/``,
    keyed by the model's weights, the texts and every parameter that changes the numbers.
    """
    items = list(texts)

    def compute() -> list[HTAResult]:
        bar = tqdm(items, desc=desc or f"HTA ({mode})", unit="sentence", disable=not progress or len(items) < 2)
        return [hta(lm, item, mode=mode, probes=probes, seed=seed + k, **kwargs) for k, item in enumerate(bar)]

    if not cache:
        return compute()
    from ..results import cached_tensors, params_key  # noqa: I001 (results imports torch only)

    plain = [it.text if isinstance(it, SentenceTrace) else it for it in items]
    params = {
        "version": CACHE_VERSION,
        "model": lm.content_key,
        "texts": params_key({"t": plain}),
        "n": len(plain),
        "mode": mode,
        "seed": seed,
        "probes": probes if mode == "estimate" else None,
        "probe": kwargs.get("probe", "orthonormal"),
        "max_tokens": kwargs.get("max_tokens"),
        "method": kwargs.get("method", "auto"),
    }
    fresh: list[HTAResult] = []

    def pack() -> dict[str, torch.Tensor]:
        fresh.extend(compute())
        ids = [lm.tokenizer.convert_tokens_to_ids(r.tokens) for r in fresh]
        return {
            "S": torch.cat([r.S.flatten() for r in fresh]),
            "lengths": torch.tensor([r.n_tokens for r in fresh]),
            "ids": torch.tensor([i for row in ids for i in row], dtype=torch.long),
            "seconds": torch.tensor([r.seconds for r in fresh], dtype=torch.float64),
            "method": torch.tensor([_METHODS.index(r.method) for r in fresh]),
        }

    t = cached_tensors(f"hta/{lm.key}", params, pack, **({"root": cache_root} if cache_root else {}))
    if fresh:
        return fresh
    out, s_off, i_off, n_layers = [], 0, 0, lm.n_layers + 1
    special_ids = set(lm.tokenizer.all_special_ids)
    for k, n in enumerate(t["lengths"].tolist()):
        ids = t["ids"][i_off : i_off + n].tolist()
        S = t["S"][s_off : s_off + n_layers * n * n].reshape(n_layers, n, n)
        out.append(
            HTAResult(
                plain[k],
                lm.tokenizer.convert_ids_to_tokens(ids),
                S,
                _METHODS[int(t["method"][k])],
                mode,
                probes if mode == "estimate" else None,
                float(t["seconds"][k]),
                [i in special_ids for i in ids],
            )
        )
        s_off += n_layers * n * n
        i_off += n
    return out


_METHODS = ("naive", "generic", "folded")  # the cache stores the engine as an index into this
