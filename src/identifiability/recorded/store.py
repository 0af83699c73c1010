"""Recorded heavy runs: results of a job too heavy for the book's budget, filed with their provenance.

A job (e.g. C10's exact sample, ``make record-c10``) writes its results under
``data/recorded/<job>/<key>/`` of the checkout (``key``: the model's and corpus's keys), two small JSON files
and never weights: ``results.json`` and ``provenance.json`` (git commit and whether the tree was dirty, the
date, the command line, the machine, the duration, the SHA-256 of the lock ``requirements.txt`` and of the
rows of the claims it was judged under in ``data/claims.csv`` and ``data/amendments.csv``, and the modules its
numbers were computed with, {module name: fingerprint of its meaning} (:mod:`identifiability.recorded.computed_with`:
the job's own and those its chapters' kernels reported; never charts, text, pages, the build or the command
line)). The provenance names the results file's hash, so a reader never pairs new results with an old
provenance.

API: :func:`record` (refuse a run that does not cover the previous one, :func:`refuse_smaller`; compare with
it and print a screen of what moved, :func:`summary`, the full list in :func:`moved_file`; write),
:func:`write`, :func:`load` (one line naming the command when absent or unreadable), :func:`find` (None when
absent), :func:`stale` (which hashes no longer match: "lock", "code", "rules"), :func:`changed_modules` and
:func:`code_unknown` (what made the code stale), :func:`caption` (the line a page shows) and :func:`changes`
(what changed since, in words),
:func:`frozen` and :func:`confirmable` (the rules frozen before the family was trained; data/frozen_rules.csv) and
:func:`moved` (every result value that moved beyond a tolerance; provenance is never compared).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from ..base import paths
from ..base.errors import UserError
from ..base.fileio import atomic_write, jsonable, read_json
from . import computed_with

RESULTS, PROVENANCE = "results.json", "provenance.json"
KINDS = ("lock", "code", "rules")  # what stale() compares


class NothingToRecord(UserError):
    """A recording job found none of the results it records (one line naming the command that makes them)."""


class RecordMissing(UserError, FileNotFoundError):
    """No recorded run, or an unreadable one; the message is one line naming the command that computes it."""


@dataclass(frozen=True)
class Recorded:
    """One recorded run: ``results`` as the job wrote them and their ``provenance``."""

    job: str
    key: str
    results: dict
    provenance: dict

    @property
    def date(self) -> str:
        """The day the run finished, YYYY-MM-DD (UTC)."""
        return str(self.provenance.get("date", ""))[:10]

    @property
    def target(self) -> str:
        """The make target that recomputes it."""
        return str(self.provenance.get("target", ""))


def root(source: Path | None = None) -> Path:
    """``data/recorded`` of the checkout: recorded runs ship with the sources, like the claims table."""
    return (source or paths.source_root()) / "data" / "recorded"


def folder(job: str, key: str, source: Path | None = None) -> Path:
    return root(source) / paths.safe_key(job) / key


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def reported(files: Iterable[Path], data: Path) -> tuple[dict[str, str], list[str]]:
    """What chapters' kernels reported computing with (:data:`identifiability.recorded.computed_with.KEY` of
    each results file of ``files``), merged; and the files, below the data folder ``data``, that report nothing (written
    before kernels reported)."""
    reports, silent = [], []
    for f in files:
        report = read_json(f).get(computed_with.KEY)
        if isinstance(report, dict):
            reports.append(report)
        else:
            silent.append(f.relative_to(data).as_posix() if f.is_relative_to(data) else f.name)
    return computed_with.merged(reports), sorted(silent)


def rules_hash(source: Path, claims: Sequence[str]) -> str:
    """SHA-256 of the rows of ``claims`` in data/claims.csv and data/amendments.csv (in file order)."""
    rows = []
    for name in ("claims.csv", "amendments.csv"):
        with open(source / "data" / name, newline="", encoding="utf-8") as f:
            rows += [[name, *r] for r in csv.reader(f) if r and r[0] in claims]
    return _sha(json.dumps(rows, ensure_ascii=False).encode())


FROZEN = "frozen_rules.csv"  # data/<FROZEN>: one SHA-256 per claim, written once before the family was trained


def claim_hashes(source: Path | None = None) -> dict[str, str]:
    """{claim id: :func:`rules_hash` of that claim alone} for every row of data/claims.csv: its row and every
    amendment of it, so a new amendment changes the claim's hash."""
    source = source or paths.source_root()
    with open(source / "data" / "claims.csv", newline="", encoding="utf-8") as f:
        ids = [r["id"] for r in csv.DictReader(f)]
    return {i: rules_hash(source, [i]) for i in ids}


