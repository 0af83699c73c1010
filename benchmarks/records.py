"""The record every benchmark leaves: ``benchmarks/results/<script>.json``, one per script.

A benchmark builds a :class:`Record`, adds its figures and writes it::

    rec = Record(__file__, settings=vars(args))
    rec.figure("eager step", eager_s, "s")                         # a baseline: no ratio
    rec.figure("fused step", fused_s, "s", baseline="eager step")  # ratio fused_s / eager_s, from the same run
    rec.write()

A benchmark that does not apply on this machine (the GPU one without CUDA, the page one without a built book)
writes :func:`not_applicable` instead, so that ``make bench`` leaves one record per script either way.

A record holds: ``script``, ``applies`` (and ``reason`` where it does not), ``commit`` (``git rev-parse HEAD``
and whether the tree had uncommitted changes), ``date`` (UTC), ``machine`` (CPU model from /proc/cpuinfo,
logical cores, torch threads, torch and Python versions, the 1-minute load average before and after the run:
figures from a busy machine say so), ``command`` (the command line), ``settings`` (the script's options),
``figures`` and ``details`` (a script's structured extras, e.g. the GPU checks). Each figure is ``name``,
``value``, ``unit``, ``baseline`` (the name of a figure of the same record and unit, or null) and ``ratio``
(value / the baseline's value, null without a baseline): only ratios measured in the same run mean
anything on a shared machine.

A new run of a script overwrites its record (git history keeps the earlier ones): the file is always the
latest run, which is what prose may quote.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def commit() -> dict[str, Any]:
    """{"sha": HEAD or None outside a git checkout, "dirty": uncommitted changes to tracked files, or None}."""
    sha = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if sha else None
    return {"sha": sha, "dirty": None if status is None else bool(status)}


def cpu_model() -> str | None:
    """The CPU's model name from /proc/cpuinfo (None where there is none, e.g. off Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def machine() -> dict[str, Any]:
    """The machine and software a figure was measured on (torch only if the script imported it)."""
    torch = sys.modules.get("torch")
    return {
        "cpu": cpu_model(),
        "logical_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads() if torch else None,
        "torch": torch.__version__ if torch else None,
        "python": platform.python_version(),
    }


def _script_name(script: str | Path) -> str:
    name = Path(script).stem
    if not name.startswith("bench_"):
        raise ValueError(f"benchmark script {script!r}: pass the script's __file__ (a benchmarks/bench_*.py)")
    return name


class Record:
    """One run of one benchmark script: its figures, written by :meth:`write` as the script's record."""

    def __init__(self, script: str | Path, settings: dict[str, Any] | None = None) -> None:
        self.script = _script_name(script)
        self.settings = dict(settings or {})
        self.figures: list[dict[str, Any]] = []
        self.details: dict[str, Any] = {}
        self.load_before = _load()

    def figure(self, name: str, value: float, unit: str, baseline: str | None = None) -> float | None:
        """Add a figure; with ``baseline`` (a figure already added, of the same unit) also its ratio, value /
        the baseline's value, which it returns."""
        if any(f["name"] == name for f in self.figures):
            raise ValueError(f"figure {name!r} is recorded twice: give each figure of a run its own name")
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"figure {name!r} has value {value!r}: record a finite number, or leave the figure out")
        ratio = None
        if baseline is not None:
            base = next((f for f in self.figures if f["name"] == baseline), None)
            if base is None:
                raise ValueError(
                    f"figure {name!r} names baseline {baseline!r}, which this run has not recorded: "
                    "record the baseline first, in the same run"
                )
            if base["unit"] != unit:
                raise ValueError(f"figure {name!r} is in {unit!r}, its baseline {baseline!r} in {base['unit']!r}")
            if base["value"] == 0:
                raise ValueError(f"figure {name!r}: its baseline {baseline!r} is 0, so there is no ratio")
            ratio = float(value) / base["value"]
        self.figures.append({"name": name, "value": float(value), "unit": unit, "baseline": baseline, "ratio": ratio})
        return ratio

    def as_dict(self) -> dict[str, Any]:
        return _header(self.script, self.load_before) | {
            "applies": True,
            "settings": self.settings,
            "figures": self.figures,
            "details": self.details,
        }

    def write(self, results: Path = RESULTS) -> Path:
        """Write the record to ``results/<script>.json`` (replacing the last run's) and return its path."""
        return _write(self.as_dict(), results)


def not_applicable(script: str | Path, reason: str, results: Path = RESULTS) -> Path:
    """Record that ``script`` does not apply on this machine, and why (no figures); returns the record's path."""
    if not reason.strip():
        raise ValueError("a benchmark that does not apply must say why (reason is empty)")
    print(f"{_script_name(script)}: does not apply here: {reason}")
    return _write(_header(_script_name(script), _load()) | {"applies": False, "reason": reason, "figures": []}, results)


def _header(script: str, load_before: float | None) -> dict[str, Any]:
    return {
        "script": script,
        "commit": commit(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine() | {"load_average_1min": [load_before, _load()]},
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
    }


def _write(doc: dict[str, Any], results: Path) -> Path:
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{doc['script']}.json"
    path.write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"record: {path}")
    return path
