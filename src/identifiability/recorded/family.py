"""`make family`'s recorded run: what the book shows of the family of head widths, filed with its provenance.

    identifiability record-family [--data DIR] [--started EPOCH] [--into DIR]
    make family   (its last step before the book)

``make family`` pre-trains the family (:mod:`identifiability.pretrain`), runs chapter 7 on every member and
its twin, and chapters 2 to 6 on every member (the frozen rules judged on models they never saw), too heavy
for a book build. This job gathers from the data folder (:func:`gather`) chapter 7's results file, each
member's verdicts in chapters 2 to 6 (and its untrained twin's, where a chapter judges it) with the
parameters they ran with, each member folder's ``provenance.json`` (text, tokens seen, minutes, learning
curve, held-out accuracy against the unigram baseline and the twin; never weights) and the hash of the rule
each claim was judged under (:func:`identifiability.recorded.store.claim_hashes`), and records them under
``data/recorded/family/<corpus>/``. Chapter 7 shows them when no model of the family is in the data folder
(:func:`find`), and the claims page reads the members' verdicts. A data folder that would not cover the
recorded run (:func:`design`: fewer members, chapter results missing, as after a `make family` that stopped
early) is refused in one line, before anything is written; a pilot goes elsewhere with ``--into DIR``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pandas

from ..base import paths
from ..base.fileio import read_json
from ..chapters.contract import HEAD_WIDTH, ON_FAMILY, by_name, by_role, current_stem, with_role
from ..models import keys
from ..pretrain.family import MEMBERS
from . import store as recorded
from .store import NothingToRecord

JOB = TARGET = "family"
TOLERANCE = 1e-9  # the chapters are seeded: a rerun on one machine gives identical values
JUDGING = tuple(c.name for c in with_role(ON_FAMILY))
_PROVENANCE_KEYS = (
    "kind", "member", "seed", "settings", "text", "tokens_seen", "steps", "minutes", "device", "learning_curve",
    "held_out", "unigram", "twin", "min_gain", "trained_enough",
)  # fmt: skip


def _member_of(model: str) -> str | None:
    """The member a model name (a folder path) is, or None."""
    name = Path(str(model)).name
    return name if name in {m.name for m in MEMBERS} else None


def _latest_runs(data: Path, corpus: str) -> dict[tuple[str, str], tuple[Path, dict]]:
    """{(member, stem): (results file, its content)}: the latest run of each judging chapter on each member's
    folder, on ``corpus``, under the data folder ``data``."""
    judging = {by_name(n).stem for n in JUDGING}
    runs: dict[tuple[str, str], tuple[Path, dict]] = {}
    for f in sorted(data.rglob("*.json"), key=lambda p: p.stat().st_mtime):
        stem = current_stem(f.stem)
        if stem not in judging or "recorded" in f.relative_to(data).parts:
            continue
        try:
            doc = read_json(f)
        except (OSError, ValueError):
            continue
        member = _member_of(doc.get("params", {}).get("model", ""))
        if member is not None and doc.get("params", {}).get("corpus") == corpus:
            runs[member, stem] = (f, doc)
    return runs


def members(data: Path, corpus: str = paths.DEFAULT_CORPUS) -> dict[str, dict]:
    """{member: {"provenance": ..., "chapters": {stem: {"claims", "twin_claims", "params"}}}} from every chapter
    results file under the data folder ``data`` whose model is a member's folder, on ``corpus`` (the latest run
    of each chapter), and each member folder's provenance; {} when there is none."""
    found: dict[str, dict] = {}
    for (member, stem), (_, doc) in _latest_runs(data, corpus).items():
        res = doc.get("results", {})
        params = {k: v for k, v in doc.get("params", {}).items() if k != "results_dir"}
        chapters = found.setdefault(member, {"chapters": {}})["chapters"]
        chapters[stem] = {"claims": res.get("claims", {}), "twin_claims": res.get("twin_claims", {}), "params": params}
    for m in MEMBERS:
        prov = data / "models" / m.name / "provenance.json"
        if prov.is_file():
            p = read_json(prov)
            found.setdefault(m.name, {"chapters": {}})["provenance"] = {k: p[k] for k in _PROVENANCE_KEYS if k in p}
    return found


