"""Results files and caches, keyed by model + corpus + parameters, written atomically.

Tensors are cached with safetensors and metadata with JSON: nothing here ever unpickles.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from . import paths


def params_key(params: dict) -> str:
    """Short stable hash of a parameter dict (sorted JSON)."""
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        # mkstemp makes the file private (0600), and some writers replace it; results are meant to be shared
        # as the umask allows
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def jsonable(obj):
    """``obj`` with tensors, numpy scalars and tuples turned into JSON values, and NaN or infinity into None."""
    if isinstance(obj, torch.Tensor):
        return jsonable(obj.tolist())
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def write_json(path: str | Path, data: dict) -> Path:
    path = Path(path)
    text = json.dumps(jsonable(data), indent=1, sort_keys=True)
    atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))
    return path


def read_json(path: str | Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def cached_tensors(
    key: str, params: dict, compute: Callable[[], dict[str, torch.Tensor]], root: Path | None = None
) -> dict[str, torch.Tensor]:
    """Return ``compute()``'s tensors, from ``root/key/<hash of params>.safetensors`` if present.

    ``key`` names what is cached (e.g. "hidden/all-MiniLM-L6-v2/lee"); ``params`` is everything the
    result depends on; ``root`` defaults to the data folder's ``cache/`` (:mod:`identifiability.paths`). A
    half-written file can never be read back: writes go through a rename.
    """
    path = (root or paths.cache_root()) / key / f"{params_key(params)}.safetensors"
    if path.is_file():
        return load_file(str(path))
    tensors = {k: v.contiguous().cpu() for k, v in compute().items()}
    atomic_write(path, lambda p: save_file(tensors, str(p)))
    write_json(path.with_suffix(".json"), params)
    return tensors


def load_claims() -> list[dict]:
    """The paper's and the review's claims (data/claims.csv), one dict per row."""
    import csv

    with open(paths.claims_file(), newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def claims_table(results_dir: str | Path) -> list[dict]:
    """Each claim of data/claims.csv with the verdict its chapter recorded in ``results_dir``: the fields of
    :class:`identifiability.verdicts.Verdict` (``verdict`` is "not measured" where the chapter has not run)."""
    rows = []
    for claim in load_claims():
        path = Path(results_dir) / f"{claim['chapter']}.json"
        measured = read_json(path)["results"].get("claims", {}).get(claim["id"]) if path.is_file() else None
        # the csv's fields win: a verdict's own ``claim`` field is its id, not the claim's text
        rows.append({**(measured or {"verdict": "not measured"}), **claim})
    return rows
