"""`make confirm`'s recorded run: every claim judged under the frozen rules on text no chapter had seen.

    identifiability record-confirm [--model M] [--corpus lee_test] [--no-run] [--into DIR]
    make confirm

Every amendment of a rule was made after the default build's numbers were seen. ``lee_test`` (the 148 sentences
of the Lee corpus's test file, which no chapter's default run reads) is text the amended rules never saw:
``make confirm`` runs the judging chapters on it with :data:`PARAMS` (what 148 sentences support) and this job
records, under ``data/recorded/confirm/<model key>/<corpus>/``, each claim's verdict there (and on the untrained
twin), the chapters' parameters, and the hash of the rule each claim was judged under
(:func:`identifiability.recorded.store.claim_hashes` when the job runs, right after the chapters). The claims page
compares that verdict with the default build's and marks a claim whose rule changed after the freeze
(``data/frozen_rules.csv``) as not confirmed (:func:`confirmation`). The job refuses (one line), before the
chapters run and again before it writes, a run that would not cover the one recorded (:func:`design`:
chapters or claims missing); a pilot goes elsewhere with ``--into DIR``.

Chapter 10's claims (C22-C27) need the exact HTA of a sample of their own, too heavy for this job: ``make
confirm`` records them with ``make measures`` on the same corpus (:mod:`identifiability.recorded.measures`,
``data/recorded/measures/<model key>/lee_test/``, naming ``make confirm``: :func:`measures_target`), and
:func:`records` gives the claims page both runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..base import paths
from ..base.fileio import read_json
from ..chapters.contract import CHAPTERS
from ..models import keys
from ..verdicts.core import verdict_label
from . import store as recorded
from .store import NothingToRecord

JOB = TARGET = "confirm"
CORPUS = "lee_test"
TOLERANCE = 1e-9  # the results are the chapters' recorded verdicts: a rerun on one machine is identical
# What lee_test's 148 sentences support, by chapter name (each chapter's ``confirm`` in the contract): 71 of
# them are longer than d_v + 2 = 34 tokens (chapter 3's attention mass), 144 have at most 64 tokens (chapters 4
# and 5: 70/15/15, 21 test sentences); no second corpus (polarity is not new text here). Chapter 3's sentence
# pairs (C5's middle separator) come from lee_pairs, which the default build reads: C5 and C18 are confirmed
# on new single sentences only.
PARAMS: dict[str, dict[str, object]] = {c.name: c.confirm for c in CHAPTERS.values() if c.confirm is not None}


def gather(results_dir: Path) -> dict:
    """{"claims": {id: verdict as the chapter recorded it}, "twin_claims": {id: the untrained twin's}, "params":
    {stem: the chapter's parameters}, "judged_under": {id: hash of its rule now}} from the judging chapters'
    results files in ``results_dir``."""
    out: dict = {"claims": {}, "twin_claims": {}, "params": {}}
    for stem, spec in CHAPTERS.items():
        path = results_dir / f"{stem}.json"
        if spec.name not in PARAMS or not path.is_file():
            continue
        doc = read_json(path)
        res = doc.get("results", {})
        out["claims"] |= res.get("claims", {})
        out["twin_claims"] |= res.get("twin_claims", {})
        out["params"][stem] = {k: v for k, v in doc.get("params", {}).items() if k != "results_dir"}
    if not out["claims"]:
        raise NothingToRecord(f"no chapter results with verdicts in {results_dir}: run make confirm")
    hashes = recorded.claim_hashes()
    out["judged_under"] = {c: hashes[c] for c in out["claims"] if c in hashes}
    return out


def design(results: dict) -> dict:
    """What a record covers, for :func:`identifiability.recorded.store.refuse_smaller`: the chapters that ran
    and the claims judged."""
    return {"chapters": sorted(results.get("params") or {}), "claims": sorted(results.get("claims") or {})}


def run_chapters(target: keys.Target, progress: bool = True) -> list[Path]:
    """Execute the judging chapters on ``target``'s corpus with :data:`PARAMS` (every parameter checked first,
    before anything runs); their results go to ``target.results_dir``; returns the executed notebooks."""
    from ..chapters.contract import by_name, check_parameters, preflight
    from ..chapters.execution import run_notebook

    model, corpus = target.model.name, target.corpus.name
    runs = [(by_name(name).source, {"model": model, "corpus": corpus, **p}) for name, p in PARAMS.items()]
    for source, params in runs:
        check_parameters([source], params)
        preflight([source], params, model=target.model)
    out = target.build_dir / "confirm"
    return [run_notebook(source, out, params, progress=progress) for source, params in runs]


def record_confirm(
    model: str | keys.ModelRef = paths.DEFAULT_MODEL,
    corpus: str | keys.CorpusRef = CORPUS,
    run: bool = True,
    echo: Callable[[str], None] = print,
    into: Path | None = None,
) -> recorded.Recorded:
    """Run the judging chapters on ``corpus`` (unless not ``run``: their results are already there), gather
    their verdicts (:func:`gather`, from the target's ``results_dir``) and record them. ``model`` and ``corpus``:
    names, or refs the caller resolved already (:func:`identifiability.models.keys.target`); the record goes
    to the checkout ``into`` (default: this one)."""
    t0 = time.time()
    target = keys.target(model, corpus)
    model, corpus = target.model.name, target.corpus.name
    stems = sorted(stem for stem, spec in CHAPTERS.items() if spec.name in PARAMS)  # what gather will read
    recorded.refuse_smaller(JOB, target.key, {"chapters": stems}, design, into)
    if run:
        run_chapters(target)
    folder = target.results_dir
    results = gather(folder)
    kernels = [folder / f"{stem}.json" for stem in results["params"]]  # the results files gather read
    prov = recorded.provenance(sorted(results["claims"]), TARGET, time.time() - t0, kernels=kernels)
    prov |= {"corpus": corpus, "model": model}
    rec = recorded.record(JOB, target.key, results, prov, TOLERANCE, into, echo, design)
    echo(f"recorded {len(results['claims'])} verdicts on {corpus} in {recorded.folder(rec.job, rec.key, into)}")
    return rec


def find(
    model: str | keys.ModelRef = paths.DEFAULT_MODEL, corpus: str | keys.CorpusRef = CORPUS
) -> recorded.Recorded | None:
    """The recorded run of ``model`` on ``corpus`` (names, or refs resolved already), if any."""
    return recorded.find(JOB, keys.target(model, corpus).key, TARGET)


def records(model: str | keys.ModelRef = paths.DEFAULT_MODEL) -> list[tuple[recorded.Recorded | None, str | None]]:
    """The two recorded runs of ``make confirm`` on :data:`CORPUS` as the claims page reads them (this job's,
    then chapter 10's ``make measures`` on the same corpus), each as (the run or None, the line said instead of
    an unreadable or partial run or None): :func:`identifiability.recorded.store.for_page`."""
    from . import measures

    return [
        recorded.for_page(lambda: find(model), partial),
        recorded.for_page(lambda: measures.find(model, CORPUS, TARGET), measures.partial),
    ]


def measures_target(corpus: str) -> str:
    """The make target that records chapter 10 on ``corpus`` (:mod:`identifiability.recorded.measures`): this
    one on the confirmation text, whose second step it is, ``make measures`` on any other."""
    from .measures import TARGET as MEASURES

    return TARGET if corpus == CORPUS else MEASURES


def partial(rec: recorded.Recorded) -> str | None:
    """One line saying what the claims page cannot read of the recorded run ``rec`` (no verdicts, or verdicts
    without their numbers: "not run in this build" and the command), or None when it reads them all."""
    claims = rec.results.get("claims")
    broken = sorted(c for c, v in (claims or {}).items() if not isinstance(v, dict) or "verdict" not in v)
    bad = "no verdicts" if not isinstance(claims, dict) or not claims else f"no verdict of {', '.join(broken)}"
    if claims and not broken:
        return None
    return recorded.partial_line(rec, bad, TARGET)


def confirmation(claim: str, build_verdict: str | None, recs: Sequence[recorded.Recorded | None]) -> dict | None:
    """What the claims page shows for ``claim`` from the first confirmation run of ``recs`` (:func:`records`'
    runs; None where there is none) that judged it: {"verdict": its verdict there, "agrees": whether it equals
    the default build's ``build_verdict`` (None when that was not measured), "rules_agree": whether the original
    and amended rules agree there (None when the claim was never amended), "frozen": whether it was judged under
    the frozen rule}; None when no run has a verdict for it."""
    found = [(r, (r.results.get("claims") or {}).get(claim)) for r in recs if r is not None]
    # not there, or partial (:func:`partial` says so)
    rec, v = next(((r, v) for r, v in found if isinstance(v, dict) and "verdict" in v), (None, None))
    if rec is None:
        return None
    original = v.get("original")
    frozen = recorded.confirmable({claim: rec.results.get("judged_under", {}).get(claim, "")})[claim]
    return {
        "verdict": v["verdict"],
        "label": verdict_label(v),
        "agrees": None if build_verdict is None else v["verdict"] == build_verdict,
        "rules_agree": None if not original else original["verdict"] == v["verdict"],
        "frozen": frozen,
    }
