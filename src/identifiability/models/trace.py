"""The instrumented forward pass: everything the chapters need from one sentence, for all layers at once.

Shapes (per sentence, padding already removed): L layers, H heads, d_s tokens, d model width,
d_v = d / H the value width of a head. Layers follow the book's convention: hidden state 0 is x, hidden
states 1..L are the outputs of the L layers; per-layer tensors of attention quantities (A, V_h, W_O^h)
have L entries, entry l - 1 belonging to layer l.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from tqdm import tqdm

from ..corpus.corpora import encode
from .loaded_model import LoadedModel


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
        values: (L, H, d_s, d_v) value vectors V_h = E W_V^h + b_V^h of every head.
        token_type_ids: (d_s,) segment ids (0 for the first sentence of a pair, 1 for the second), where
            the tokenizer makes them; None otherwise.
    """

    text: str
    tokens: list[str]
    input_ids: torch.Tensor
    x: torch.Tensor
    hidden: torch.Tensor
    attentions: torch.Tensor
    values: torch.Tensor
    token_type_ids: torch.Tensor | None = None

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)


def layer_index(layer: int, n_layers: int) -> int:
    """The index of layer ``layer`` in a trace's per-layer tensors (attentions, values, W_O blocks): the one place
    where the book's numbering (the paper's 1..L; 0 is the embeddings, which have no attention) meets the
    0-based index."""
    if not 1 <= layer <= n_layers:
        raise ValueError(f"layer must be between 1 and {n_layers} (the book numbers layers 1..L), got {layer}")
    return layer - 1


def transform(values: torch.Tensor, w_o: torch.Tensor) -> torch.Tensor:
    """T = V_h W_O^h, the one place that forms it: the head's output contribution is ``A_h @ T_h`` (the
    paper's T = E W_V H), computed in ``w_o``'s dtype.

    Args:
        values: (..., d_s, d_v) the head's value rows V_h.
        w_o: (..., d_v, d) its block of the output projection.
    Returns:
        (..., d_s, d).
    """
    return values.to(w_o.dtype) @ w_o


def head_transforms(tr: SentenceTrace, w_o: torch.Tensor) -> torch.Tensor:
    """T = V_h W_O^h for every layer and head, shape (L, H, d_s, d).

    The head's output contribution is ``A_h @ T_h``; the paper's T = E W_V H.

    Args:
        tr: a sentence trace.
        w_o: (L, H, d_v, d) from :func:`out_proj_weights`.
    """
    return transform(tr.values, w_o)