def frozen(source: Path | None = None) -> dict[str, dict]:
    """{claim id: {"sha256", "date"}} of data/frozen_rules.csv: the rules as they stood when they were frozen,
    before any model of the family was trained (empty when the file is absent)."""
    path = (source or paths.source_root()) / "data" / FROZEN
    if not path.is_file():
        return {}
    with open(path, newline="", encoding="utf-8") as f:
        return {r["id"]: {"sha256": r["sha256"], "date": r["date"]} for r in csv.DictReader(f)}


def confirmable(judged_under: dict[str, str], source: Path | None = None) -> dict[str, bool]:
    """{claim id: whether a run judged it under the frozen rule}: ``judged_under`` is {claim id: the hash the run
    stored (:func:`claim_hashes` at run time)}. A claim whose rule changed after the freeze, or that was never
    frozen, is False: its verdict there is "not confirmed", never a confirmation of a rule re-written later."""
    fz = frozen(source)
    return {c: c in fz and fz[c]["sha256"] == h for c, h in judged_under.items()}


def hashes(source: Path, claims: Sequence[str]) -> dict:
    """The hashes of the checkout ``source`` a recorded run is judged stale against besides its modules: the
    lock and the rules of ``claims``."""
    return {"lock": _sha((source / "requirements.txt").read_bytes()), "rules": rules_hash(source, claims)}


def git_state(source: Path) -> tuple[str, bool]:
    """(commit, dirty) of the checkout; ("unknown", True) outside a git checkout."""
    try:
        run = dict(cwd=source, capture_output=True, text=True, timeout=30, check=True)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], **run).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], **run).stdout.strip())
        return commit, dirty
    except (OSError, subprocess.SubprocessError):
        return "unknown", True


def machine() -> dict:
    """Where the run ran: platform, CPU count, torch version (read without importing torch)."""
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = "not installed"
    return {"platform": platform.platform(), "cpus": os.cpu_count() or 1, "torch": torch}


def _command_line() -> str:
    """The command line, as a reader would type it (``identifiability ...`` rather than the script's path)."""
    argv = list(sys.argv)
    if argv and Path(argv[0]).stem in ("cli", "identifiability", "__main__"):
        argv[0] = "identifiability"
    return shlex.join(argv)


def computed(kernels: Sequence[Path] = (), data: Path | None = None) -> dict:
    """What a run computed with, for its provenance's ``hashes``: ``modules``, {module name: fingerprint} of this
    process's computing modules and those the chapters' kernels reported in their results files ``kernels``
    (below the data folder ``data``, default this one), the fingerprint rule (``modules_rule``), and the
    files whose kernels reported nothing (``unreported``)."""
    mods, silent = reported(kernels, data or paths.data_root())
    merged = computed_with.merged([computed_with.imported(), mods])
    return {"modules": merged, "modules_rule": computed_with.RULE, "unreported": silent}


def provenance(
    claims: Sequence[str],
    target: str,
    seconds: float,
    source: Path | None = None,
    command: str | None = None,
    git: tuple[str, bool] | None = None,
    kernels: Sequence[Path] = (),
    data: Path | None = None,
) -> dict:
    """The provenance of a run that took ``seconds`` and was judged under ``claims``' rules; ``git``
    (commit, dirty) is read from the checkout unless given. The modules it computed with are this process's
    and, for a job that gathers what chapters' kernels computed (`make compare`'s, `make family`'s), those
    the kernels reported in the results files ``kernels`` below the data folder ``data`` (:func:`computed`)."""
    source = source or paths.source_root()
    commit, dirty = git or git_state(source)
    return {
        "commit": commit,
        "dirty": dirty,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command if command is not None else _command_line(),
        "machine": machine(),
        "seconds": float(seconds),
        "target": target,
        "claims": list(claims),
        "hashes": {**hashes(source, claims), **computed(kernels, data)},
    }


