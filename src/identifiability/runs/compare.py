"""Compare two folders of chapter results files: what changed, apart from timings and paths.

    identifiability compare data/baseline/all-MiniLM-L6-v2/lee data/results/all-MiniLM-L6-v2/lee
    identifiability compare data/baseline data/results     (every model and corpus below them)

Used to show that a refactoring changed no number, and by readers to compare two runs. Results files
(``*.json``) are found in the folders and every folder below them, and matched by their path relative to
each folder (``all-MiniLM-L6-v2/lee/<chapter stem>.json``); the report says how many values each
file had in common. Every JSON value is flattened to a path
(``<chapter stem>.json: results.pearson_median_longest``); numbers are equal
when they agree to ``rtol`` (relative; default 1e-6) or ``atol`` (absolute; default 0, so that a tolerance
of 1e-10 and one of 1e-13 count as different); the keys :data:`SKIPPED` names (timings, page weights, file
paths, a sweep run's finish time and attempts, the modules a chapter computed with) are skipped, with
everything below them. A field named ``layer`` (or ``*_layer``) whose new value is the old one plus 1 is
reported apart, as the move from 0-based to the book's 1..L layer numbering. A results file of a chapter that
has since been renumbered since (the comparison across models of a build before the head-width chapter, then chapter 8)
is matched under the chapter's stem of now (:data:`identifiability.chapters.contract.RENAMED`), and the report says
which files were.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..base.errors import UserError, one_line
from ..chapters.contract import current_stem

# Keys whose values differ between two runs of the same computation: when it ran, how long it took, where
# it wrote, how often a sweep tried and the code it ran (what a refactoring changes). Named one by one, never
# by a pattern: a pattern on "_s" also hid d_s, the input length. A chapter that records a new timing adds its
# key here (tests/unit/test_compare.py checks that every study field named *seconds* is listed).
SKIPPED = (
    "runtime_s",
    "seconds",
    "corpus_seconds",
    "train_seconds",
    "eval_seconds",
    "ablation_seconds",
    "exact_seconds_per_sentence",
    "estimate_seconds_per_sentence",
    "exact_seconds_by_length",
    "page_bytes",
    "results_dir",
    "finished",
    "attempts",
    "computed_with",  # the modules a chapter's kernel computed with (identifiability.recorded.computed_with)
)


@dataclass
class Comparison:
    """Differences between two results folders, by kind."""

    changed: list[tuple[str, object, object]] = field(default_factory=list)
    renumbered: list[tuple[str, object, object]] = field(default_factory=list)
    only_old: list[str] = field(default_factory=list)
    only_new: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)  # (folder/path as found, path it is matched as)
    by_file: dict[str, int] = field(default_factory=dict)  # results file in both folders -> values compared
    max_rel_diff: float = 0.0

    @property
    def compared(self) -> int:
        return sum(self.by_file.values())

    @property
    def identical(self) -> bool:
        return not (self.changed or self.only_old or self.only_new)

    def report(self, limit: int = 60) -> str:
        lines = [
            f"{self.compared} values compared in {len(self.by_file)} results files; largest relative difference "
            f"among equal numbers {self.max_rel_diff:.1e}"
        ]
        lines += [f"  {name}: {n} values" for name, n in self.by_file.items()]
        if self.renamed:
            lines.append(f"under a chapter's earlier stem, matched as its stem of now: {len(self.renamed)}")
            lines += [f"  {found} as {now}" for found, now in self.renamed]
        for title, rows in (("changed", self.changed), ("layer numbering (0-based -> 1..L)", self.renumbered)):
            if rows:
                lines.append(f"{title}: {len(rows)}")
                lines += [f"  {p}: {_short(a)} -> {_short(b)}" for p, a, b in rows[:limit]]
                if len(rows) > limit:
                    lines.append(f"  ... and {len(rows) - limit} more")
        for title, rows in (("only in the old folder", self.only_old), ("only in the new folder", self.only_new)):
            if rows:
                lines.append(f"{title}: {len(rows)}")
                lines += [f"  {p}" for p in rows[:limit]]
                if len(rows) > limit:
                    lines.append(f"  ... and {len(rows) - limit} more")
        lines.append(
            "identical (apart from skipped timings and paths)"
            if self.identical and not self.renumbered
            else "identical except layer numbering"
            if self.identical
            else "DIFFERENT"
        )
        return "\n".join(lines)


def _short(v: object) -> str:
    s = json.dumps(v) if not isinstance(v, str) else repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


def flatten(obj: object, prefix: str = "") -> dict[str, object]:
    """{dotted path: leaf value}; list items are indexed like ``key[3]``."""
    out: dict[str, object] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.update(flatten(v, f"{prefix}[{i}]"))
    else:
        out[prefix] = obj
    return out


def _equal(a: object, b: object, rtol: float, atol: float) -> tuple[bool, float]:
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return a == b, 0.0
    if math.isclose(a, b, rel_tol=rtol, abs_tol=atol):
        return True, 0.0 if a == b else abs(a - b) / max(abs(a), abs(b))
    return False, math.inf


def skipped(path: str) -> bool:
    """Whether a flattened path (``results.rows[0].seconds``) is or lies below a key of :data:`SKIPPED`."""
    return any(key in SKIPPED for key in re.split(r"\.|\[\d+\]", path))


def _is_layer(path: str) -> bool:
    last = re.sub(r"\[\d+\]$", "", path.rsplit(".", 1)[-1])
    return last == "layer" or last.endswith("_layer")


def results_files(folder: Path) -> dict[str, Path]:
    """{path relative to ``folder``, with ``/``: file} of every ``*.json`` in ``folder`` and below it, less
    anything under a name starting with a dot (a sweep's unfinished runs, ``.partial-*``)."""
    return {
        p.relative_to(folder).as_posix(): p
        for p in sorted(folder.rglob("*.json"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    }


def _current_names(files: dict[str, Path]) -> tuple[dict[str, Path], dict[str, str]]:
    """``files`` keyed by their relative path with each part that is a renamed chapter's old stem (a sweep's
    chapter folder) or its results file (``<old stem>.json``) spelt with the chapter's stem of now, so that a
    folder from before a renumbering pairs with one from after; and {new key: path as found} of those renamed.
    A file under an old stem beside the same file under the new one keeps its own name (both are reported)."""
    out: dict[str, Path] = {}
    renamed: dict[str, str] = {}
    for rel, path in files.items():
        parts = [current_stem(Path(part).stem) + Path(part).suffix for part in PurePosixPath(rel).parts]
        now = PurePosixPath(*parts).as_posix()
        if now != rel and now not in files:
            out[now], renamed[now] = path, rel
        else:
            out[rel] = path
    return out, renamed


class UnreadableResults(UserError, ValueError):
    """A results file JSON cannot read (truncated, or not JSON): one line naming it and what to do."""


def _read(path: Path, folder: Path) -> dict:
    """The results file ``path`` (below ``folder``), flattened (:func:`flatten`); UnreadableResults when JSON
    cannot read it."""
    try:
        return flatten(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise UnreadableResults(
            f"{path} is not a results file JSON can read ({one_line(e)}): run the chapter that writes it again, or "
            f"move it out of {folder} to compare the rest"
        ) from None


def compare_folders(old: str | Path, new: str | Path, rtol: float = 1e-6, atol: float = 0.0) -> Comparison:
    """Compare the results files of ``old`` and ``new`` (and of the folders below them), matched by their
    relative paths. A file in one folder only is reported by its name. Raises FileNotFoundError (one line)
    when either folder is missing or holds no results file: there would be nothing to compare; UnreadableResults
    (one line) for a file JSON cannot read."""
    old, new = Path(old), Path(new)
    files: dict[Path, dict[str, Path]] = {}
    renamed: list[tuple[str, str]] = []
    for folder in (old, new):
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder} is not a folder (give data/results or data/results/<model>/<corpus>)")
        found = results_files(folder)
        if not found:
            raise FileNotFoundError(f"{folder} holds no results file (*.json), in it or below it")
        files[folder], was = _current_names(found)
        renamed += [(f"{folder}/{rel}", now) for now, rel in was.items()]
    cmp = Comparison(renamed=renamed)
    a_files, b_files = files[old], files[new]
    for name in sorted(set(a_files) | set(b_files)):
        if name not in b_files:
            cmp.only_old.append(name)
            continue
        if name not in a_files:
            cmp.only_new.append(name)
            continue
        a, b = _read(a_files[name], old), _read(b_files[name], new)
        cmp.by_file[name] = 0
        for path in sorted(set(a) | set(b)):
            full = f"{name}: {path}"
            if skipped(path):
                continue
            if path not in b:
                cmp.only_old.append(full)
                continue
            if path not in a:
                cmp.only_new.append(full)
                continue
            cmp.by_file[name] += 1
            same, rel = _equal(a[path], b[path], rtol, atol)
            if same:
                cmp.max_rel_diff = max(cmp.max_rel_diff, rel)
            elif _is_layer(path) and isinstance(a[path], int) and b[path] == a[path] + 1:
                cmp.renumbered.append((full, a[path], b[path]))
            else:
                cmp.changed.append((full, a[path], b[path]))
    return cmp
