"""Files written so that no reader ever sees half of one, and JSON read and written one way.

Imports nothing of the package: every module that writes a file (results, caches, run manifests, model
folders and checkpoints, the file-hash store) writes it through :func:`atomic_write`, the one writer that
gives a new file the mode the umask allows (0o666 & ~umask), as any other program's new file gets; a folder a
library writes whole (``save_pretrained``) goes through :func:`write_folder`, file by file.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write`` on a temporary file beside ``path``, then rename it to ``path`` (parents are made)."""
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


def write_folder(folder: Path, write: Callable[[Path], None]) -> None:
    """Call ``write`` on a new hidden folder beside ``folder`` (it may write any files there, as
    ``save_pretrained`` does), then move each file it wrote into ``folder`` through :func:`atomic_write`
    (safetensors writes its files private, 0600, whatever the umask)."""
    folder.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".tmp"))
    try:
        write(staged)
        for f in sorted(p for p in staged.rglob("*") if p.is_file()):
            atomic_write(folder / f.relative_to(staged), lambda tmp, f=f: os.replace(f, tmp))
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def jsonable(obj):
    """``obj`` with tensors, numpy scalars and tuples turned into JSON values, and NaN or infinity into None."""
    torch = sys.modules.get("torch")  # no tensor exists unless torch was imported; writing JSON need not import it
    if torch is not None and isinstance(obj, torch.Tensor):
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
    """Write ``data`` (through :func:`jsonable`) as indented JSON with sorted keys, atomically."""
    path = Path(path)
    text = json.dumps(jsonable(data), indent=1, sort_keys=True)
    atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))
    return path


def read_json(path: str | Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))
