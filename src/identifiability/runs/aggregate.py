"""Every finished run's results in one table (Parquet), and their spread over seeds.

One row per model × corpus × seed × chapter × quantity: each claim's verdict (``kind="claim"``: estimate,
95% interval, baseline, verdict; a compound claim's parts as ``C11.local`` and so on) and every number a
chapter recorded (``kind="value"``; a list of numbers gives one row per element, its position in
``index``, e.g. a per-layer curve). Book builds (``data/results/<model>/<corpus>/``) and sweep runs
(``data/sweeps/...``, finished ones only) are both read. The cross-model page and any notebook read the
table with pandas (:func:`read_table`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from ..base import paths
from ..base.fileio import atomic_write, read_json
from ..base.results import ADOPTED, RECORDED_FROM, params_key
from ..chapters.contract import current_stem, superseded
from ..models import keys

CHAPTER_FILE = re.compile(r"^\d\d_[a-z_]+\.json$")
COLUMNS = [
    "source",  # "book" or "sweep"
    "run",  # the results file, relative to the data folder
    "model",
    "model_key",
    "content_key",
    "corpus",
    "seed",
    "chapter",
    "params_key",  # hash of the chapter's parameters other than model, corpus, seed and results_dir
    "kind",  # "claim" or "value"
    "quantity",
    "index",  # position in a list of numbers (e.g. the layer), else missing
    "value",  # a claim's estimate, or the number
    "low",
    "high",
    "baseline",
    "verdict",
]
_NOT_PARAMS = ("model", "corpus", "seed", "results_dir", "device")


def results_files(data_root: Path | None = None) -> Iterator[tuple[str, Path]]:
    """("book" | "sweep", path) of every chapter results file of finished runs."""
    root = data_root or paths.data_root()
    for f in sorted((root / "results").glob("*/*/*.json")):
        # a results file under a chapter's earlier stem beside the newer build's file is the same chapter's older run
        if CHAPTER_FILE.match(f.name) and not superseded(f):
            yield "book", f
    for manifest in sorted((root / "sweeps").rglob("run.json")):
        if any(part.startswith(".partial-") for part in manifest.parts):
            continue
        chapter = read_json(manifest)["chapter"]
        if (manifest.parent / f"{chapter}.json").is_file():
            yield "sweep", manifest.parent / f"{chapter}.json"


def _number(x) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def _values(obj, prefix: str) -> Iterator[tuple[str, int | None, float]]:
    """(quantity, index, value) of every number in a chapter's results, lists of numbers by position."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _values(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, list):
        if obj and all(_number(v) is not None or v is None for v in obj):
            for i, v in enumerate(obj):
                if _number(v) is not None:
                    yield prefix, i, float(v)
        else:
            for i, v in enumerate(obj):
                yield from _values(v, f"{prefix}.{i}")
    elif _number(obj) is not None:
        yield prefix, None, float(obj)


def _claims(claims: dict) -> Iterator[dict]:
    for cid, v in claims.items():
        yield from _claim_rows(cid, v)


def _claim_rows(cid: str, v: dict) -> Iterator[dict]:
    ci = v.get("ci95") or (None, None)
    yield {
        "kind": "claim",
        "quantity": cid,
        "value": _number(v.get("estimate")),
        "low": _number(ci[0]),
        "high": _number(ci[1]),
        "baseline": _number(v.get("baseline")),
        "verdict": v.get("verdict"),
    }
    for part in v.get("parts", []):
        yield from _claim_rows(part.get("claim") or f"{cid}.part", part)


def _model_key(name: str | None) -> str:
    """The model key of a results file from before files recorded it: its model resolved here, or, a folder
    not on this machine, its name made safe."""
    try:
        return keys.model_ref(name).key
    except keys.ModelNotAvailable:
        return paths.safe_key(name)


