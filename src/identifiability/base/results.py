"""Cached tensors, keyed by what they depend on, written atomically.

An entry is ``<data folder>/cache/<key>/<hash of its parameters>.safetensors`` (:func:`cache_file`, the
one place that builds an entry's path) with its parameters beside it as JSON. Tensors are cached with
safetensors and metadata with JSON: nothing here ever unpickles.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from . import paths
from .fileio import atomic_write, write_json

# A chapter results file's {claim: make target} of the verdicts it adopted from a recorded run (judged on that
# run's models, not on this file's): the results table never files them under this file's model
ADOPTED = "adopted_claims"
# A chapter results file's {claim: {"target": make target, "date": YYYY-MM-DD}} of the verdicts judged on a
# recorded run's numbers (or adopted from it): what the findings tables say beside such a verdict
RECORDED_FROM = "recorded_from"


def params_key(params: dict) -> str:
    """Short stable hash of a parameter dict (sorted JSON)."""
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:12]


def cache_file(key: str, params: dict, root: Path | None = None) -> Path:
    """The cache entry of ``params`` under ``key`` (e.g. "hidden/all-MiniLM-L6-v2/lee"); ``root`` defaults
    to the data folder's ``cache/`` (:mod:`identifiability.base.paths`)."""
    return (root or paths.cache_root()) / key / f"{params_key(params)}.safetensors"


def cached_tensors(
    key: str, params: dict, compute: Callable[[], dict[str, torch.Tensor]], root: Path | None = None
) -> dict[str, torch.Tensor]:
    """Return ``compute()``'s tensors, from :func:`cache_file` if present.

    ``params`` is everything the result depends on. A half-written file can never be read back: writes go
    through a rename.
    """
    path = cache_file(key, params, root)
    if path.is_file():
        return load_file(str(path))
    tensors = {k: v.contiguous().cpu() for k, v in compute().items()}
    atomic_write(path, lambda p: save_file(tensors, str(p)))
    write_json(path.with_suffix(".json"), params)
    return tensors
