"""The comparison across models (chapter 8), read from the results table (:mod:`identifiability.aggregate`).

Models are compared only on runs with the same chapter parameters and seed, on the same corpus: for each
chapter the parameter set that the most models share is used (:func:`comparable`). A model's role comes
from the ``provenance.json`` that ``identifiability finetune`` / ``init-random`` write into its folder:
"pre-trained" (the reference, by default the embedded model), "fine-tuned: <task>", "random init", or
"other".
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from . import paths
from .effective import SEPARATOR, START
from .verdicts import Interval
from .verdicts.models import difference

REFERENCE_ROLE = "pre-trained"
CONTROL_ROLE = "random init"
_MASS = "mass_by_layer"  # chapter 3's attention mass per key category and layer
# (curve, chapter, quantity in the table ({corpus} is the run's corpus), layer of the first element, label)
CURVES = [
    ("identity", "04_token_identity", "linear_cos_cos_by_layer", 0, "token identity rate (linear map, cosine)"),
    ("own", "06_context_mixing", "layer_summary.{corpus}.own_median", 1, "HTA: median own-token share"),
    ("top_is_self", "06_context_mixing", "layer_summary.{corpus}.top_is_self_pct", 1, "HTA: % whose top is itself"),
    ("pearson", "03_effective_attention", "pearson_median_by_layer_longest", 1, "Pearson(raw, effective attention)"),
    # special tokens by role, whatever a model's tokenizer calls them ([SEP], </s>; [CLS], <s>)
    ("sep_raw", "03_effective_attention", f"{_MASS}.{SEPARATOR}.raw", 1, "separator attention mass, raw"),
    ("sep_effective", "03_effective_attention", f"{_MASS}.{SEPARATOR}.effective", 1, "separator mass, effective"),
    ("cls_raw", "03_effective_attention", f"{_MASS}.{START}.raw", 1, "start-token attention mass, raw"),
    ("cls_effective", "03_effective_attention", f"{_MASS}.{START}.effective", 1, "start-token mass, effective"),
]


def role(model: str, reference: str = paths.DEFAULT_MODEL) -> str:
    """A model's role in the comparison, from its folder's ``provenance.json`` (see the module docstring)."""
    if model == reference or (paths.is_default_model(model) and paths.is_default_model(reference)):
        return REFERENCE_ROLE
    prov = Path(model).expanduser() / "provenance.json"
    if prov.is_file():
        p = json.loads(prov.read_text(encoding="utf-8"))
        if p.get("kind") == "fine-tuned":
            return f"fine-tuned: {p.get('task', '?')}"
        if p.get("kind") == "random-init":
            return CONTROL_ROLE
    return "other"


def comparable(table: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """The rows to compare: seed ``seed``, and per chapter and corpus the parameter set that the most models
    share (ties: the reference's); one run per model (a sweep's over a book build of the same parameters)."""
    t = table[table.seed == seed]
    keep = []
    for (_chapter, _corpus), g in t.groupby(["chapter", "corpus"]):
        counts = g.groupby("params_key").model_key.nunique().sort_values(ascending=False)
        best = g[g.params_key == counts.index[0]]
        last_run = best.sort_values("source").groupby("model_key").run.last()  # "sweep" sorts after "book"
        keep.append(best[best.run.isin(last_run.values)])
    return pd.concat(keep, ignore_index=True) if keep else t.iloc[:0]


def models_of(rows: pd.DataFrame, reference: str = paths.DEFAULT_MODEL) -> pd.DataFrame:
    """One row per model: key, the name it was run under, its role."""
    m = rows.drop_duplicates("model_key")[["model_key", "model"]].copy()
    m["role"] = [role(x, reference) for x in m.model]
    order = {REFERENCE_ROLE: 0, CONTROL_ROLE: 2}
    return m.sort_values(by="role", key=lambda s: s.map(lambda r: order.get(r, 1))).reset_index(drop=True)


def curves(rows: pd.DataFrame, models: pd.DataFrame) -> pd.DataFrame:
    """Long table of the per-layer curves: model (its name in :func:`labels`), role, corpus, curve, label,
    layer, value."""
    out = []
    roles, names = dict(zip(models.model_key, models.role)), labels(models)
    for curve, chapter, quantity, first, label in CURVES:
        for corpus in sorted(rows.corpus.unique()):
            q = quantity.format(corpus=corpus)
            sel = rows[(rows.chapter == chapter) & (rows.corpus == corpus) & (rows.quantity == q)]
            for r in sel.itertuples():
                out.append(
                    {
                        "model": names.get(r.model_key, r.model_key),
                        "role": roles.get(r.model_key, "other"),
                        "corpus": corpus,
                        "curve": curve,
                        "label": label,
                        "layer": int(r.index) + first,
                        "value": r.value,
                    }
                )
    return pd.DataFrame(out, columns=["model", "role", "corpus", "curve", "label", "layer", "value"])


def without_separator(rows: pd.DataFrame, models: pd.DataFrame) -> list[str]:
    """The models (named as in :func:`labels`) with chapter 3 attention-mass curves but none for the separator:
    their tokenizer adds no separator token to a sentence."""
    mass = rows[(rows.chapter == "03_effective_attention") & rows.quantity.str.startswith(f"{_MASS}.")]
    has_sep = mass.quantity.str.startswith(f"{_MASS}.{SEPARATOR}.").groupby(mass.model_key).any()
    names = labels(models)
    return [names.get(k, k) for k in models.model_key if k in has_sep.index and not has_sep[k]]


def claims(rows: pd.DataFrame, models: pd.DataFrame) -> pd.DataFrame:
    """Each chapter's claims per model and corpus: estimate, interval, baseline, verdict (whole claims only)."""
    c = rows[(rows.kind == "claim") & ~rows.quantity.str.contains(".", regex=False)]
    c = c.merge(models[["model_key", "role"]], on="model_key", how="left")
    c["claim_no"] = c.quantity.str[1:].astype(int)
    cols = ["quantity", "model_key", "role", "corpus", "value", "low", "high", "baseline", "verdict"]
    return c.sort_values(["claim_no", "corpus", "model_key"])[cols].reset_index(drop=True)


