"""How closely a model reproduces another's function: the bar a re-split member is healed to (issue 55).

Measured on the pre-training text's held-out documents (:func:`identifiability.pretrain.text.is_held_out`),
which no chapter and no confirmation run reads and healing never trains on:

- per layer (the embeddings' output and each layer's), the mean over tokens of the cosine between the two
  models' hidden states, on the held-out token blocks;
- the Spearman correlation, over sentence pairs drawn from the held-out documents, between the two models'
  cosine similarities of the pair's sentence embeddings (each model's mean pooling over its last layer's
  tokens, as sentence-transformers pools all-MiniLM-L6-v2).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .sources import TextError
from .text import documents, is_held_out

PAIRS = 500  # sentence pairs of the Spearman
PAIRS_SEED = 0
SENTENCE_WORDS = (5, 40)  # a held-out "sentence" outside this many words is a heading or a run-on transcript
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'“])")


@dataclass(frozen=True)
class Fidelity:
    """One model's fidelity to another.

    Attributes:
        cosine: per hidden state (0: the embeddings' output, then each layer), the mean token cosine.
        spearman: the rank correlation of the sentence pairs' similarities.
    """

    cosine: tuple[float, ...]
    spearman: float

    @property
    def last(self) -> float:
        return self.cosine[-1]

    @property
    def worst(self) -> float:
        return min(self.cosine)

    def as_dict(self) -> dict:
        return {"cosine": list(self.cosine), "spearman": self.spearman, "last": self.last, "worst": self.worst}


def heldout_sentences(docs=None) -> list[str]:
    """The held-out documents' sentences of :data:`SENTENCE_WORDS` words, in document order (``docs``
    defaults to :func:`identifiability.pretrain.text.documents`)."""
    docs = documents() if docs is None else docs
    out = []
    for i, doc in enumerate(docs):
        if is_held_out(i):
            for para in doc.paragraphs:
                out += [s for s in _SENTENCE.split(para) if SENTENCE_WORDS[0] <= len(s.split()) <= SENTENCE_WORDS[1]]
    return out


def sentence_pairs(sentences: Sequence[str], n: int = PAIRS, seed: int = PAIRS_SEED) -> list[tuple[str, str]]:
    """``n`` distinct pairs of two different sentences of ``sentences``, drawn uniformly among all pairs, seeded
    (a sentence may be in several pairs: the held-out documents hold fewer than 2n sentences)."""
    unique = sorted(set(sentences))
    m = len(unique)
    if m * (m - 1) // 2 < n:
        raise TextError(
            f"{n} sentence pairs need at least {math.ceil((1 + math.sqrt(1 + 8 * n)) / 2)} distinct "
            f"sentences; the text holds {m}"
        )
    first, second = np.triu_indices(m, k=1)
    pick = np.sort(np.random.default_rng(seed).choice(len(first), size=n, replace=False))
    return [(unique[first[i]], unique[second[i]]) for i in pick]


@torch.no_grad()
def hidden_states(model: nn.Module, blocks: torch.Tensor, batch_size: int = 16) -> list[torch.Tensor]:
    """Per hidden state (embeddings, then each layer), float32 [n_blocks, L, d], of ``blocks`` (n, L) of token
    ids without padding, in eval mode."""
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    parts = [model(input_ids=b.to(device), output_hidden_states=True).hidden_states for b in blocks.split(batch_size)]
    model.train(was)
    return [torch.cat([p[i].float().cpu() for p in parts]) for i in range(len(parts[0]))]


@torch.no_grad()
def sentence_embeddings(model: nn.Module, tokenizer, sentences: Sequence[str], batch_size: int = 64) -> torch.Tensor:
    """float32 [n, d]: each sentence's mean-pooled last hidden state (padding excluded)."""
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    out = []
    for i in range(0, len(sentences), batch_size):
        enc = tokenizer(list(sentences[i : i + batch_size]), padding=True, truncation=True, return_tensors="pt")
        enc = {k: v.to(device) for k, v in enc.items()}
        h = model(**enc).last_hidden_state.float()
        mask = enc["attention_mask"].unsqueeze(-1).float()
        out.append(((h * mask).sum(1) / mask.sum(1)).cpu())
    model.train(was)
    return torch.cat(out)


def pair_similarities(model: nn.Module, tokenizer, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """float64 [n]: the cosine of each pair's two sentence embeddings."""
    unique = sorted({s for pair in pairs for s in pair})  # each sentence embedded once, however many pairs hold it
    emb = sentence_embeddings(model, tokenizer, unique)
    index = {s: i for i, s in enumerate(unique)}
    first, second = (emb[[index[pair[k]] for pair in pairs]] for k in (0, 1))
    return torch.nn.functional.cosine_similarity(first, second, dim=-1).double().numpy()


@dataclass(frozen=True)
class Reference:
    """What fidelity compares to, computed once: the original's hidden states on the held-out blocks and its
    pair similarities."""

    blocks: torch.Tensor  # (n, L) token ids
    pairs: tuple[tuple[str, str], ...]
    hidden: tuple[torch.Tensor, ...]  # per hidden state, (n, L, d)
    similarities: np.ndarray  # (n_pairs,)

    @classmethod
    def of(cls, original: nn.Module, tokenizer, blocks: torch.Tensor, pairs: Sequence[tuple[str, str]]) -> Reference:
        hidden = tuple(hidden_states(original, blocks))
        return cls(blocks, tuple(pairs), hidden, pair_similarities(original, tokenizer, pairs))


def fidelity(model: nn.Module, tokenizer, reference: Reference) -> Fidelity:
    """``model``'s fidelity to the model ``reference`` was computed from: the mean token cosine of every hidden
    state, and the Spearman of the pairs' similarities."""
    from scipy.stats import spearmanr

    mine = hidden_states(model, reference.blocks)
    if len(mine) != len(reference.hidden):
        raise ValueError(f"{len(mine) - 1} layers against the reference's {len(reference.hidden) - 1}")
    cos = tuple(
        float(torch.nn.functional.cosine_similarity(a, b, dim=-1).mean()) for a, b in zip(mine, reference.hidden)
    )
    sims = pair_similarities(model, tokenizer, reference.pairs)
    rho = float(spearmanr(sims, reference.similarities).statistic)
    return Fidelity(cos, rho)
