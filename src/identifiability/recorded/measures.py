"""`make measures`' recorded run: every context-mixing measure scored on at least 50 sentences (chapter 10).

    identifiability record-measures [--model M] [--corpus C] [--n N] [--into DIR] [--scheduler ADDRESS | --workers N]
    make measures

The book's chapter 10 scores a handful of short sentences live; its verdicts need at least
``MEASURES_MIN_SENTENCES`` sentences drawn like C10's sample (in proportion to their tokens,
:mod:`identifiability.recorded.proportional`), whose exact HTA takes about a minute each on the default model. This job
draws them, computes their exact HTA on a Dask cluster into the HTA cache (:mod:`identifiability.runs.corpus_hta`;
an interrupted run resumes there, and a machine that ran ``make record-c10`` already holds the first draws),
runs chapter 10 on them (``sample=proportional``), and records the chapter's scores, seconds per measure and
verdicts, with the rule each claim was judged under, under ``data/recorded/measures/<model>/<corpus>/``.
Chapter 10 shows that record when a build's own run is too small to judge; the job's own run of the chapter
(``sample=proportional``) never reads it, so the verdicts it records are judged on its own scores.

On ``lee_test`` (the text no chapter had read when the rules were frozen) the same job is ``make confirm``'s
second step: it confirms chapter 10's claims as :mod:`identifiability.recorded.confirm` does the others, and its
record names ``make confirm`` (``make_target``, :func:`identifiability.recorded.confirm.measures_target`).

Before any work the job refuses (one line) an ``--n`` below the rules' least number of sentences for the
checkout's record, and a run that would not cover the one recorded there (:func:`design`): a pilot goes
elsewhere with ``--into DIR``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ..base import paths
from ..base.fileio import read_json
from ..chapters.contract import MEASURES, by_role
from ..models import keys
from ..runs import corpus_hta
from ..verdicts.measures import MEASURES_MIN_SENTENCES
from . import store as recorded
from .store import NothingToRecord

JOB = TARGET = "measures"
N_SENTENCES = MEASURES_MIN_SENTENCES  # the rules' least number of scored sentences
TOLERANCE = 1e-6  # exact HTA is deterministic up to float summation order; the other measures too


def sample_texts(model: keys.ModelRef, corpus: str, n: int, seed: int = 0) -> list[str]:
    """The distinct sentences of the first ``n`` draws of C10's sample design on ``corpus``."""
    from ..corpus.corpora import drop_unusable, load_corpus, token_lengths
    from ..models.load import load_model
    from . import proportional

    tok = load_model(model).tokenizer
    corp, _ = drop_unusable(load_corpus(corpus), tok)
    pool = proportional.eligible(token_lengths(corp.sentences, tok))
    return [corp.sentences[i] for i in sorted(set(proportional.draw(pool, n, seed)))]


def design(results: dict) -> dict:
    """What a record covers, for :func:`identifiability.recorded.store.refuse_smaller`: the sentences scored
    and the claims judged."""
    return {"n_scored": int(results.get("n_scored") or 0), "claims": sorted(results.get("claims") or {})}


def check_design(n: int, claims: list[str], key: str, into: Path | None = None) -> None:
    """SmallerDesign (one line) when ``n`` sentences are fewer than the rules need and the record would go to
    the checkout's data/recorded (``into`` None), or would not cover the run recorded at ``key``."""
    if into is None and n < MEASURES_MIN_SENTENCES:
        raise recorded.SmallerDesign(
            f"--n {n} is fewer than the {MEASURES_MIN_SENTENCES} sentences the rules of chapter 10 need, too few for "
            f"the checkout's record: pass --n {MEASURES_MIN_SENTENCES} or more, or write a pilot elsewhere with "
            "--into DIR"
        )
    recorded.refuse_smaller(JOB, key, {"n_scored": n, "claims": claims}, design, into)