def rows_of(doc: dict, source: str, run: str) -> list[dict]:
    """The table rows of one chapter results file (as :meth:`Chapter.save` writes it)."""
    p = doc.get("params", {})
    prov = doc.get("provenance", {})
    base = {
        "source": source,
        "run": run,
        "model": str(p.get("model") or paths.DEFAULT_MODEL),
        "model_key": prov.get("key") or _model_key(p.get("model")),
        "content_key": prov.get("content_key", ""),
        "corpus": str(p.get("corpus", "")),
        "seed": int(p.get("seed", 0)),
        "chapter": current_stem(doc.get("chapter", "")),  # a run of an older build, under the stem of now
        "params_key": params_key({k: v for k, v in p.items() if k not in _NOT_PARAMS}),
    }
    results = doc.get("results", {})
    adopted = results.get(ADOPTED) or {}  # a recorded run's verdicts, judged on its models: not this model's
    rows = [
        {**base, **c, "index": None}
        for c in _claims({k: v for k, v in results.get("claims", {}).items() if k not in adopted})
    ]
    rows += [
        {**base, "kind": "value", "quantity": q, "index": i, "value": x}
        for q, i, x in _values({k: v for k, v in results.items() if k not in ("claims", ADOPTED, RECORDED_FROM)}, "")
    ]
    return rows


def build_table(data_root: Path | None = None) -> pd.DataFrame:
    """The table of every finished run under the data folder (see the module docstring)."""
    root = data_root or paths.data_root()
    rows: list[dict] = []
    for source, f in results_files(root):
        try:
            doc = read_json(f)
        except (OSError, json.JSONDecodeError):
            continue  # being replaced right now: the next rebuild reads it
        rows += rows_of(doc, source, str(f.relative_to(root)))
    df = pd.DataFrame(rows, columns=COLUMNS)
    df["index"] = df["index"].astype("Int64")
    df["seed"] = df["seed"].astype("Int64")
    for c in ("value", "low", "high", "baseline"):
        df[c] = df[c].astype("float64")
    return df


def write_table(data_root: Path | None = None, path: Path | None = None) -> Path:
    """Rebuild the table and write it atomically (default: ``data/results.parquet``)."""
    df = build_table(data_root)
    path = path or (data_root / "results.parquet" if data_root else paths.table_file())
    atomic_write(path, lambda p: df.to_parquet(p, index=False))
    return path


def read_table(path: Path | None = None) -> pd.DataFrame:
    return pd.read_parquet(path or paths.table_file())


def seed_spread(df: pd.DataFrame) -> pd.DataFrame:
    """Per model × corpus × chapter × parameters × quantity: the spread of the estimate over seeds (mean,
    sd, min, max, number of seeds) next to the chapter's own 95% interval (its mean bounds over seeds), the
    verdicts the seeds gave (e.g. ``holds ×3``) and where its runs come from (``sources``: ``book``,
    ``sweep``, or ``book, sweep`` where a book build and a sweep ran the same parameters on a seed, counted
    once). A book build and a sweep on other parameters are separate rows, told apart by ``sources``."""
    keys = ["model_key", "corpus", "chapter", "params_key", "kind", "quantity", "index"]
    sources = (
        df.groupby(keys, dropna=False)["source"]
        .agg(lambda s: ", ".join(sorted(set(s.dropna()))))
        .rename("sources")
        .reset_index()
    )
    d = df.drop_duplicates(subset=[*keys, "seed"], keep="last")  # a book build and a sweep of the same run

    def verdicts(s: pd.Series) -> str:
        counts = s.dropna().value_counts()
        return ", ".join(f"{v} ×{n}" for v, n in counts.items())

    g = d.groupby(keys, dropna=False)
    out = g.agg(
        seeds=("seed", "nunique"),
        mean=("value", "mean"),
        sd=("value", "std"),
        min=("value", "min"),
        max=("value", "max"),
        own_low=("low", "mean"),
        own_high=("high", "mean"),
        verdicts=("verdict", verdicts),
    ).reset_index()
    return out.merge(sources, on=keys, how="left")
