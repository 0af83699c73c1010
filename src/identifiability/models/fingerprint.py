"""A model is its files: checking a model folder before it is loaded, and its content key.

The content key is the one identity every entry point uses (``run``, ``book``, the sweep, the provenance of
fine-tuned models): a SHA-256 over every weight file the model loads (one ``model.safetensors`` or all the
shards its index names), its ``config.json`` and its tokenizer files, each with its name. Two folders with
the same base name but different weights never share a cache entry or a results folder, and a folder
re-saved with new weights is never served old caches. Hashing a file is cached by (path, size, mtime), so
a folder is read once, not once per chapter.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import struct
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.errors import UserError, one_line
from ..base.fileio import read_json, write_json
from ..base.paths import cache_root

if TYPE_CHECKING:  # transformers loads when a model is checked, not with this module
    from transformers import PretrainedConfig

CONFIG = "config.json"
SINGLE_WEIGHTS = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
# Files a tokenizer may be saved as; a folder needs tokenizer_config.json or a vocabulary/merges/model file.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "added_tokens.json",
)
_VOCABULARY = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model")


class ModelNotAvailable(UserError, OSError):
    """A model that cannot be loaded; the message is one line that says what to do."""


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files the model in ``folder`` loads: one file, or every shard its index names."""
    folder = Path(folder)
    if (folder / SINGLE_WEIGHTS).is_file():
        return [folder / SINGLE_WEIGHTS]
    index = folder / WEIGHTS_INDEX
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (ValueError, KeyError) as e:
            raise ModelNotAvailable(
                f"{index} is not a valid safetensors index (no weight_map): re-save the model"
            ) from e
        missing = [s for s in shards if not (folder / s).is_file()]
        if missing:
            raise ModelNotAvailable(
                f"{folder / missing[0]} is missing ({len(missing)} of {len(shards)} shards named "
                f"by {WEIGHTS_INDEX}): copy the whole model folder"
            )
        return [folder / s for s in shards]
    return []


def _header(path: Path) -> tuple[int, int, set[str]]:
    """(header bytes, end of the data the header declares, tensor names) of a safetensors file; only its
    header is read. ModelNotAvailable with one line naming it when the header is unreadable."""
    size = path.stat().st_size
    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > size - 8:
                raise ValueError
            header = json.loads(f.read(n))
        tensors = {k: v for k, v in header.items() if k != "__metadata__"}
        end = max((v["data_offsets"][1] for v in tensors.values()), default=0)
    except (struct.error, ValueError, KeyError, TypeError, IndexError, AttributeError, UnicodeDecodeError):
        raise ModelNotAvailable(
            f"{path} is not a valid safetensors file (unreadable header, {size} bytes): download or save it again"
        ) from None
    return n, end, set(tensors)


def check_safetensors(path: Path) -> None:
    """Refuse a truncated or corrupt safetensors file with one line naming it (size found vs size declared)."""
    size = path.stat().st_size
    n, end, _ = _header(path)
    if size != 8 + n + end:
        raise ModelNotAvailable(
            f"{path} is truncated or corrupt: {size} bytes found, {8 + n + end} declared by its "
            "header; download or save it again"
        )


def check_folder(folder: Path) -> list[Path]:
    """Check that ``folder`` holds a loadable model; return the files that define it (config, weights,
    tokenizer). Raises ModelNotAvailable with one line naming the missing or damaged file."""
    folder = Path(folder)
    if not any(folder.iterdir()):
        raise ModelNotAvailable(
            f"model folder {folder} is empty: it needs config.json, model.safetensors and the "
            "tokenizer files (save_pretrained writes them)"
        )
    if not (folder / CONFIG).is_file():
        raise ModelNotAvailable(
            f"{folder / CONFIG} is missing: a model folder needs its config (save_pretrained writes it)"
        )
    weights = weight_files(folder)
    if not weights:
        other = sorted(p.name for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".ckpt", ".h5"))
        hint = (
            f" ({other[0]} is there, but pickled weights are never opened: convert a file you trust with safetensors)"
            if other
            else ""
        )
        raise ModelNotAvailable(f"{folder / SINGLE_WEIGHTS} is missing{hint}; only safetensors weights are loaded")
    for w in weights:
        check_safetensors(w)
    if not any((folder / f).is_file() for f in _VOCABULARY):
        raise ModelNotAvailable(
            f"{folder} has no tokenizer files (tokenizer.json or a vocabulary): save the "
            "tokenizer next to the model (tokenizer.save_pretrained(folder))"
        )
    tokenizer = [folder / f for f in TOKENIZER_FILES if (folder / f).is_file()]
    return [
        folder / CONFIG,
        *weights,
        *([folder / WEIGHTS_INDEX] if (folder / WEIGHTS_INDEX).is_file() else []),
        *tokenizer,
    ]