def record_measures(
    model: str | keys.ModelRef = paths.DEFAULT_MODEL,
    corpus: str | keys.CorpusRef = paths.DEFAULT_CORPUS,
    n: int = N_SENTENCES,
    seed: int = 0,
    scheduler: str | None = None,
    workers: int | None = None,
    run: bool = True,
    echo: Callable[[str], None] = print,
    into: Path | None = None,
    make_target: str = TARGET,
) -> recorded.Recorded:
    """Exact HTA of the sample on a cluster, chapter 10 on it (unless not ``run``), then the record, in the
    checkout ``into`` (default: this one; :func:`check_design` first). ``model`` and ``corpus``: names, or
    refs the caller resolved already (:func:`identifiability.models.keys.target`); ``make_target``: the make
    target the record names as the one that recomputes it."""
    from ..chapters.execution import run_notebook
    from ..verdicts.claims import load_claims

    t0 = time.time()
    target = keys.target(model, corpus)
    model, corpus = target.model.name, target.corpus.name
    spec = by_role(MEASURES)
    params = {"model": model, "corpus": corpus, "n_sentences": n, "sample": "proportional", "seed": seed}
    # the checkout's state when the chapter starts: a commit made while it runs (it runs long) must not be
    # named as the one that computed it (the modules are what the kernel reports it computed with)
    claims = sorted(c["id"] for c in load_claims() if c["chapter"] == spec.stem)
    check_design(n, claims, target.key, into)
    prov = recorded.provenance(claims, make_target, 0.0)
    if run:
        todo = corpus_hta.uncached(target.model, sample_texts(target.model, corpus, n, seed))
        echo(f"{n} draws of {corpus}; exact HTA of {len(todo)} sentences not in the cache")
        corpus_hta.on_cluster(target.model, todo, 1, scheduler, workers, None, True)
        run_notebook(spec.source, target.build_dir / JOB, params, progress=True)
    path = target.results_dir / f"{spec.stem}.json"
    if not path.is_file():
        raise NothingToRecord(f"no results of {spec.stem} in {path.parent}: run make measures")
    doc = read_json(path)
    results = {k: doc["results"].get(k) for k in ("scores", "seconds", "n_scored", "unsupported", "claims")}
    if doc["params"].get("sample") != "proportional" or (results["n_scored"] or 0) < n:
        raise NothingToRecord(
            f"{path} holds a run of {results['n_scored']} sentences ({doc['params'].get('sample')} sample), not "
            f"the {n} of make measures: run make measures"
        )
    hashes = recorded.claim_hashes()
    results["judged_under"] = {c: hashes[c] for c in results["claims"] or {} if c in hashes}
    results["params"] = {k: v for k, v in doc["params"].items() if k != "results_dir"}
    prov |= {"seconds": time.time() - t0, "corpus": corpus, "model": model}
    prov["hashes"] |= recorded.computed([path], paths.data_root())  # this process's and the chapter kernel's
    rec = recorded.record(JOB, target.key, results, prov, TOLERANCE, into, echo, design)
    where = recorded.folder(rec.job, rec.key, into)
    echo(f"recorded chapter 10's scores on {results['n_scored']} sentences in {where}")
    return rec


def partial(rec: recorded.Recorded) -> str | None:
    """One line saying why chapter 10 cannot show the recorded run ``rec`` (its numbers missing, unreadable or
    fewer sentences than the rules need: "not run in this build" and the command), or None when it can."""
    r = rec.results
    n, rows = r.get("n_scored"), r.get("scores")
    need = {"measure", "reference", "layer", "variant", "statistic"}  # what studies.measures.scores_from_rows reads
    if not isinstance(rows, list) or not all(isinstance(row, dict) and need <= set(row) for row in rows):
        bad = "its scores are missing or unreadable"
    else:
        bad = "no scores" if not rows else "no seconds per measure" if not isinstance(r.get("seconds"), dict) else ""
    if not bad and (not isinstance(n, int) or n < MEASURES_MIN_SENTENCES):
        bad = f"{n} sentences scored, fewer than the rules' {MEASURES_MIN_SENTENCES}"
    if not bad:
        return None
    return recorded.partial_line(rec, bad, TARGET)


def find(
    model: str | keys.ModelRef = paths.DEFAULT_MODEL,
    corpus: str | keys.CorpusRef = paths.DEFAULT_CORPUS,
    make_target: str = TARGET,
) -> recorded.Recorded | None:
    """The recorded run of ``model`` on ``corpus`` (names, or refs resolved already), if any; an unreadable one
    is one line naming ``make_target``."""
    return recorded.find(JOB, keys.target(model, corpus).key, make_target)


def to_show(n_scored: int, sample: str, target: keys.Target) -> tuple[recorded.Recorded | None, str | None]:
    """(the recorded run chapter 10 shows in place of its own scores, or None; the line it says instead of a
    partial record, or None). Nothing is shown from a record when the chapter's own run can be judged (at least
    ``MEASURES_MIN_SENTENCES`` scored) or is the recording job's own run (``sample`` "proportional": what it
    records is judged on its own scores, never carried over), or when nothing is recorded."""
    if sample == "proportional" or n_scored >= MEASURES_MIN_SENTENCES:
        return None, None
    rec, why = recorded.for_page(lambda: find(target.model, target.corpus), partial)  # unreadable or partial: a line
    return (None, why) if why else (rec, None)
