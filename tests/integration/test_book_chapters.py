"""The book's chapter runs (:func:`identifiability.book.build.execute_chapters`): the chapters side by side on a
local Dask cluster, each executed notebook in place and its results filed; the command's own environment keeps
its thread settings for the chapters it runs afterwards."""

from __future__ import annotations

import os

from identifiability.base import paths
from identifiability.book import build
from identifiability.chapters.contract import CHAPTERS, by_name, results_file

THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def test_chapters_run_side_by_side_on_the_cluster(tiny_model_folder, tmp_path, monkeypatch):
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "data"))
    stems = [by_name("model_and_data").stem, by_name("explore").stem]
    params = {"model": str(tiny_model_folder(3, "tiny3")), "corpus": "lee", "results_dir": str(tmp_path / "results")}
    before = {k: os.environ.get(k) for k in THREADS}
    beside = build.execute_chapters([CHAPTERS[s].source for s in stems], tmp_path / "nb", {**params, "n_sentences": 6})
    assert beside == {stem: build.book_threads(os.cpu_count() or 1)[1] for stem in stems}
    for stem in stems:
        assert (tmp_path / "nb" / f"{stem}.ipynb").is_file()
        assert results_file(tmp_path / "results", stem).is_file()
    assert {k: os.environ.get(k) for k in THREADS} == before
