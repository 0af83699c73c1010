"""Architecture registry: where each supported family keeps the pieces the book needs.

One table, no branches elsewhere: a new architecture is a new ``Adapter`` row. Module names are glob
patterns over ``model.named_modules()`` of the *base* model (what ``AutoModel`` returns). A pattern may
match one module per layer, or a single module that the model calls once per layer (ALBERT shares its
layer); hooks collect outputs in call order, so both look the same to the extraction code.

Every adapter is admitted only after :func:`identifiability.trace.rebuild_check` has rebuilt each
attention block's output from the extracted pieces (sum over heads of ``A_h V_h W_O^h`` plus the output
bias) and matched the model's own output.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class Adapter:
    """How to find x, V_h and W_O^h in one architecture family.

    Attributes:
        family: short name shown to readers.
        model_types: ``config.model_type`` values this row serves.
        embeddings: module whose output is the input embedding x (token + position (+ segment), after
            the embedding LayerNorm where there is one), shape (batch, d_s, d).
        value: module whose output holds the value vectors of all heads, (batch, d_s, H*d_head), or a
            fused q/k/v projection (then ``value_chunk`` says which third is V).
        out_proj: the attention output projection (W_O, with bias), called once per layer.
        out_proj_is_conv1d: GPT-2's ``Conv1D`` stores its weight as (in, out) instead of (out, in).
        value_chunk: index of V in a fused q/k/v output split into three equal parts; None if separate.
        causal: decoder attention (each token only sees itself and earlier tokens).
        pre_layernorm: LayerNorm before attention/FFN (GPT-2) rather than after (BERT).
        foldable: the fast HTA path (post-LN position-wise folding) applies to this family.
    """

    family: str
    model_types: tuple[str, ...]
    embeddings: str
    value: str
    out_proj: str
    out_proj_is_conv1d: bool = False
    value_chunk: int | None = None
    causal: bool = False
    pre_layernorm: bool = False
    foldable: bool = False

    def find(self, model: nn.Module, pattern: str) -> list[nn.Module]:
        """Modules whose qualified name matches ``pattern``, in registration (= layer) order.

        ``pattern`` may list alternatives separated by "|"; the first that matches anything wins.
        """
        found = []
        for alt in pattern.split("|"):
            found = [m for name, m in model.named_modules() if fnmatch.fnmatchcase(name, alt)]
            if found:
                break
        if not found:
            raise LookupError(
                f"adapter {self.family!r}: no module matches {pattern!r} in {type(model).__name__}; "
                "the model does not have the layout this adapter expects (load it with AutoModel, "
                "not a task head class), or the registry row needs fixing"
            )
        return found

    def out_proj_weights(self, model: nn.Module, n_layers: int, n_heads: int) -> torch.Tensor:
        """Per-head blocks of the output projection, W_O^h, shape (L, H, d_head, d).

        A head's contribution to the attention block output is ``A_h @ V_h @ W_O^h``.
        """
        mods = self.find(model, self.out_proj)
        if len(mods) == 1 and n_layers > 1:
            mods = mods * n_layers  # one shared layer (ALBERT)
        if len(mods) != n_layers:
            raise LookupError(f"adapter {self.family!r}: found {len(mods)} output projections for {n_layers} layers")
        blocks = []
        for m in mods:
            w = m.weight.detach()
            w_in_out = w if self.out_proj_is_conv1d else w.T  # (H*d_head, d)
            blocks.append(w_in_out.reshape(n_heads, -1, w_in_out.shape[1]))
        return torch.stack(blocks)

    def out_proj_bias(self, model: nn.Module, n_layers: int) -> torch.Tensor:
        """Output projection bias per layer, shape (L, d)."""
        mods = self.find(model, self.out_proj)
        if len(mods) == 1 and n_layers > 1:
            mods = mods * n_layers
        return torch.stack([m.bias.detach() for m in mods])

    def split_values(self, out: torch.Tensor, n_heads: int) -> torch.Tensor:
        """Value-module output (B, d_s, *) -> per-head values (B, H, d_s, d_head)."""
        if self.value_chunk is not None:
            out = out.chunk(3, dim=-1)[self.value_chunk]
        b, s, hd = out.shape
        return out.reshape(b, s, n_heads, hd // n_heads).transpose(1, 2)


_BERT_LIKE = dict(
    embeddings="embeddings",
    value="encoder.layer.*.attention.self.value",
    out_proj="encoder.layer.*.attention.output.dense",
    foldable=True,
)

REGISTRY: tuple[Adapter, ...] = (
    Adapter(family="BERT", model_types=("bert",), **_BERT_LIKE),
    Adapter(family="RoBERTa", model_types=("roberta", "xlm-roberta", "camembert"), **_BERT_LIKE),
    # ELECTRA projects its embeddings to the hidden size when the two differ; x is taken after that.
    Adapter(family="ELECTRA", model_types=("electra",), **{**_BERT_LIKE, "embeddings": "embeddings_project|embeddings"}),
    Adapter(
        family="DistilBERT",
        model_types=("distilbert",),
        embeddings="embeddings",
        value="transformer.layer.*.attention.v_lin",
        out_proj="transformer.layer.*.attention.out_lin",
        foldable=True,
    ),
    Adapter(
        family="ALBERT",
        model_types=("albert",),
        # ALBERT projects its 128-d embeddings to the hidden size inside the encoder; x is taken after
        # that projection so that it lives in the same space as the hidden states.
        embeddings="encoder.embedding_hidden_mapping_in",
        value="encoder.albert_layer_groups.*.albert_layers.*.attention.value",
        out_proj="encoder.albert_layer_groups.*.albert_layers.*.attention.dense",
    ),
    Adapter(
        family="GPT-2",
        model_types=("gpt2",),
        embeddings="drop",
        value="h.*.attn.c_attn",
        value_chunk=2,
        out_proj="h.*.attn.c_proj",
        out_proj_is_conv1d=True,
        causal=True,
        pre_layernorm=True,
    ),
)


def supported_model_types() -> list[str]:
    return sorted(t for a in REGISTRY for t in a.model_types)


class UnsupportedArchitecture(ValueError):
    pass


def adapter_for(model_type: str) -> Adapter:
    """The registry row for a ``config.model_type``; a clear error naming the supported ones otherwise."""
    for a in REGISTRY:
        if model_type in a.model_types:
            return a
    raise UnsupportedArchitecture(
        f"no adapter for model_type {model_type!r}; supported: {', '.join(supported_model_types())}. "
        "Add a row to identifiability.adapters.REGISTRY (module names of x, V and W_O) to support it."
    )
