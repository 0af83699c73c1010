"""Executing a chapter: its source run with papermill into a hidden notebook, cleaned, then put in place."""

from __future__ import annotations

import os
from pathlib import Path

from ..base import paths, stops
from ..base.cluster import allocator_env
from ..base.errors import ChapterFailed
from .contract import coerce_parameters
from .executed import clean_executed
from .parameters import declared_parameters


def run_notebook(source: Path, out_dir: Path, parameters: dict, progress: bool = True, strict: bool = True) -> Path:
    """Execute one jupytext notebook with papermill; returns the executed .ipynb path, cleaned
    (:func:`identifiability.chapters.executed.clean_executed`: one parameters cell with the values used, no stderr).

    The kernel runs in the checkout and inherits this process's data folder (``IDENTIFIABILITY_DATA``), so a
    chapter files its results where this command looks for them, and the allocator settings of
    :data:`identifiability.base.cluster.ALLOCATOR_ENV`.
    """
    import jupytext
    import papermill

    params = coerce_parameters(source, parameters, strict)
    os.environ.setdefault(paths.DATA_ENV, str(paths.data_root()))
    os.environ.update(allocator_env())  # the kernel's allocator (cluster.ALLOCATOR_ENV); a user's own values stay
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{source.stem}.ipynb"
    nb = jupytext.read(source)
    # a hidden file until the chapter ends; Ctrl-C or a dead kernel leave the previous notebook
    # (identifiability.base.stops)
    with stops.executing(source, target, {**declared_parameters(source), **params}) as partial:
        try:
            papermill.execute_notebook(
                nb,
                str(partial),
                parameters=params,
                kernel_name="python3",
                progress_bar=progress,
                cwd=str(paths.source_root()),
                **stops.KERNEL_OPTIONS,
            )
        except papermill.PapermillExecutionError as e:
            last = (str(e.evalue).strip().splitlines() or [""])[-1]
            raise ChapterFailed(f"{source.stem} stopped: {e.ename}: {last} (full traceback in {target})") from None
        clean_executed(partial)
    return target
