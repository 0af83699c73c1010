"""A loaded model: the base transformer, its tokenizer, its registry row and where it came from."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from ..base.paths import safe_key
from .adapters import Adapter


@dataclass
class LoadedModel:
    """A base transformer (``AutoModel``), its tokenizer, its adapter row and its provenance.

    Sizes follow the book's notation: L layers, H heads, d model width, d_v = d / H value width per head.
    """

    model: nn.Module
    tokenizer: object
    adapter: Adapter
    name: str
    provenance: dict = field(default_factory=dict)

    @property
    def config(self):
        return self.model.config

    @property
    def n_layers(self) -> int:
        return int(self.config.num_hidden_layers)

    @property
    def n_heads(self) -> int:
        return int(self.config.num_attention_heads)

    @property
    def d_model(self) -> int:
        return int(self.config.hidden_size)

    @property
    def d_v(self) -> int:
        """d_v, the value (and query/key) width of one head."""
        return self.d_model // self.n_heads

    @property
    def d_ff(self) -> int:
        return self.adapter.d_ff(self.config)

    @property
    def max_positions(self) -> int:
        return self.adapter.max_positions(self.config)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def key(self) -> str:
        """The folder name this model's results and caches are filed under
        (:attr:`identifiability.models.keys.ModelRef.key`; a model built in memory: its name)."""
        return self.provenance.get("key") or safe_key(self.name)

    @property
    def content_key(self) -> str:
        """SHA-256 over the files (or, for a model built in memory, the tensors) that define the model: the
        identity every cache and results file is keyed by (:mod:`identifiability.models.fingerprint`)."""
        return self.provenance["content_key"]