def _chapter7(data: Path, target: keys.Target) -> Path:
    """Chapter 7's results file of ``target``'s model and corpus under the data folder ``data``."""
    return data / target.results_dir.relative_to(paths.data_root()) / f"{by_role(HEAD_WIDTH).stem}.json"


def results_files(
    data: Path, corpus: str | keys.CorpusRef = paths.DEFAULT_CORPUS, model: str | keys.ModelRef = paths.DEFAULT_MODEL
) -> list[Path]:
    """The chapter results files :func:`gather` reads (their kernels report what they computed with); ``corpus``
    and ``model``: names, or refs resolved already."""
    target = keys.target(model, corpus)
    seven = _chapter7(data, target)
    return [*([seven] if seven.is_file() else []), *(f for f, _ in _latest_runs(data, target.corpus.name).values())]


def gather(
    data: Path, corpus: str | keys.CorpusRef = paths.DEFAULT_CORPUS, model: str | keys.ModelRef = paths.DEFAULT_MODEL
) -> dict:
    """What the record holds (module docstring), from the data folder ``data``: chapter 7's results file of
    ``model`` and ``corpus`` (names, or refs resolved already; ``head_width``: its results and parameters), and
    per member ``members`` (:func:`members`)."""
    target = keys.target(model, corpus)
    corpus = target.corpus.name
    found = members(data, corpus)
    path = _chapter7(data, target)
    head_width = None
    if path.is_file():
        doc = read_json(path)
        head_width = {"results": doc.get("results", {}), "params": {k: v for k, v in doc.get("params", {}).items()
                                                                     if k != "results_dir"}}  # fmt: skip
    if head_width is None and not found:
        raise NothingToRecord(f"no result of the family in {data}: run make family first")
    hashes = recorded.claim_hashes()
    return {"corpus": corpus, "head_width": head_width, "members": found, "judged_under": hashes}


def design(results: dict) -> dict:
    """What a record covers, for :func:`identifiability.recorded.store.refuse_smaller`: its corpus, its
    members, and its chapter results (chapter 7's, and each member's chapters as 'member/stem')."""
    seven = [by_role(HEAD_WIDTH).stem] if results.get("head_width") else []
    runs = [f"{m}/{stem}" for m, got in (results.get("members") or {}).items() for stem in got.get("chapters", {})]
    return {
        "corpus": results.get("corpus"),
        "members": sorted(results.get("members") or {}),
        "chapter results": sorted(seven + runs),
    }


def record_family(
    data: Path | None = None,
    corpus: str = paths.DEFAULT_CORPUS,
    started: float | None = None,
    echo: Callable[[str], None] = print,
    into: Path | None = None,
) -> recorded.Recorded:
    """Gather (:func:`gather`) and record the family's results under ``data/recorded/family/<corpus>/`` of the
    checkout ``into`` (default: this one); the duration is since ``started`` (make family's start, a Unix
    time), else this job's."""
    t0 = started if started is not None else time.time()
    data = (data or paths.data_root()).resolve()
    if not data.is_dir():
        raise NothingToRecord(f"--data {data} is not a folder: pass the data folder make family filled")
    target = keys.target(paths.DEFAULT_MODEL, corpus)  # chapter 7's run beside the family is the default model's
    results = gather(data, target.corpus, target.model)
    kernels = results_files(data, target.corpus, target.model)
    prov = recorded.provenance(sorted(results["judged_under"]), TARGET, time.time() - t0, kernels=kernels, data=data)
    rec = recorded.record(JOB, target.corpus.key, results, prov, TOLERANCE, into, echo, design)
    echo(f"recorded the family's results ({len(results['members'])} members) in {recorded.folder(JOB, rec.key, into)}")
    return rec


def find(corpus: str | keys.CorpusRef = paths.DEFAULT_CORPUS, source: Path | None = None) -> recorded.Recorded | None:
    """The recorded `make family` run on ``corpus`` (a name, or a ref resolved already), or None."""
    return recorded.find(JOB, keys.corpus_ref(corpus).key, TARGET, source)


HEAD_WIDTH_CLAIMS = ("C19", "C20", "C21")  # what chapter 7 judges on the family
FIRST_TRAINING = "history/family_first_training.json"  # below data/: the first training's verdicts, kept


