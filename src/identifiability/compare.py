"""Compare two folders of chapter results files: what changed, apart from timings and paths.

    identifiability compare data/baseline/all-MiniLM-L6-v2/lee data/results/all-MiniLM-L6-v2/lee

Used to show that a refactoring changed no number, and by readers to compare two runs. Every JSON value is
flattened to a path (``03_effective_attention.json: results.pearson_median_longest``); numbers are equal
when they agree to ``rtol`` (relative; default 1e-6) or ``atol`` (absolute; default 0, so that a tolerance
of 1e-10 and one of 1e-13 count as different); timings, page weights and file paths are skipped. A
field named ``layer`` (or ``*_layer``) whose new value is the old one plus 1 is reported apart, as the move
from 0-based to the book's 1..L layer numbering.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

# Keys whose values are expected to differ between two runs of the same computation.
SKIPPED = re.compile(r"(^|\.)([^.\[]*seconds[^.\[]*|[^.\[]*_s|runtime[^.\[]*|page_bytes|results_dir|timings?)(\.|\[|$)")


@dataclass
class Comparison:
    """Differences between two results folders, by kind."""

    changed: list[tuple[str, object, object]] = field(default_factory=list)
    renumbered: list[tuple[str, object, object]] = field(default_factory=list)
    only_old: list[str] = field(default_factory=list)
    only_new: list[str] = field(default_factory=list)
    compared: int = 0
    max_rel_diff: float = 0.0

    @property
    def identical(self) -> bool:
        return not (self.changed or self.only_old or self.only_new)

    def report(self, limit: int = 60) -> str:
        lines = [
            f"{self.compared} values compared; largest relative difference among equal numbers {self.max_rel_diff:.1e}"
        ]
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


def _is_layer(path: str) -> bool:
    last = re.sub(r"\[\d+\]$", "", path.rsplit(".", 1)[-1])
    return last == "layer" or last.endswith("_layer")


def compare_folders(old: str | Path, new: str | Path, rtol: float = 1e-6, atol: float = 0.0) -> Comparison:
    """Compare every ``*.json`` results file present in ``old`` or ``new``."""
    old, new = Path(old), Path(new)
    if not old.is_dir() or not new.is_dir():
        missing = old if not old.is_dir() else new
        raise FileNotFoundError(f"{missing} is not a folder of results files (data/results/<model>/<corpus>)")
    cmp = Comparison()
    names = sorted({p.name for p in old.glob("*.json")} | {p.name for p in new.glob("*.json")})
    for name in names:
        a = flatten(json.loads((old / name).read_text())) if (old / name).is_file() else {}
        b = flatten(json.loads((new / name).read_text())) if (new / name).is_file() else {}
        for path in sorted(set(a) | set(b)):
            full = f"{name}: {path}"
            if SKIPPED.search(path):
                continue
            if path not in b:
                cmp.only_old.append(full)
                continue
            if path not in a:
                cmp.only_new.append(full)
                continue
            cmp.compared += 1
            same, rel = _equal(a[path], b[path], rtol, atol)
            if same:
                cmp.max_rel_diff = max(cmp.max_rel_diff, rel)
            elif _is_layer(path) and isinstance(a[path], int) and b[path] == a[path] + 1:
                cmp.renumbered.append((full, a[path], b[path]))
            else:
                cmp.changed.append((full, a[path], b[path]))
    return cmp