def _rate_intervals(rows: pd.DataFrame, model_key: str, corpus: str) -> list[Interval] | None:
    """The per-layer identifiability rate (linear map, cosine) of one model with its intervals, layers 1..L."""
    sel = rows[(rows.model_key == model_key) & (rows.corpus == corpus) & (rows.chapter == "04_token_identity")]
    est = sel[sel.quantity == "linear_cos_cos_by_layer"].sort_values("index")
    ci = sel[sel.quantity.str.match(r"^linear_cos_cos_ci95_by_layer\.\d+$")]
    if est.empty or ci.empty:
        return None
    bounds = {int(q.rsplit(".", 1)[1]): list(g.sort_values("index").value) for q, g in ci.groupby("quantity")}
    return [Interval(float(v), *bounds[int(i)], n=1) for i, v in zip(est["index"], est.value) if int(i) >= 1]


def _c6_interval(rows: pd.DataFrame, model_key: str, corpus: str) -> Interval | None:
    """C6's last-layer identifiability rate (3 probe seeds, interval over test sentences) of one model."""
    sel = rows[(rows.model_key == model_key) & (rows.corpus == corpus) & (rows.kind == "claim")]
    sel = sel[sel.quantity == "C6"]
    if sel.empty or sel.low.isna().all():
        return None
    r = sel.iloc[0]
    return Interval(float(r.value), float(r.low), float(r.high), n=1)


def fine_tuning_inputs(rows: pd.DataFrame, models: pd.DataFrame, corpus: str) -> dict:
    """What C13 and C14 need, for ``corpus``: per fine-tuned model the last-layer and per-layer differences
    from the reference, and the random-initialisation control's."""
    roles = dict(zip(models.model_key, models.role))
    ref = next((k for k, r in roles.items() if r == REFERENCE_ROLE), None)
    out = {"last": {}, "layers": {}, "control_last": None, "control_layers": None}
    if ref is None:
        return out
    base, base_last = _rate_intervals(rows, ref, corpus), _c6_interval(rows, ref, corpus)
    for key, r in roles.items():
        if key == ref or not (r.startswith("fine-tuned") or r == CONTROL_ROLE):
            continue
        last, layers = _c6_interval(rows, key, corpus), _rate_intervals(rows, key, corpus)
        d_last = difference(last, base_last) if last and base_last else None
        d_layers = (
            [difference(a, b) for a, b in zip(layers, base)] if layers and base and len(layers) == len(base) else None
        )
        if r == CONTROL_ROLE:
            out["control_last"], out["control_layers"] = d_last, d_layers
            continue
        if d_last is not None:
            out["last"][key] = d_last
        if d_layers is not None:
            out["layers"][key] = d_layers
    return out


def _fmt(x) -> str:
    return "—" if x is None or x != x else f"{x:.3g}"


def labels(models: pd.DataFrame) -> dict[str, str]:
    """A short name per model for column heads: its role where no other model has it, else its key."""
    counts = models.role.value_counts()
    return {k: r if counts[r] == 1 and r != "other" else k for k, r in zip(models.model_key, models.role)}


def claims_markdown(df: pd.DataFrame, models: pd.DataFrame) -> str:
    """:func:`claims` as a Markdown table: one row per claim and corpus, one column per model (named by
    :func:`labels`, in the order of ``models``), each cell the verdict, the estimate with its interval and
    the baseline; "—" where a model has no run."""
    names = labels(models)
    head = ["claim", "corpus", *names.values()]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    cells = {(r.quantity, r.corpus, r.model_key): r for r in df.itertuples()}
    for quantity, corpus in dict.fromkeys(zip(df.quantity, df.corpus)):
        row = [quantity, corpus]
        for key in names:
            r = cells.get((quantity, corpus, key))
            if r is None:
                row.append("—")
                continue
            est = _fmt(r.value) + (f" ({_fmt(r.low)} to {_fmt(r.high)})" if pd.notna(r.low) and r.low != r.high else "")
            base = f"; baseline {_fmt(r.baseline)}" if pd.notna(r.baseline) else ""
            row.append(f"**{r.verdict}** {est}{base}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
