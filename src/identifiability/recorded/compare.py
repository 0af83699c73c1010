"""`make compare`'s recorded run: the chapter results chapter 9's comparison reads, filed with their provenance.

    identifiability record-compare [--base M] [--data DIR] [--checkout DIR] [--into DIR] [--seed S]
                                   [--started EPOCH | --seconds S]
    make compare   (its last step, before the book)

``make compare`` fine-tunes the reference model and runs chapters 3, 4 and 6 on it, on every fine-tune and
on the random-initialisation control, too heavy for a book build. This job gathers, from the
data folder, the chapter results files the comparison reads (:func:`gather`: the runs
:func:`identifiability.runs.model_comparison.comparable` picks on the held-out Lee sentences and the Lee pairs, of
the reference, its fine-tunes and its control) and each model folder's ``provenance.json`` (never weights),
and records them as one run under ``data/recorded/compare/<reference key>/`` (:mod:`identifiability.recorded.store`):
``results.json`` holds ``files``, {path below the data folder: its JSON content}, and ``model_provenance``,
{model name as the runs were made under: the path of its folder's provenance.json among ``files``}. Chapter 9
writes them back into a temporary data folder (:func:`materialise`) and runs the same comparison on it when
the live data folder has no fine-tuned model's results. A data folder that would not cover the recorded run
(:func:`design`: a model's, chapter's or corpus's runs missing) is refused in one line, before anything is
written (a pilot goes elsewhere with ``--into DIR``); before replacing a recorded run the job prints what moved.

Left out of each chapter results file (nothing in chapter 9 reads them, and they differ between two runs of
the same computation): the corpus's sentences and dropped lines, the schema version and ``params.results_dir``
(a path); of a sweep's ``run.json``, everything but ``chapter`` (what the results table reads).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path, PurePosixPath

from ..base import paths
from ..base.fileio import read_json, write_json
from ..models import keys
from . import store as recorded
from .store import NothingToRecord

JOB = TARGET = "compare"  # the recorded run's folder under data/recorded, and the make target that computes it
CLAIMS = ("C13", "C14")
CORPORA = ("lee_heldout", "lee_pairs")  # what `make compare` and `make compare-full` run the chapters on
# the results are files copied, not recomputed: a second recording of the same data folder is identical, and
# the chapters are seeded, so a rerun of `make compare` on one machine gives identical values too
TOLERANCE = 1e-9
_KEEP = ("chapter", "params", "provenance", "results")  # what aggregate.rows_of reads of a chapter results file


def model_folder(name: str, checkout: Path) -> Path:
    """A model's folder from the name the runs were made under: a relative name is the checkout's, where the
    chapters ran (a hub id names no folder there)."""
    p = Path(name).expanduser()
    return p if p.is_absolute() else checkout / p


def _slim(doc: dict) -> dict:
    out = {k: doc[k] for k in _KEEP if k in doc}
    out["params"] = {k: v for k, v in out.get("params", {}).items() if k != "results_dir"}
    return out


def gather(data: Path, base: str = paths.DEFAULT_MODEL, seed: int = 0, checkout: Path | None = None) -> dict:
    """What the record holds (see the module docstring): the runs of chapters 3, 4 and 6 on :data:`CORPORA`
    that the comparison picks (seed ``seed``, per chapter and corpus the parameters most models share), of
    the reference ``base``, its fine-tunes and its control, read from the data folder ``data``; model names
    resolve against ``checkout`` (default: the folder above ``data``). NothingToRecord when no fine-tune of
    ``base`` has results there."""
    from ..runs import aggregate, model_comparison

    data = data.resolve()
    checkout = checkout or data.parent
    chapters = (model_comparison.CHAPTER_3, model_comparison.CHAPTER_4, model_comparison.CHAPTER_6)
    table = aggregate.build_table(data)
    rows = model_comparison.comparable(table[table.corpus.isin(CORPORA) & table.chapter.isin(chapters)], seed)
    folders = {n: model_folder(n, checkout) for n in sorted(set(rows.model))}
    provs = {n: model_comparison.provenance(str(f)) for n, f in folders.items()}
    models = model_comparison.models_of(rows, reference=base, provenances=provs)
    kept = models[models.role != "other"]
    if not any(r.startswith("fine-tuned") for r in kept.role):
        raise NothingToRecord(
            f"no fine-tuned model of {base} has chapter results on {' or '.join(CORPORA)} in {data}: "
            "run `make compare` first"
        )
    files: dict[str, dict] = {}
    for run in sorted(set(rows[rows.model_key.isin(kept.model_key)].run)):
        files[run] = _slim(read_json(data / run))
        manifest = PurePosixPath(run).parent / "run.json"
        if run.startswith("sweeps/") and (data / manifest).is_file():
            files[str(manifest)] = {"chapter": read_json(data / manifest)["chapter"]}
    named = {}
    for name in kept.model:
        prov = folders[name] / "provenance.json"
        if not prov.is_file():
            continue  # a hub model: no folder
        where = prov.resolve()
        inside = where.is_relative_to(data.resolve())
        rel = (
            where.relative_to(data.resolve()).as_posix() if inside else f"models/{paths.safe_key(name)}/provenance.json"
        )
        files[rel], named[name] = provs[name], rel
    return {"reference": base, "seed": seed, "corpora": list(CORPORA), "files": files, "model_provenance": named}


def _safe(rel: str) -> PurePosixPath:
    p = PurePosixPath(rel)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise ValueError(f"a recorded file's path {rel!r} is not below the data folder")
    return p


def materialise(results: Mapping, folder: Path) -> Path:
    """Write a recorded run's files into ``folder`` at their paths below the data folder; returns ``folder``
    (a data folder the comparison reads: its results table names each run by that path)."""
    for rel, content in results["files"].items():
        write_json(folder / _safe(rel), content)
    return folder


def chapter_runs(results: Mapping) -> list[str]:
    """The chapter results files of a recorded run (:func:`gather`), as paths below the data folder: its files
    but the sweeps' manifests and the model folders' provenance."""
    models = set(results.get("model_provenance", {}).values())
    return sorted(r for r in results["files"] if r not in models and PurePosixPath(r).name != "run.json")


def provenances(results: Mapping) -> dict[str, dict]:
    """{model name: its folder's provenance} of a recorded run (what model_comparison.models_of takes)."""
    return {name: results["files"][rel] for name, rel in results.get("model_provenance", {}).items()}


def design(results: Mapping) -> dict:
    """What a record covers, for :func:`identifiability.recorded.store.refuse_smaller`: its corpora and each
    (model, chapter, corpus) it holds runs of, as 'model chapter corpus'."""
    runs = set()
    for rel in chapter_runs(results):
        doc = results["files"][rel]
        p = doc.get("params", {})
        runs.add(f"{p.get('model')} {doc.get('chapter') or PurePosixPath(rel).stem} {p.get('corpus')}")
    return {"corpora": sorted(results.get("corpora") or []), "runs": sorted(runs)}


def partial(rec: recorded.Recorded, source: Path | None = None) -> str | None:
    """One line saying why chapter 9 cannot compare the recorded run ``rec`` (no chapter results, or a file
    without its results or parameters: "not run in this build" and the command), or None when it can."""
    files = rec.results.get("files")
    runs = chapter_runs(rec.results) if isinstance(files, dict) else []
    broken = [r for r in runs if not isinstance(files[r], dict) or not {"params", "results"} <= set(files[r])]
    bad = "no chapter results" if not runs else f"{len(broken)} chapter results without their numbers" if broken else ""
    if not bad:
        return None
    return recorded.partial_line(rec, bad, TARGET, source)


def find(reference: str | keys.ModelRef, source: Path | None = None) -> recorded.Recorded | None:
    """The recorded `make compare` run of ``reference`` (a name, or a ref resolved already) in the checkout
    ``source`` (default: this one), or None."""
    return recorded.find(JOB, keys.model_ref(reference).key, TARGET, source)


def find_named(name: str, source: Path | None = None) -> recorded.Recorded | None:
    """The recorded `make compare` run whose reference is a model folder called ``name`` (a family member's,
    ``mlm-w128-dv32-seed0``) under whichever content key it was recorded (``<name>-<10 hex digits>``; the
    newest when several), or None: for a reference whose folder is not on this machine."""
    base = recorded.root(source) / JOB
    keys_ = sorted(p.name for p in base.glob(f"{name}-" + "[0-9a-f]" * 10)) if base.is_dir() else []
    found = [r for r in (recorded.find(JOB, k, TARGET, source) for k in keys_) if r is not None]
    return max(found, key=lambda r: r.date) if found else None


def runs_span(data: Path, files: Mapping[str, dict]) -> float | None:
    """Seconds from the first recorded sweep run's start to the last one's finish (their ``run.json``), or None:
    what the job can tell of ``make compare``'s duration when not given it (fine-tuning not included)."""
    starts, ends = [], []
    for rel in files:
        if rel.endswith("/run.json") and (data / rel).is_file():
            m = read_json(data / rel)
            end = datetime.fromisoformat(str(m.get("finished", "")).replace("Z", "+00:00")).timestamp()
            starts.append(end - float(m.get("seconds", 0)))
            ends.append(end)
    return max(ends) - min(starts) if ends else None


def record_compare(
    base: str = paths.DEFAULT_MODEL,
    data: Path | None = None,
    seed: int = 0,
    checkout: Path | None = None,
    into: Path | None = None,
    started: float | None = None,
    seconds: float | None = None,
    echo: Callable[[str], None] = print,
) -> recorded.Recorded:
    """Gather and record `make compare`'s results (:func:`gather`) under ``data/recorded/compare/<base key>/`` of
    the checkout ``into`` (default: this one). The provenance names the checkout that ran (``checkout``: its
    commit, lock and C13's and C14's rules; default the checkout above ``data``, else this one; relative model
    names resolve against it), the modules the chapters' kernels reported computing with, and the
    duration: ``seconds``, else since ``started`` (a Unix time: the Makefile passes make compare's start),
    else the span of the recorded sweep runs (said so in ``seconds_from``)."""
    t0 = time.time()
    data = (data or paths.data_root()).resolve()
    checkout = (checkout or paths.checkout(data.parent) or paths.source_root()).resolve()
    results = gather(data, base, seed, checkout)
    if seconds is not None:
        how = "given (--seconds)"
    elif started is not None:
        seconds, how = time.time() - started, "the whole of make compare (from its start to this job's end)"
    elif (seconds := runs_span(data, results["files"])) is not None:
        how = "the recorded sweep runs, from the first one's start to the last one's end (fine-tuning not included)"
    else:
        seconds, how = time.time() - t0, "this job only (gathering the files)"
    # the chapters ran in kernels of ``checkout``: its commit, lock and rules; the modules, what they reported
    kernels = [data / rel for rel in chapter_runs(results)]
    prov = recorded.provenance(CLAIMS, TARGET, seconds, checkout, kernels=kernels, data=data)
    prov |= {"seconds_from": how, "data": str(data), "checkout": str(checkout)}
    rec = recorded.record(JOB, keys.model_ref(base).key, results, prov, TOLERANCE, into, echo, design)
    size = sum(f.stat().st_size for f in recorded.folder(rec.job, rec.key, into).iterdir())
    echo(
        f"recorded {len(results['files'])} files ({len(results['model_provenance'])} model provenances) of "
        f"{data} in {recorded.folder(rec.job, rec.key, into)} ({size / 1e6:.2f} MB)"
    )
    return rec