def check_encoder_tensors(folder: Path, config: PretrainedConfig) -> None:
    """ModelNotAvailable with one line naming a missing tensor when the weight files of ``folder`` lack (or
    misname) a tensor of the encoder ``config`` describes, before any chapter loads it. Only the files'
    headers are read; the names expected are those of the model built from ``config`` on the meta device
    (no memory, no initialisation). Tolerated, as loading tolerates them: a prefix such as ``bert.`` (a
    fine-tuned folder saves its task model), tensors beyond the encoder (heads), buffers (position ids are
    made, not loaded), the pooler (not studied) and the legacy LayerNorm names ``gamma``/``beta``."""
    import torch
    from transformers import AutoModel

    try:
        with torch.device("meta"):
            model = AutoModel.from_config(config, attn_implementation="eager")
    except Exception as e:  # a config transformers reads but cannot build a model of (heads not dividing d)
        raise ModelNotAvailable(
            f"{folder / CONFIG} describes no model transformers can build: {one_line(e)}; correct that file, or "
            "save the model again (save_pretrained writes it)"
        ) from None
    expected = {name for name, _ in model.named_parameters()}
    prefix = f"{model.base_model_prefix}."
    have = set()
    for name in set().union(*(_header(w)[2] for w in weight_files(folder))):
        name = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", name))
        have.add(name[len(prefix) :] if name not in expected and name.startswith(prefix) else name)
    ignored = [re.compile(p) for p in getattr(model, "_keys_to_ignore_on_load_missing", None) or ()]
    missing = sorted(
        n for n in expected - have if not n.startswith("pooler.") and not any(p.search(n) for p in ignored)
    )
    if missing:
        close = difflib.get_close_matches(missing[0], sorted(have - expected), n=1, cutoff=0.8)
        instead = f", the weights have {close[0]} instead" if close else ""
        raise ModelNotAvailable(
            f"the weights in {folder} lack {len(missing)} of the {len(expected)} tensors of the {config.model_type} "
            f"encoder its config.json describes (e.g. {missing[0]}{instead}): pass the folder the model was saved "
            "to, or save it again with save_pretrained"
        )


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, remembered by (absolute path, size, mtime) in the data folder's cache."""
    path = Path(path).resolve()
    st = path.stat()
    stamp = f"{path}|{st.st_size}|{st.st_mtime_ns}"
    store = cache_root() / "file_hashes.json"
    known = {}
    if store.is_file():
        try:
            known = read_json(store)
        except ValueError:
            known = {}  # a damaged cache is recomputed, never trusted
    if stamp in known:
        return known[stamp]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    known[stamp] = h.hexdigest()
    try:
        write_json(store, known)
    except OSError:
        pass  # a read-only data folder only costs a re-hash next time
    return known[stamp]


def content_key(files: list[Path]) -> str:
    """SHA-256 over (file name, file SHA-256) of the files that define a model, in name order."""
    h = hashlib.sha256()
    for f in sorted(files, key=lambda p: p.name):
        h.update(f"{f.name}\0{file_sha256(f)}\n".encode())
    return h.hexdigest()


def folder_key(folder: str | os.PathLike) -> str:
    """The content key of a model folder (after :func:`check_folder`)."""
    return content_key(check_folder(Path(folder)))
