"""Exact HTA at corpus scale, spread over a Dask cluster, into the cache chapter 6 reads.

    identifiability hta --model M --corpus C [--n N] [--scheduler tcp://host:8786 | --workers N]

One task per group of sentences (:func:`hta_job`); each sends back the very per-sentence cache entries
chapter 6 reads (:func:`identifiability.hta.cache_params`), which the client writes into its own cache
(:func:`file_entries`), so that workers need no shared data folder. The cluster is the sweep's
(:mod:`identifiability.base.cluster`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..base import cluster, paths
from ..base.errors import SweepError
from ..base.fileio import atomic_write
from ..chapters.contract import CORPUS_HTA, by_role
from ..chapters.parameters import declared_parameters
from ..models import keys

_MODELS: dict[str, object] = {}  # per worker process: one load per model, not one per task


def _worker_model(model: str):
    from ..models.load import load_model

    if model not in _MODELS:
        _MODELS[model] = load_model(model)
    return _MODELS[model]


def hta_group(model: str, texts: list[str], data_root: str | None = None) -> dict:
    """Exact HTA of ``texts`` into the per-sentence cache of the worker's data folder (``data_root``, else its
    own); returns their cache entries, ``{path below the cache folder: bytes}`` under ``entries``, for the
    client to write into its own cache."""
    import torch

    from ..base.results import cache_file
    from ..hta import cache_folder, cache_params, hta_corpus

    if data_root:
        os.environ[paths.DATA_ENV] = data_root
    if os.environ.get("OMP_NUM_THREADS") == "1":
        torch.set_num_threads(1)
    t0 = time.time()
    lm = _worker_model(model)
    hta_corpus(lm, texts, mode="exact", cache=True, progress=False)
    entries = {}
    for text in texts:
        f = cache_file(cache_folder(lm.key), cache_params(lm.content_key, text))
        for part in (f.with_suffix(".json"), f):  # the tensors last: an entry exists once they do
            entries[part.relative_to(paths.cache_root()).as_posix()] = part.read_bytes()
    return {"sentences": len(texts), "seconds": time.time() - t0, "entries": entries}


def file_entries(entries: dict[str, bytes], root: Path) -> None:
    """Write cache entries a worker sent (:func:`hta_group`) under the cache folder ``root``, each through a
    rename, in their order (an entry's tensors last)."""
    for rel, data in entries.items():
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise ValueError(f"a cache entry outside the cache folder: {rel}")
        atomic_write(root / rel, lambda p, data=data: p.write_bytes(data))


HTA_MIN_TOKENS = 3  # chapter 6's corpus sample: a token besides the two special ones


def job_sentences(
    model: keys.ModelRef, corpus: str, n: int, seed: int, max_tokens: int, min_tokens: int = HTA_MIN_TOKENS
) -> list[str]:
    """The sentences chapter 6's corpus statistics use for these parameters (the same seeded sample)."""
    from ..chapters.preflight import model_info
    from ..corpus.corpora import drop_unusable, load_corpus, sample_sentences

    tok = model_info(model).tokenizer
    corp, _ = drop_unusable(load_corpus(corpus), tok)
    return sample_sentences(corp, n, seed, tok, min_tokens=min_tokens, max_tokens=max_tokens)


def hta_job(
    model: str | keys.ModelRef,
    corpus: str,
    n: int | None = None,
    seed: int | None = None,
    max_tokens: int | None = None,
    group: int = 1,
    scheduler: str | None = None,
    workers: int | None = None,
    client=None,
    progress: bool = True,
) -> dict:
    """Exact HTA for the sentences chapter 6 would study (defaults: its ``n_sentences``, ``max_tokens`` and
    ``seed``), ``group`` sentences per task, into the cache chapter 6 reads (``-p exact_all=True`` then
    costs nothing). Sentences already cached are not sent. Returns counts and seconds. ``model``: a name, or
    one the caller resolved already (:func:`identifiability.models.keys.model_ref`)."""
    defaults = declared_parameters(by_role(CORPUS_HTA).source)
    n = defaults["n_sentences"] if n is None else n
    seed = defaults["seed"] if seed is None else seed
    max_tokens = defaults["max_tokens"] if max_tokens is None else max_tokens
    for name, value in (("--n", n), ("--max-tokens", max_tokens), ("--group", group)):
        if value < 1:
            raise SweepError(f"{name} must be at least 1, got {value}")
    model = keys.model_ref(model)
    texts = job_sentences(model, corpus, n, seed, max_tokens)
    t0 = time.time()
    todo = uncached(model, texts)
    done = on_cluster(model, todo, group, scheduler, workers, client, progress)
    return {
        "sentences": len(texts),
        "computed": done,
        "cached_before": len(texts) - len(todo),
        "seconds": time.time() - t0,
    }


def uncached(model: keys.ModelRef, texts: list[str]) -> list[str]:
    """The ``texts`` whose exact HTA is not in the cache yet, by the keys hta_corpus uses."""
    from ..base.results import cache_file
    from ..hta import cache_folder, cache_params

    ckey, folder = model.content_key, cache_folder(model.key)
    return [t for t in texts if not cache_file(folder, cache_params(ckey, t)).is_file()]


def on_cluster(
    model: keys.ModelRef,
    todo: list[str],
    group: int,
    scheduler: str | None,
    workers: int | None,
    client,
    progress: bool,
) -> int:
    """Exact HTA of ``todo`` on a Dask cluster, ``group`` sentences per task, into this machine's cache
    (each finished task's entries written at once, so an interrupted job resumes where it stopped). The
    workers load ``model`` by its name: each is a process of its own, which resolves it once for itself."""
    from distributed import as_completed
    from tqdm import tqdm

    groups = [todo[i : i + group] for i in range(0, len(todo), group)]
    done = 0
    if groups:
        own = client is None
        client = client or cluster.connect(scheduler, workers)
        try:
            data_root = cluster.local_data(client)
            futures = [client.submit(hta_group, model.name, g, data_root, retries=1, pure=False) for g in groups]
            bar = tqdm(total=len(todo), desc="exact HTA", unit="sentence", disable=not progress)
            for fut in as_completed(futures):
                out = fut.result()
                file_entries(out["entries"], paths.cache_root())
                done += out["sentences"]
                bar.update(out["sentences"])
            bar.close()
        finally:
            cluster.close(client, own)
    return done