def head(tr: SentenceTrace, w_o: torch.Tensor, layer: int, h: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One head's attention A and T = V_h W_O^h, for ``layer`` in the book's numbering 1..L.

    Args:
        tr: a sentence trace.
        w_o: (L, H, d_v, d) from :func:`out_proj_weights`.
        layer: 1..L (0 is the embeddings, which have no attention).
        h: head index 0..H-1.
    Returns:
        A: (d_s, d_s) attention probabilities; T: (d_s, d) in ``w_o``'s dtype.
    """
    i = layer_index(layer, tr.attentions.shape[0])
    return tr.attentions[i, h], transform(tr.values[i, h], w_o[i, h])


def out_proj_weights(lm: LoadedModel) -> torch.Tensor:
    """Per-head output projection blocks W_O^h, shape (L, H, d_v, d), on the CPU."""
    return lm.adapter.out_proj_weights(lm.model, lm.n_layers, lm.n_heads).cpu()


@dataclass
class Forward:
    """What one instrumented forward pass returns (batched, padded, on the model's device).

    Attributes:
        enc: the tokenizer output that was fed in (input_ids, attention_mask, ...), each (B, n_pad).
        out: the model's own output (``hidden_states``: L+1 tensors (B, n_pad, d); ``attentions`` if asked).
        x: (B, n_pad, d) the output of the adapter's x module, the input of the first layer.
        values: per layer, the value module's output (B, n_pad, H*d_v, or the fused q/k/v output); if asked.
        attn_out: per layer, the attention output projection's output (B, n_pad, d); if asked.
    """

    enc: dict
    out: object
    x: torch.Tensor
    values: list[torch.Tensor]
    attn_out: list[torch.Tensor]


@torch.no_grad()
def forward(
    lm: LoadedModel, enc: dict, attentions: bool = False, values: bool = False, attn_out: bool = False
) -> Forward:
    """The one forward pass with hooks that every chapter uses: hidden states and x always, attention
    probabilities, value vectors and output-projection outputs on request. Modules a model calls once
    per layer (a layer shared across depth) report once per call, so the lists are per layer either way."""
    a, m = lm.adapter, lm.model
    store: dict[str, list[torch.Tensor]] = {"x": [], "values": [], "attn_out": []}
    wanted = [("x", [a.x_module(m)])]
    if values:
        wanted.append(("values", a.find(m, a.value)))
    if attn_out:
        wanted.append(("attn_out", a.find(m, a.attn_out)))
    hooks = []
    for slot, mods in wanted:
        for mod in dict.fromkeys(mods):
            hooks.append(mod.register_forward_hook(lambda _m, _i, o, slot=slot: store[slot].append(o.detach())))
    enc = {k: v.to(lm.device) for k, v in enc.items()}
    try:
        out = m(**enc, output_attentions=attentions, output_hidden_states=True)
    finally:
        for h in hooks:
            h.remove()
    return Forward(enc, out, store["x"][0], store["values"], store["attn_out"])


@contextmanager
def from_x(lm: LoadedModel):
    """While active, the x module's output is replaced by ``slot["x"]`` ((n_pad, d), unbatched), so the model
    becomes a function of x; anything that carries tangents or gradients (vmap/jvp/autograd) flows through."""
    slot: dict = {}

    def hook(_m, _i, out):
        return slot["x"].unsqueeze(0) if "x" in slot else out

    h = lm.adapter.x_module(lm.model).register_forward_hook(hook)
    try:
        yield slot
    finally:
        h.remove()


def tokenize(lm: LoadedModel, texts: Sequence[str], max_tokens: int | None = None) -> dict:
    """Tokenise with padding; sentences longer than ``max_tokens`` (or the model's maximum) are truncated
    with a warning, never silently. A pair string (:data:`identifiability.corpus.corpora.PAIR_SEP`) is tokenised
    as a pair, so ``token_type_ids`` (B, n_pad) carry its segments into :func:`forward`."""
    limit = min(max_tokens or lm.max_positions, lm.max_positions)
    enc = encode(lm.tokenizer, texts, padding=True, truncation=False, return_tensors="pt")
    lengths = enc["attention_mask"].sum(1)
    if int(lengths.max()) > limit:
        n_long = int((lengths > limit).sum())
        warnings.warn(
            f"{n_long} sentence(s) longer than {limit} tokens were truncated to {limit} "
            f"(the limit is max_tokens, at most the model's {lm.max_positions} positions); "
            "pass shorter text or raise max_tokens to keep them whole",
            stacklevel=2,
        )
        enc = encode(lm.tokenizer, texts, padding=True, truncation=True, max_length=limit, return_tensors="pt")
    return enc


def trace_batch(lm: LoadedModel, texts: Sequence[str], max_tokens: int | None = None) -> list[SentenceTrace]:
    """One padded forward pass over ``texts``; returns one trace per text with padding cut away."""
    f = forward(lm, tokenize(lm, texts, max_tokens), attentions=True, values=True)
    enc = f.enc
    lengths = enc["attention_mask"].sum(1).tolist()
    attn = torch.stack(f.out.attentions, 1)  # (B, L, H, n_pad, n_pad)
    hidden = torch.stack(f.out.hidden_states, 1)  # (B, L+1, n_pad, d)
    x = f.x
    values = torch.stack([lm.adapter.split_values(v, lm.n_heads) for v in f.values], 1)  # (B, L, H, n_pad, d_v)
    traces = []
    segments = enc.get("token_type_ids")
    for b, n in enumerate(lengths):
        ids = enc["input_ids"][b, :n].cpu()
        h = hidden[b, :, :n].cpu().clone()
        h[0] = x[b, :n].cpu()  # e^0 = x; equal for most families, exact by construction for all
        traces.append(
            SentenceTrace(
                text=texts[b],
                tokens=lm.tokenizer.convert_ids_to_tokens(ids.tolist()),
                input_ids=ids,
                x=x[b, :n].cpu().clone(),
                hidden=h,
                attentions=attn[b, :, :, :n, :n].cpu().clone(),
                values=values[b, :, :, :n].cpu().clone(),
                token_type_ids=segments[b, :n].cpu().clone() if segments is not None else None,
            )
        )
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
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
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
    f = forward(lm, tokenize(lm, [text, text + " " + text]), attentions=True, values=True, attn_out=True)
    enc, out = f.enc, f.out  # two lengths: padding too
    w_o = lm.adapter.out_proj_weights(lm.model, lm.n_layers, lm.n_heads)
    bias = lm.adapter.out_proj_bias(lm.model, lm.n_layers)
    mask = enc["attention_mask"].bool()
    x, e0 = f.x.double(), out.hidden_states[0].double()
    if x.shape != e0.shape or (x - e0)[mask].norm() > 1e-5 * e0[mask].norm():
        raise RuntimeError(
            f"adapter {lm.adapter.family!r}: the x module's output (shape {tuple(x.shape)}) is not the "
            "encoder's input hidden state; point `embeddings` (or `embed_proj`) at the module that produces it"
        )
    worst = 0.0
    if len(f.attn_out) != lm.n_layers or len(f.values) != lm.n_layers or len(out.attentions) != lm.n_layers:
        raise RuntimeError(
            f"adapter {lm.adapter.family!r}: captured {len(f.values)} value and {len(f.attn_out)} output-projection "
            f"calls for {lm.n_layers} layers; a pattern matches the wrong modules"
        )
    for layer in range(lm.n_layers):
        v = lm.adapter.split_values(f.values[layer], lm.n_heads).double()  # (B, H, n_pad, d_v)
        a = out.attentions[layer].double()  # (B, H, n_pad, n_pad)
        rebuilt = torch.einsum("bhst,bhtk,hkd->bsd", a, v, w_o[layer].double()) + bias[layer].double()
        got = f.attn_out[layer].double()
        diff = (rebuilt - got)[mask].norm() / got[mask].norm()
        worst = max(worst, float(diff))
    if worst > 1e-5:
        raise RuntimeError(
            f"adapter {lm.adapter.family!r} failed the rebuild check for {lm.name}: relative error {worst:.2e} > 1e-5 "
            "between the model's attention output and sum_h A_h V_h W_O^h + b; the registry row points at the wrong "
            "modules"
        )
    return worst
