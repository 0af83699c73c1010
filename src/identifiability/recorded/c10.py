"""C10's recorded run (rule version 3): exact HTA of a sample drawn in proportion to the sentences' tokens.

    identifiability record-c10 [--model M] [--corpus C] [--n N] [--seed S] [--into DIR]
                               [--scheduler ADDRESS | --workers N]
    make record-c10 [MODEL=...] [CORPUS=...]

Draws the sample (:mod:`identifiability.recorded.proportional`; n by its rule unless ``--n``), runs exact HTA of each
distinct drawn sentence once on a Dask cluster (:mod:`identifiability.runs.corpus_hta`: a LocalCluster by default;
each finished sentence lands in the HTA cache, so an interrupted run resumes where it stopped), reads the
results back, and records per sentence its length, its shares of hidden tokens whose largest contributor at
the last layer is their own input token (all, words, special) and 1/d_s, with the draws, under
``data/recorded/c10/<model>/<corpus>/`` (:mod:`identifiability.recorded.store`). Chapter 6 rebuilds C10's
evidence from those per-sentence numbers. Before any work it refuses (one line) a run that would not cover
the one recorded (:func:`design`: fewer draws, another seed, model or corpus; a pilot goes elsewhere with
``--into DIR``); before replacing a recorded run it prints what moved.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..models import keys
from ..runs import corpus_hta
from . import proportional
from . import store as recorded

TOLERANCE = 1e-6  # exact HTA is deterministic up to float summation order


def design(results: dict) -> dict:
    """What a record covers, for :func:`identifiability.recorded.store.refuse_smaller`: its draws (a larger n
    extends the same sample), seed, model and corpus."""
    return {k: results.get(k) for k in ("n", "seed", "model", "corpus")}


def record_c10(
    model: str | keys.ModelRef,
    corpus: str | keys.CorpusRef,
    n: int | None = None,
    seed: int = 0,
    group: int = 1,
    scheduler: str | None = None,
    workers: int | None = None,
    client=None,
    progress: bool = True,
    echo: Callable[[str], None] = print,
    source: Path | None = None,
    into: Path | None = None,
) -> recorded.Recorded:
    """Draw C10's sample of ``corpus`` (``n`` draws, default :func:`proportional.sentences_needed`), compute
    and record it under the checkout ``into`` (default ``source``, whose lock and rules the provenance names;
    default this one); returns the recorded run. ``model`` and
    ``corpus``: names, or refs the caller resolved already (:func:`identifiability.models.keys.target`)."""
    from ..corpus.corpora import drop_unusable, load_corpus, token_lengths
    from ..hta import hta_corpus
    from ..models.load import load_model

    t0 = time.time()
    target = keys.target(model, corpus)
    model, corpus = target.model.name, target.corpus.name
    n = n or proportional.sentences_needed()
    new = {"n": n, "seed": seed, "model": target.model.key, "corpus": target.corpus.key}
    dest = into or source
    recorded.refuse_smaller(proportional.C10_JOB, target.key, new, design, dest)
    lm = load_model(target.model)
    corp, _ = drop_unusable(load_corpus(corpus), lm.tokenizer)
    pool = proportional.eligible(token_lengths(corp.sentences, lm.tokenizer))
    draws = proportional.draw(pool, n, seed)
    distinct = sorted(set(draws))
    texts = [corp.sentences[i] for i in distinct]
    todo = corpus_hta.uncached(target.model, texts)
    echo(
        f"C10's sample of {corpus}: {n} draws, {len(distinct)} distinct sentences of up to {pool.max_tokens} "
        f"tokens ({pool.covered:.1%} of the corpus's hidden tokens eligible); {len(texts) - len(todo)} cached"
    )
    corpus_hta.on_cluster(target.model, todo, group, scheduler, workers, client, progress)
    results = hta_corpus(lm, texts, mode="exact", cache=True, progress=False)
    rows = {i: {"text": t, **proportional.sentence_row(r)} for i, t, r in zip(distinct, texts, results)}
    got = proportional.shares(rows, draws, seed)
    share = got["all"]
    half = (share.high - share.low) / 2
    sd = float(np.std([rows[i]["share"] for i in draws], ddof=1)) if n > 1 else float("nan")
    out = {
        "model": target.model.key,
        "corpus": target.corpus.key,
        "seed": seed,
        "n": n,
        "percentile": proportional.PERCENTILE,
        "eligible": {
            "max_tokens": pool.max_tokens,
            "sentences": len(pool.indices),
            "covered": pool.covered,
            "corpus_sentences": pool.corpus_sentences,
            "corpus_tokens": pool.corpus_tokens,
        },
        "draws": draws,
        "sentences": {str(i): row for i, row in rows.items()},
        "summary": {
            **{k: None if (x := got[k]) is None else [x.estimate, x.low, x.high] for k in ("all", "words", "special")},
            "chance": got["chance"],
            "half_width": half,
            "sd": sd,
        },
    }
    make = proportional.record_command(model, corpus).removeprefix("make ")  # with MODEL=, CORPUS= if not default
    prov = recorded.provenance(["C10"], make, time.time() - t0, source)
    prov["cached"] = {"items": len(texts) - len(todo), "of": len(texts)}  # its time covers the others alone
    rec = recorded.record(proportional.C10_JOB, target.key, out, prov, TOLERANCE, dest, echo, design)
    where = recorded.folder(rec.job, rec.key, dest)
    echo(f"C10: share {share} over {n} draws; half-width {half:.4f}; recorded in {where}")
    if half > proportional.HALF_WIDTH:
        need = proportional.sentences_needed(sd) if np.isfinite(sd) else "more"
        echo(
            f"the half-width {half:.4f} exceeds {proportional.HALF_WIDTH}: rerun with --n {need} (the same draws, "
            "extended; cached sentences are not recomputed)"
        )
    return rec
