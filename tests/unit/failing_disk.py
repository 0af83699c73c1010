"""A folder where new files fail as the system fails them: read-only (EROFS) or full (ENOSPC)."""

from __future__ import annotations

import os
from pathlib import Path


def refuse_new_files(monkeypatch, folder: Path, code: int) -> None:
    """New files under ``folder`` fail with ``code`` (errno.EROFS: a read-only file system, errno.ENOSPC: a full
    one). Simulated, because the tests may run as root, whom a folder's permissions do not stop."""
    real = os.open

    def open_(path, flags, *args, **kwargs):
        if flags & os.O_CREAT and Path(os.fsdecode(path)).is_relative_to(folder):
            raise OSError(code, os.strerror(code), os.fsdecode(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
