"""Hidden states of a corpus sample, extracted once per model + corpus + sample.

Shapes: L = number of layers, so there are L+1 hidden states per token (``hidden[0]`` is x, the input to the
first layer; ``hidden[l]`` is layer l's output); N tokens in a corpus sample, d model width.

Extraction costs one forward pass over the sample (:func:`identifiability.models.trace.forward`, the package's single
forward pass with hooks), so :func:`hidden_states` caches its result with
:func:`identifiability.base.results.cached_tensors`: the two chapters that use it (token identity; angle vs
magnitude) share the work.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from tqdm import tqdm

from ..base.paths import safe_key
from ..base.results import cached_tensors
from ..models.loaded_model import LoadedModel
from ..models.trace import forward, tokenize

# Part of every cache key (hidden states and probe weights): bump it when what is cached changes meaning.
CACHE_VERSION = 1


@dataclass
class HiddenStates:
    """Hidden states of every token of a sample of sentences, flattened over sentences.

    Attributes:
        hidden: (L+1, N, d) e_i^l; ``hidden[0]`` is x (the input to the first layer), ``hidden[l]`` layer l's
            output.
        x: (N, d) input embeddings x_i (the output of the adapter's x module, position information
            included; after the projection to d where a family has one, so that it lives in the space of e_i^l).
        sentence: (N,) index of the sentence each token belongs to (0..n_sentences-1).
        position: (N,) position of the token in its sentence (special tokens counted).
        token_id: (N,) vocabulary id.
        special: (N,) True for special tokens ([CLS], [SEP], <s>, ...), from ``tokenizer.all_special_ids``.
    """

    hidden: torch.Tensor
    x: torch.Tensor
    sentence: torch.Tensor
    position: torch.Tensor
    token_id: torch.Tensor
    special: torch.Tensor

    @property
    def n_layers(self) -> int:
        """L (the number of transformer layers; there are L+1 hidden states)."""
        return self.hidden.shape[0] - 1

    @property
    def n_tokens(self) -> int:
        return self.hidden.shape[1]

    @property
    def n_sentences(self) -> int:
        return int(self.sentence.max()) + 1 if self.n_tokens else 0

    @property
    def d(self) -> int:
        return self.hidden.shape[2]

    def to_tensors(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, k) for k in ("hidden", "x", "sentence", "position", "token_id", "special")}

    @classmethod
    def from_tensors(cls, t: dict[str, torch.Tensor]) -> HiddenStates:
        return cls(**{k: t[k] for k in ("hidden", "x", "sentence", "position", "token_id", "special")})


@torch.no_grad()
def extract_hidden(
    lm: LoadedModel, texts: Sequence[str], max_tokens: int | None = None, batch_size: int = 32, progress: bool = True
) -> HiddenStates:
    """One forward pass per batch (sorted by length so padding stays small), keeping only hidden states.

    Cheaper than :func:`identifiability.models.trace.trace_sentences` for this purpose: attention maps and value
    vectors are not copied out.
    """
    texts = list(texts)
    if not texts:
        raise ValueError("no sentences: the corpus sample is empty; lower min_tokens or raise n_sentences")
    special_ids = torch.tensor(sorted(set(lm.tokenizer.all_special_ids)), dtype=torch.long)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    per_sentence: list[tuple | None] = [None] * len(texts)
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    for idx in tqdm(batches, desc="hidden states", unit="batch", disable=not progress or len(batches) < 2):
        f = forward(lm, tokenize(lm, [texts[i] for i in idx], max_tokens))
        enc = f.enc
        hidden = torch.stack(f.out.hidden_states, 1).float().cpu()  # (B, L+1, S, d)
        x = f.x.float().cpu()
        lengths = enc["attention_mask"].sum(1).tolist()
        for b, i in enumerate(idx):
            n = int(lengths[b])
            ids = enc["input_ids"][b, :n].cpu()
            h = hidden[b, :, :n].clone()
            h[0] = x[b, :n]  # e^0 = x exactly (equal up to rounding where the model says so itself)
            per_sentence[i] = (h, ids)
    hidden = torch.cat([p[0] for p in per_sentence], 1)  # type: ignore[index]
    ids = torch.cat([p[1] for p in per_sentence])  # type: ignore[index]
    sentence = torch.cat(
        [
            torch.full((p[1].numel(),), s, dtype=torch.long)  # type: ignore[union-attr]
            for s, p in enumerate(per_sentence)
        ]
    )
    position = torch.cat([torch.arange(p[1].numel()) for p in per_sentence])  # type: ignore[union-attr]
    return HiddenStates(
        hidden=hidden.contiguous(),
        x=hidden[0].clone(),
        sentence=sentence,
        position=position,
        token_id=ids,
        special=torch.isin(ids, special_ids),
    )


def hidden_states(
    lm: LoadedModel,
    texts: Sequence[str],
    corpus_name: str,
    max_tokens: int | None = None,
    cache: bool = True,
    progress: bool = True,
) -> HiddenStates:
    """:func:`extract_hidden`, cached on disk (safetensors) by the model's content key, corpus and exact texts."""
    texts = list(texts)
    if not cache:
        return extract_hidden(lm, texts, max_tokens, progress=progress)
    params = {
        "model": lm.content_key,
        "corpus": corpus_name,
        "texts_sha256": hashlib.sha256("\n".join(texts).encode()).hexdigest(),
        "n_texts": len(texts),
        "max_tokens": max_tokens,
        "version": CACHE_VERSION,
    }
    t = cached_tensors(
        f"hidden/{lm.key}/{safe_key(corpus_name)}",
        params,
        lambda: extract_hidden(lm, texts, max_tokens, progress=progress).to_tensors(),
    )
    return HiddenStates.from_tensors(t)


def cache_params(hs: HiddenStates) -> dict:
    """A cheap fingerprint of a HiddenStates object, to key caches of things computed from it."""
    h = hs.hidden
    probe = h[:, :: max(1, h.shape[1] // 97)].double()
    return {
        "shape": list(h.shape),
        "sum": round(float(probe.sum()), 6),
        "abs": round(float(probe.abs().sum()), 6),
        "ids": int(hs.token_id.sum()),
        "n_sent": hs.n_sentences,
    }
