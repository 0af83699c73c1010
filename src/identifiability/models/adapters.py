"""Architecture registry: where each supported family keeps the pieces the book needs.

This module is the only place that knows architecture families. A new architecture is a new ``Adapter``
row; code elsewhere asks the row (``adapter.causal``, ``adapter.pre_ln``, ``adapter.layer_modules(...)``),
never the family name.

Module names are regular expressions matched in full against the qualified names of
``model.named_modules()`` of the *base* model (what ``AutoModel`` returns), with ``\\d+`` for the layer
index. (Glob patterns were used before; a glob's ``*`` also crosses dots, so
``encoder.layer.*.output.dense`` matched the attention output projection too.) A pattern matches one
module per layer, or a single module that the model calls once per layer (ALBERT shares its layer).

Every adapter is admitted only after :func:`identifiability.models.trace.rebuild_check` has rebuilt each
attention block's output from the extracted pieces (sum over heads of ``A_h V_h W_O^h`` plus the output
bias) and matched the model's own output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads with a model, not with the registry: the pre-flight reads rows without it
    import torch
    from torch import nn

from ..base.errors import UserError


class UnsupportedArchitecture(UserError, ValueError):
    """A model family the registry has no row for; the message names the supported ones."""


@dataclass(frozen=True)
class Adapter:
    """Where one architecture family keeps x, the attention block, the FFN and the LayerNorms.

    Attributes:
        family: short name shown to readers.
        model_types: ``config.model_type`` values this row serves.
        embeddings: the embedding module (token + position (+ segment), with its LayerNorm where there is one).
        embed_proj: a linear map from the embedding width to d, where the family has one (ALBERT always,
            ELECTRA when its embedding size differs from d); x is taken after it, so that x lives in the
            space of the hidden states. None: x is the embeddings' output.
        query, key, value: the attention projections; for a fused q/k/v projection (``qkv_fused``) all
            three name it, and its output splits into equal thirds q, k, v.
        attn_out: the attention output projection W_O (with bias).
        ln_attn: the LayerNorm of the attention sub-block (after the residual in post-LN, before the
            attention in pre-LN).
        ffn_in, ffn_act, ffn_out: the FFN's first linear map, its element-wise activation module, its second map.
        ln_ffn: the LayerNorm of the FFN sub-block (placed like ``ln_attn``).
        d_ff_attr: the config attribute holding the FFN width (None in the config means 4d).
        act_attr: the config attribute naming the FFN activation.
        position_offset: positions the family reserves (RoBERTa counts from padding_idx + 1).
        conv1d: weights stored as (in, out) (GPT-2's ``Conv1D``) instead of (out, in).
        qkv_fused: one projection produces q, k and v.
        causal: decoder attention (each token only sees itself and earlier tokens).
        pre_ln: LayerNorm before attention/FFN (GPT-2) rather than after (BERT).
        foldable: the folded HTA pass (post-LN, one position-wise Jacobian per layer) applies.
    """

    family: str
    model_types: tuple[str, ...]
    embeddings: str
    query: str
    key: str
    value: str
    attn_out: str
    ln_attn: str
    ffn_in: str
    ffn_act: str
    ffn_out: str
    ln_ffn: str
    embed_proj: str | None = None
    d_ff_attr: str = "intermediate_size"
    act_attr: str = "hidden_act"
    position_offset: int = 0
    conv1d: bool = False
    qkv_fused: bool = False
    causal: bool = False
    pre_ln: bool = False
    foldable: bool = False

    # -- finding modules ------------------------------------------------------------------------------

    def find(self, model: nn.Module, pattern: str, required: bool = True) -> list[nn.Module]:
        """Modules whose qualified name matches ``pattern`` in full, in registration (= layer) order."""
        rx = re.compile(pattern)
        found = [m for name, m in model.named_modules() if rx.fullmatch(name)]
        if not found and required:
            raise LookupError(
                f"adapter {self.family!r}: no module matches {pattern!r} in {type(model).__name__}; "
                "the model does not have the layout this adapter expects (load it with AutoModel, "
                "not a task head class), or the registry row needs fixing"
            )
        return found

    def layer_modules(self, model: nn.Module, pattern: str, n_layers: int) -> list[nn.Module]:
        """One module per layer for ``pattern`` (a shared layer, as in ALBERT, is repeated)."""
        mods = self.find(model, pattern)
        if len(mods) == 1 and n_layers > 1:
            mods = mods * n_layers
        if len(mods) != n_layers:
            raise LookupError(
                f"adapter {self.family!r}: {pattern!r} matches {len(mods)} modules for {n_layers} layers; "
                "the pattern is too wide or too narrow"
            )
        return mods

    def x_module(self, model: nn.Module) -> nn.Module:
        """The module whose output is x, the input of the first layer, shape (batch, d_s, d)."""
        if self.embed_proj is not None:
            proj = self.find(model, self.embed_proj, required=False)
            if proj:
                return proj[0]
        return self.find(model, self.embeddings)[0]

    # -- config ---------------------------------------------------------------------------------------

    def d_ff(self, config) -> int:
        """FFN width."""
        return int(getattr(config, self.d_ff_attr, None) or 4 * config.hidden_size)

    def activation(self, config) -> str | None:
        """Name of the FFN activation (e.g. "gelu")."""
        name = getattr(config, self.act_attr, None)
        return name if isinstance(name, str) else None

    def max_positions(self, config) -> int:
        """Longest input the model accepts, in tokens (special tokens included)."""
        return int(config.max_position_embeddings) - self.position_offset

    # -- weights --------------------------------------------------------------------------------------

    def weight(self, module: nn.Module) -> torch.Tensor:
        """A linear map's weight in torch's (out, in) convention, detached."""
        w = module.weight.detach()
        return w.T if self.conv1d else w

    def out_proj_weights(self, model: nn.Module, n_layers: int, n_heads: int) -> torch.Tensor:
        """Per-head blocks of the output projection, W_O^h, shape (L, H, d_v, d).

        A head's contribution to the attention block output is ``A_h @ V_h @ W_O^h``.
        """
        blocks = []
        for m in self.layer_modules(model, self.attn_out, n_layers):
            w_in_out = self.weight(m).T  # (H*d_v, d)
            blocks.append(w_in_out.reshape(n_heads, -1, w_in_out.shape[1]))
        import torch

        return torch.stack(blocks)

    def out_proj_bias(self, model: nn.Module, n_layers: int) -> torch.Tensor:
        """Output projection bias per layer, shape (L, d)."""
        import torch

        return torch.stack([m.bias.detach() for m in self.layer_modules(model, self.attn_out, n_layers)])

    def split_values(self, out: torch.Tensor, n_heads: int) -> torch.Tensor:
        """Value-module output (B, d_s, *) -> per-head values (B, H, d_s, d_v)."""
        if self.qkv_fused:
            out = out.chunk(3, dim=-1)[2]
        b, s, hd = out.shape
        return out.reshape(b, s, n_heads, hd // n_heads).transpose(1, 2)


def _bert_like(prefix: str) -> dict:
    p = prefix + r"\.\d+\."
    return dict(
        embeddings="embeddings",
        query=p + r"attention\.self\.query",
        key=p + r"attention\.self\.key",
        value=p + r"attention\.self\.value",
        attn_out=p + r"attention\.output\.dense",
        ln_attn=p + r"attention\.output\.LayerNorm",
        ffn_in=p + r"intermediate\.dense",
        ffn_act=p + r"intermediate\.intermediate_act_fn",
        ffn_out=p + r"output\.dense",
        ln_ffn=p + r"output\.LayerNorm",
        foldable=True,
    )


_ALBERT = r"encoder\.albert_layer_groups\.\d+\.albert_layers\.\d+\."
_GPT2 = r"h\.\d+\."

REGISTRY: tuple[Adapter, ...] = (
    Adapter(family="BERT", model_types=("bert",), **_bert_like(r"encoder\.layer")),
    Adapter(
        family="RoBERTa",
        model_types=("roberta", "xlm-roberta", "camembert"),
        position_offset=2,
        **_bert_like(r"encoder\.layer"),
    ),
    Adapter(
        family="ELECTRA", model_types=("electra",), embed_proj="embeddings_project", **_bert_like(r"encoder\.layer")
    ),
    Adapter(
        family="DistilBERT",
        model_types=("distilbert",),
        embeddings="embeddings",
        query=r"transformer\.layer\.\d+\.attention\.q_lin",
        key=r"transformer\.layer\.\d+\.attention\.k_lin",
        value=r"transformer\.layer\.\d+\.attention\.v_lin",
        attn_out=r"transformer\.layer\.\d+\.attention\.out_lin",
        ln_attn=r"transformer\.layer\.\d+\.sa_layer_norm",
        ffn_in=r"transformer\.layer\.\d+\.ffn\.lin1",
        ffn_act=r"transformer\.layer\.\d+\.ffn\.activation",
        ffn_out=r"transformer\.layer\.\d+\.ffn\.lin2",
        ln_ffn=r"transformer\.layer\.\d+\.output_layer_norm",
        d_ff_attr="hidden_dim",
        act_attr="activation",
        foldable=True,
    ),
    Adapter(
        family="ALBERT",
        model_types=("albert",),
        embeddings="embeddings",
        embed_proj=r"encoder\.embedding_hidden_mapping_in",
        query=_ALBERT + r"attention\.query",
        key=_ALBERT + r"attention\.key",
        value=_ALBERT + r"attention\.value",
        attn_out=_ALBERT + r"attention\.dense",
        ln_attn=_ALBERT + r"attention\.LayerNorm",
        ffn_in=_ALBERT + r"ffn",
        ffn_act=_ALBERT + r"activation",
        ffn_out=_ALBERT + r"ffn_output",
        ln_ffn=_ALBERT + r"full_layer_layer_norm",
    ),
    Adapter(
        family="GPT-2",
        model_types=("gpt2",),
        embeddings="drop",
        query=_GPT2 + r"attn\.c_attn",
        key=_GPT2 + r"attn\.c_attn",
        value=_GPT2 + r"attn\.c_attn",
        attn_out=_GPT2 + r"attn\.c_proj",
        ln_attn=_GPT2 + r"ln_1",
        ffn_in=_GPT2 + r"mlp\.c_fc",
        ffn_act=_GPT2 + r"mlp\.act",
        ffn_out=_GPT2 + r"mlp\.c_proj",
        ln_ffn=_GPT2 + r"ln_2",
        d_ff_attr="n_inner",
        act_attr="activation_function",
        conv1d=True,
        qkv_fused=True,
        causal=True,
        pre_ln=True,
    ),
)


DEFAULT_MODEL_TYPE = "bert"  # the embedded model's family; random test models default to it


def supported_model_types() -> list[str]:
    return sorted(t for a in REGISTRY for t in a.model_types)


def adapter_for(model_type: str) -> Adapter:
    """The registry row for a ``config.model_type``; a clear error naming the supported ones otherwise."""
    for a in REGISTRY:
        if model_type in a.model_types:
            return a
    raise UnsupportedArchitecture(
        f"no adapter for model_type {model_type!r}; supported: {', '.join(supported_model_types())}. "
        "Add a row to identifiability.models.adapters.REGISTRY (module names of x, Q/K/V, W_O, FFN and LayerNorms) "
        "to support it."
    )
