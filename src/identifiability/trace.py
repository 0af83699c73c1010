"""The instrumented forward pass: everything the chapters need from one sentence, for all layers at once.

Shapes (per sentence, padding already removed): L layers, H heads, d_s tokens, d model width,
d_head = d / H.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, Sequence

import torch
from tqdm import tqdm

from .models import LoadedModel


@dataclass
class SentenceTrace:
    """One sentence's forward pass.

    Attributes:
        text: the sentence as given.
        tokens: d_s token strings, special tokens included.
        input_ids: (d_s,) token ids.
        x: (d_s, d) input embeddings (the embedding layer's output, position information included).
        hidden: (L+1, d_s, d) hidden states e^l; ``hidden[0]`` is x.
        attentions: (L, H, d_s, d_s) attention probabilities A (rows sum to 1).
        values: (L, H, d_s, d_head) value vectors V_h = E W_V^h + b_V^h of every head.
    """

    text: str
    tokens: list[str]
    input_ids: torch.Tensor
    x: torch.Tensor
    hidden: torch.Tensor
    attentions: torch.Tensor
    values: torch.Tensor

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)


def head_transforms(tr: SentenceTrace, w_o: torch.Tensor) -> torch.Tensor:
    """T = V_h W_O^h for every layer and head, shape (L, H, d_s, d).

    The head's output contribution is ``A_h @ T_h``; the paper's T = E W_V H.

    Args:
        tr: a sentence trace.
        w_o: (L, H, d_head, d) from :func:`out_proj_weights`.
    """
    return tr.values.to(w_o.dtype) @ w_o


def out_proj_weights(lm: LoadedModel) -> torch.Tensor:
    """Per-head output projection blocks W_O^h, shape (L, H, d_head, d), on the CPU."""
    return lm.adapter.out_proj_weights(lm.model, lm.n_layers, lm.n_heads).cpu()


@contextmanager
def _capture(lm: LoadedModel):
    """Collect value-module and output-projection outputs, in call order, during one forward pass."""
    store: dict[str, list[torch.Tensor]] = {"values": [], "out": [], "x": []}
    a, m = lm.adapter, lm.model
    hooks = []
    for mod in dict.fromkeys(a.find(m, a.value)):
        hooks.append(mod.register_forward_hook(lambda _m, _i, o: store["values"].append(o.detach())))
    for mod in dict.fromkeys(a.find(m, a.out_proj)):
        hooks.append(mod.register_forward_hook(lambda _m, _i, o: store["out"].append(o.detach())))
    emb = a.find(m, a.embeddings)[0]
    hooks.append(emb.register_forward_hook(lambda _m, _i, o: store["x"].append(o.detach())))
    try:
        yield store
    finally:
        for h in hooks:
            h.remove()


def tokenize(lm: LoadedModel, texts: Sequence[str], max_tokens: int | None = None) -> dict:
    """Tokenise with padding; sentences longer than ``max_tokens`` (or the model's maximum) are truncated
    with a warning, never silently."""
    limit = min(max_tokens or lm.max_positions, lm.max_positions)
    enc = lm.tokenizer(list(texts), padding=True, truncation=False, return_tensors="pt")
    lengths = enc["attention_mask"].sum(1)
    if int(lengths.max()) > limit:
        n_long = int((lengths > limit).sum())
        warnings.warn(
            f"{n_long} sentence(s) longer than {limit} tokens were truncated to {limit} "
            f"(the limit is max_tokens, at most the model's {lm.max_positions} positions); "
            "pass shorter text or raise max_tokens to keep them whole",
            stacklevel=2,
        )
        enc = lm.tokenizer(list(texts), padding=True, truncation=True, max_length=limit, return_tensors="pt")
    return enc


@torch.no_grad()
def _forward(lm: LoadedModel, enc: dict):
    enc = {k: v.to(lm.device) for k, v in enc.items()}
    with _capture(lm) as store:
        out = lm.model(**enc, output_attentions=True, output_hidden_states=True)
    return enc, out, store


def trace_batch(lm: LoadedModel, texts: Sequence[str], max_tokens: int | None = None) -> list[SentenceTrace]:
    """One padded forward pass over ``texts``; returns one trace per text with padding cut away."""
    enc, out, store = _forward(lm, tokenize(lm, texts, max_tokens))
    lengths = enc["attention_mask"].sum(1).tolist()
    attn = torch.stack(out.attentions, 1)  # (B, L, H, S, S)
    hidden = torch.stack(out.hidden_states, 1)  # (B, L+1, S, d)
    x = store["x"][0]
    values = torch.stack([lm.adapter.split_values(v, lm.n_heads) for v in store["values"]], 1)  # (B, L, H, S, dh)
    traces = []
    for b, n in enumerate(lengths):
        ids = enc["input_ids"][b, :n].cpu()
        h = hidden[b, :, :n].cpu().clone()
        h[0] = x[b, :n].cpu()  # e^0 = x; equal for most families, exact by construction for all
        traces.append(SentenceTrace(
            text=texts[b],
            tokens=lm.tokenizer.convert_ids_to_tokens(ids.tolist()),
            input_ids=ids,
            x=x[b, :n].cpu().clone(),
            hidden=h,
            attentions=attn[b, :, :, :n, :n].cpu().clone(),
            values=values[b, :, :, :n].cpu().clone(),
        ))
    return traces


def trace_sentences(
    lm: LoadedModel,
    texts: Iterable[str],
    max_tokens: int | None = None,
    batch_size: int = 16,
    progress: bool = True,
) -> list[SentenceTrace]:
    """Trace many sentences in padded batches (sorted by length so padding stays small)."""
    texts = list(texts)
    if not texts:
        raise ValueError("no sentences to trace: the corpus sample is empty; lower min_tokens or raise n_sentences")
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    result: list[SentenceTrace | None] = [None] * len(texts)
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    for idx in tqdm(batches, desc="forward passes", unit="batch", disable=not progress or len(batches) < 2):
        for i, tr in zip(idx, trace_batch(lm, [texts[i] for i in idx], max_tokens)):
            result[i] = tr
    return result  # type: ignore[return-value]


@torch.no_grad()
def rebuild_check(lm: LoadedModel, text: str = "The cat sat on the mat, and the dog barked twice.") -> float:
    """Rebuild every attention block's output from A, V_h and W_O^h and compare with the model's own.

    Returns the worst relative error over layers; raises if it exceeds 1e-5, because then the adapter
    extracts the wrong pieces and every chapter's numbers would be wrong.
    """
    enc, out, store = _forward(lm, tokenize(lm, [text, text + " " + text]))  # two lengths: padding too
    w_o = lm.adapter.out_proj_weights(lm.model, lm.n_layers, lm.n_heads)
    bias = lm.adapter.out_proj_bias(lm.model, lm.n_layers)
    mask = enc["attention_mask"].bool()
    x, e0 = store["x"][0].double(), out.hidden_states[0].double()
    if x.shape != e0.shape or (x - e0)[mask].norm() > 1e-5 * e0[mask].norm():
        raise RuntimeError(
            f"adapter {lm.adapter.family!r}: the embeddings module's output (shape {tuple(x.shape)}) is not the "
            "encoder's input hidden state; point `embeddings` at the module that produces it"
        )
    worst = 0.0
    if len(store["out"]) != lm.n_layers or len(out.attentions) != lm.n_layers:
        raise RuntimeError(f"adapter {lm.adapter.family}: captured {len(store['out'])} layers, expected {lm.n_layers}")
    for layer in range(lm.n_layers):
        v = lm.adapter.split_values(store["values"][layer], lm.n_heads).double()  # (B, H, S, dh)
        a = out.attentions[layer].double()  # (B, H, S, S)
        rebuilt = torch.einsum("bhst,bhtk,hkd->bsd", a, v, w_o[layer].double()) + bias[layer].double()
        got = store["out"][layer].double()
        diff = (rebuilt - got)[mask].norm() / got[mask].norm()
        worst = max(worst, float(diff))
    if worst > 1e-5:
        raise RuntimeError(
            f"adapter {lm.adapter.family!r} failed the rebuild check for {lm.name}: relative error {worst:.2e} > 1e-5 "
            "between the model's attention output and sum_h A_h V_h W_O^h + b; the registry row points at the wrong modules"
        )
    return worst