def write(job: str, key: str, results: dict, prov: dict, source: Path | None = None) -> Recorded:
    """Write ``results`` then ``prov`` (naming the results' hash), each atomically."""
    where = folder(job, key, source)
    text = json.dumps(jsonable(results), indent=1, sort_keys=True)
    prov = {**prov, "results_sha256": _sha(text.encode())}
    atomic_write(where / RESULTS, lambda p: p.write_text(text, encoding="utf-8"))
    ptext = json.dumps(jsonable(prov), indent=1, sort_keys=True)
    atomic_write(where / PROVENANCE, lambda p: p.write_text(ptext, encoding="utf-8"))
    return Recorded(job, key, json.loads(text), json.loads(ptext))


def find(job: str, key: str, target: str, source: Path | None = None) -> Recorded | None:
    """The recorded run, or None when there is none; RecordMissing (one line) when it is unreadable."""
    where = folder(job, key, source)
    if not (where / RESULTS).exists() and not (where / PROVENANCE).exists():
        return None
    try:
        text = (where / RESULTS).read_text(encoding="utf-8")
        prov = json.loads((where / PROVENANCE).read_text(encoding="utf-8"))
        if prov.get("results_sha256") != _sha(text.encode()):
            raise ValueError("its results do not match its provenance")
        return Recorded(job, key, json.loads(text), prov)
    except (OSError, ValueError, AttributeError) as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise RecordMissing(
            f"the recorded run {where} is unreadable ({why}): not run in this build; `make {target}` recomputes it"
        ) from None


def for_page(
    look: Callable[[], Recorded | None], partial: Callable[[Recorded], str | None]
) -> tuple[Recorded | None, str | None]:
    """(the recorded run ``look()`` finds, or None; the one line a page says of it, or None): a run that is
    unreadable (:func:`find`'s RecordMissing: cut short, or results that do not match its provenance's hash) is
    None and its line; one with missing or partial numbers is itself and ``partial``'s line (the page decides
    whether to show the rest); each line says "not run in this build" and the command. A page goes on."""
    try:
        rec = look()
    except RecordMissing as e:
        return None, str(e)
    return rec, (partial(rec) if rec is not None else None)


def partial_line(rec: Recorded, why: str, target: str, source: Path | None = None) -> str:
    """What a page says, in one line, of a recorded run it cannot read whole (``why``): not run in this build,
    and the command that records it (the record's own make target, else ``target``)."""
    where, make = folder(rec.job, rec.key, source), rec.target or target
    return f"The recorded run in {where} is partial ({why}): not run in this build; `make {make}` records it."


def load(job: str, key: str, target: str, source: Path | None = None) -> Recorded:
    """The recorded run; RecordMissing (one line naming ``make <target>``) when absent or unreadable."""
    rec = find(job, key, target, source)
    if rec is None:
        raise RecordMissing(f"no recorded run at {folder(job, key, source)}: run `make {target}` to compute it")
    return rec


def code_unknown(rec: Recorded) -> str | None:
    """Why ``rec`` cannot tell whether the code it computed with has changed, or None when it can: it was
    recorded before modules were fingerprinted, under another fingerprint rule, or from chapter results whose
    kernels reported nothing. Such a record counts as stale."""
    h = rec.provenance.get("hashes", {})
    if not isinstance(h.get("modules"), dict):
        return "recorded before modules were fingerprinted"
    if h.get("modules_rule") != computed_with.RULE:
        return f"its modules were fingerprinted under another rule ({h.get('modules_rule')}; now {computed_with.RULE})"
    if h.get("unreported"):
        return f"{len(h['unreported'])} chapter results it gathered do not say which modules computed them"
    return None


def changed_modules(rec: Recorded, source: Path | None = None) -> list[str]:
    """The modules ``rec`` computed with whose meaning changed since or which are gone from the checkout
    ``source`` (:func:`identifiability.recorded.computed_with.changed`: a module that only moved is unchanged); [] for
    a record that cannot tell (:func:`code_unknown`)."""
    modules = rec.provenance.get("hashes", {}).get("modules")
    if not isinstance(modules, dict):
        return []
    return computed_with.changed(modules, (source or paths.source_root()) / "src" / computed_with.PACKAGE)