def first_training(source: Path | None = None) -> dict | None:
    """Chapter 7's verdicts on the family's first training (with BERT's attention dropout), which the family
    retrained without it replaced after they were seen: {"date", "attention_dropout", "claims": {claim: verdict
    as recorded}, ...} from data/history/family_first_training.json of the checkout ``source``; None without it."""
    path = (source or paths.source_root()) / "data" / FIRST_TRAINING
    return read_json(path) if path.is_file() else None


def head_width_claims(rec: recorded.Recorded | None) -> dict[str, dict]:
    """{claim: chapter 7's verdict as recorded} of those of :data:`HEAD_WIDTH_CLAIMS` the record holds."""
    shown = (rec.results.get("head_width") or {}) if rec else {}
    got = (shown.get("results") or {}).get("claims") or {}
    return {c: got[c] for c in HEAD_WIDTH_CLAIMS if isinstance(got.get(c), dict)}


def partial(rec: recorded.Recorded) -> str | None:
    """One line saying what chapter 7 cannot show of the recorded run ``rec`` (chapter 7's results or a claim
    of it missing, no members: "not run in this build" and the command), or None when it holds them all."""
    got = head_width_claims(rec)
    lacks = [] if rec.results.get("head_width") else ["no chapter 7 results"]
    lacks += [] if lacks or len(got) == len(HEAD_WIDTH_CLAIMS) else [
        f"no {', '.join(c for c in HEAD_WIDTH_CLAIMS if c not in got)}"]  # fmt: skip
    lacks += [] if rec.results.get("members") else ["no members"]
    if not lacks:
        return None
    return recorded.partial_line(rec, "; ".join(lacks), TARGET)


def judged(member: dict) -> bool:
    """Whether a member of a family record (:func:`members`) trained enough to be judged; a member without
    provenance is not known to be undertrained."""
    return member.get("provenance", {}).get("trained_enough") is not False


def member_verdicts(rec: recorded.Recorded | None, claim: str) -> dict[str, dict]:
    """{member: its verdict of ``claim`` as recorded} over the members of a recorded family run that trained
    enough to be judged (an undertrained member is reported on chapter 7's page, never counted)."""
    if rec is None:
        return {}
    out = {}
    for name, m in (rec.results.get("members") or {}).items():
        if not judged(m):
            continue
        for ch in (m.get("chapters") or {}).values():
            v = (ch.get("claims") or {}).get(claim)
            if isinstance(v, dict) and "verdict" in v:  # a partial record's missing verdict is no verdict
                out[name] = v
    return out


def claims_across(members: dict[str, dict]) -> pandas.DataFrame:
    """Every claim the chapters judged on the family's members, from a `make family` run's ``members``
    (:func:`identifiability.recorded.family.gather`: {member: {"provenance", "chapters": {stem: {"claims",
    "twin_claims"}}}}): one row per claim and member, ordered by claim number then head width d_v, with the
    member's d_v, width and seed, whether it trained enough to be judged (an undertrained member's verdicts are
    shown, never counted), its verdict label and estimate, and its untrained twin's verdict label where a
    chapter judged the twin ("" else). Columns: claim, member, d_v, width, seed, judged, verdict, estimate,
    twin."""
    from ..verdicts.core import verdict_label

    spec = {m.name: m for m in MEMBERS}
    rows = []
    for name, m in members.items():
        if name not in spec:
            continue
        for ch in m.get("chapters", {}).values():
            twins = ch.get("twin_claims", {})
            for claim, v in ch.get("claims", {}).items():
                t = twins.get(claim)
                rows.append(
                    {
                        "claim": claim,
                        "member": name,
                        "d_v": spec[name].d_v,
                        "width": spec[name].width,
                        "seed": spec[name].seed,
                        "judged": judged(m),
                        "verdict": verdict_label(v),
                        "estimate": v.get("estimate"),
                        "twin": verdict_label(t) if t else "",
                    }
                )
    cols = ["claim", "member", "d_v", "width", "seed", "judged", "verdict", "estimate", "twin"]
    df = pandas.DataFrame(rows, columns=cols)
    if df.empty:
        return df
    order = df.claim.str[1:].astype(int)
    df = df.assign(_n=order).sort_values(["_n", "width", "d_v", "seed"], ascending=[True, False, True, True])
    return df.drop(columns="_n").reset_index(drop=True)