def stale(rec: Recorded, source: Path | None = None) -> list[str]:
    """Which of "lock", "code", "rules" no longer hold as they did when ``rec`` was recorded: the code is stale
    when a module it computed with changed (:func:`changed_modules`) or when the record cannot tell
    (:func:`code_unknown`)."""
    source = source or paths.source_root()
    then = rec.provenance.get("hashes", {})
    now = hashes(source, rec.provenance.get("claims", []))
    code = code_unknown(rec) is not None or bool(changed_modules(rec, source))
    return [k for k in KINDS if (code if k == "code" else then.get(k) != now[k])]


def duration(seconds: float) -> str:
    """'42 s', '3 min 5 s', '2 h 7 min'."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def caption(rec: Recorded, source: Path | None = None) -> str:
    """One short line on a recorded run: 'recorded run of <date>; `make <target>` recomputes it (<duration> on
    <n> cores, and how many sentences came from the cache where some did)', then what it was computed with that
    changed since in the checkout ``source`` (:func:`changes`), nothing where nothing did."""
    cpus = rec.provenance.get("machine", {}).get("cpus")
    took = duration(rec.provenance.get("seconds", 0)) + (f" on {cpus} cores" if cpus else "")
    cached = rec.provenance.get("cached")  # a resumed or partly cached run took the time of what it computed
    if isinstance(cached, dict) and cached.get("items"):
        took += f", with {cached['items']} of {cached['of']} sentences' exact HTA from the cache"
    return "; ".join([f"recorded run of {rec.date}; `make {rec.target}` recomputes it ({took})", *changes(rec, source)])


def changes(rec: Recorded, source: Path | None = None) -> list[str]:
    """What ``rec`` was computed with that changed since (:func:`stale`), each in words that name it: the modules
    whose meaning changed ("computed before a change to base/stats.py"), or why that cannot be told; the locked
    packages; the rules."""
    kinds, out = stale(rec, source), []
    if "code" in kinds:
        why = code_unknown(rec)
        names = [
            n.removeprefix(computed_with.PACKAGE + ".").replace(".", "/") + ".py" for n in changed_modules(rec, source)
        ]
        out.append(
            f"{why}, so whether its code changed since is not known"
            if why
            else f"computed before a change to {_listing(names)}"
        )
    if "lock" in kinds:
        out.append("computed with other versions of the locked packages (requirements.txt)")
    if "rules" in kinds:
        out.append("judged under rules that changed since")
    return out


def _listing(names: Sequence[str], shown: int = 3) -> str:
    """'a', 'a and b', 'a, b and c', 'a, b, c and 2 more'."""
    if len(names) > shown:
        return ", ".join(names[:shown]) + f" and {len(names) - shown} more"
    return " and ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else "".join(names)


def moved(old: dict | Recorded, new: dict | Recorded, tolerance: float) -> list[str]:
    """Every result value that moved: floats beyond ``tolerance`` (absolute), ints, strings, booleans and
    None exactly, a key or list entry present on one side only. Provenance (dates, durations) is never
    compared: a Recorded is compared by its results. One line per value, 'path: old -> new'."""
    a = old.results if isinstance(old, Recorded) else old
    b = new.results if isinstance(new, Recorded) else new
    out: list[str] = []
    _walk(jsonable(a), jsonable(b), "", tolerance, out)
    return out


def _walk(a, b, at: str, tol: float, out: list[str]) -> None:
    name = at or "(results)"
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            sub = f"{at}.{k}" if at else str(k)
            if k not in a or k not in b:
                was, now = ("absent" if k not in d else _show(d[k]) for d in (a, b))
                out.append(f"{sub}: {was} -> {now}")
            else:
                _walk(a[k], b[k], sub, tol, out)
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{name}: {len(a)} entries -> {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            _walk(x, y, f"{at}[{i}]", tol, out)
        return
    if isinstance(a, float) or isinstance(b, float):  # a number may be written 1 one time and 1.0 another
        if _number(a) and _number(b) and abs(a - b) <= tol:
            return
    elif type(a) is type(b) and a == b:
        return
    out.append(f"{name}: {_show(a)} -> {_show(b)}")


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _show(v) -> str:
    text = json.dumps(v, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


SHOWN = 20  # "value(s) moved": at most this many lines on the screen; the full list goes to a file


def moved_file(job: str, key: str) -> Path:
    """Where :func:`record` writes the full list of values that moved (the data folder's cache: never committed)."""
    return paths.cache_root() / "moved" / paths.safe_key(job) / f"{key}.txt"


def summary(lines: Sequence[str], where: Path, shown: int = SHOWN) -> list[str]:
    """At most a screen of :func:`moved`'s ``lines``: how many moved under each top-level result, the first
    ``shown`` of them, and where the full list is (``where``)."""
    if len(lines) <= shown:
        return [f"  {line}" for line in lines]
    counts: dict[str, int] = {}
    for line in lines:
        top = re.split(r"[.\[:]", line, maxsplit=1)[0]
        counts[top] = counts.get(top, 0) + 1
    by = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:8])
    more = len(lines) - shown
    return [f"  by result: {by}", *(f"  {line}" for line in lines[:shown]), f"  ... {more} more in {where}"]


class SmallerDesign(UserError):
    """A job would replace a recorded run with one of a smaller design; one line saying how to write it elsewhere."""


def shortfall(old: dict, new: dict) -> list[str]:
    """What a run of design ``new`` lacks against the recorded design ``old`` (each a :func:`design`-like dict:
    a number counts (the new one must be at least as large), a list names what must all be there again, any
    other value must be equal); [] when ``new`` covers ``old``."""
    out = []
    for k, was in old.items():
        now = new.get(k)
        if isinstance(was, bool) or not isinstance(was, int | float | list):
            if was != now:
                out.append(f"{k} {now!r}, not {was!r}")
        elif isinstance(was, list):
            lost = [x for x in was if x not in (now or [])]
            if lost:
                out.append(f"no {k} {', '.join(map(str, lost[:5]))}{' ...' if len(lost) > 5 else ''}")
        elif not isinstance(now, int | float) or now < was:
            out.append(f"{k} {now}, fewer than {was}")
    return out


def refuse_smaller(
    job: str,
    key: str,
    new: dict,
    design: Callable[[dict], dict],
    source: Path | None = None,
    option: str = "--into DIR",
) -> None:
    """SmallerDesign (one line, before any work) when the run recorded at ``job``/``key`` of the checkout
    ``source`` has a design (``design`` of its results) that the new run's design ``new`` does not cover
    (:func:`shortfall`, on the keys ``new`` names: a job may check what it knows before its work, the rest
    before it writes): fewer sentences or members, chapter results missing, another model or corpus. An
    unreadable record is no run to protect."""
    try:
        before = find(job, key, "", source)
    except RecordMissing:
        return
    if before is None:
        return
    lacks = shortfall({k: v for k, v in design(before.results).items() if k in new}, new)
    if lacks:
        raise SmallerDesign(
            f"{folder(job, key, source)} holds a recorded run this one would not cover ({'; '.join(lacks)}): "
            f"write a pilot elsewhere with {option}"
        )


def record(
    job: str,
    key: str,
    results: dict,
    prov: dict,
    tolerance: float,
    source: Path | None = None,
    echo: Callable[[str], None] = print,
    design: Callable[[dict], dict] | None = None,
) -> Recorded:
    """Compare fresh ``results`` with the run recorded before (if any): refuse them when their ``design`` does
    not cover its (:func:`refuse_smaller`), else ``echo`` a screen of the values that moved beyond
    ``tolerance`` (:func:`summary`; the full list in :func:`moved_file`), or that they are identical to it,
    then write them in its place."""
    if design is not None:
        refuse_smaller(job, key, design(results), design, source)
    before = find(job, key, prov.get("target", ""), source)
    if before is not None:
        lines = moved(before, results, tolerance)
        if lines:
            where = moved_file(job, key)
            atomic_write(where, lambda p: p.write_text("\n".join(lines) + "\n", encoding="utf-8"))
            echo(f"{len(lines)} value(s) moved since the recorded run of {before.date} (tolerance {tolerance:g}):")
            for line in summary(lines, where):
                echo(line)
        else:
            echo(f"identical to the recorded run of {before.date} (tolerance {tolerance:g})")
    return write(job, key, results, prov, source)
