"""The comparison across models (chapter 9), read from the results table (:mod:`identifiability.runs.aggregate`).

Models are compared only on runs with the same chapter parameters and seed, on the same corpus: for each
chapter the parameter set that the most models share is used (:func:`comparable`). A model's role comes
from the ``provenance.json`` that ``identifiability finetune`` / ``init-random`` write into its folder:
"pre-trained" (the reference, by default the embedded model), "fine-tuned: <task>", "random init", or
"other".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ..base import paths
from ..base.fileio import read_json
from ..base.stats import Interval, unpaired_difference
from ..chapters.contract import COMPARED_ATTENTION, COMPARED_HTA, COMPARED_IDENTITY, by_role
from ..corpus.token_roles import SEPARATOR, START

# the chapters whose results the comparison reads, by their file stems (which only the contract spells)
CHAPTER_3, CHAPTER_4, CHAPTER_6 = (by_role(r).stem for r in (COMPARED_ATTENTION, COMPARED_IDENTITY, COMPARED_HTA))
SENTENCE_RATES = "linear_rate_by_sentence"  # chapter 4's per-sentence rates: what C13 and C14 pair
REFERENCE_ROLE = "pre-trained"
CONTROL_ROLE = "random init"
_MASS = "mass_by_layer"  # chapter 3's attention mass per key category and layer
# (curve, chapter, quantity in the table ({corpus} is the run's corpus), layer of the first element, label)
CURVES = [
    ("identity", CHAPTER_4, "linear_cos_cos_by_layer", 0, "token identity rate (linear map, cosine)"),
    ("own", CHAPTER_6, "layer_summary.{corpus}.own_median", 1, "HTA: median own-token share"),
    ("top_is_self", CHAPTER_6, "layer_summary.{corpus}.top_is_self_pct", 1, "HTA: % whose top is itself"),
    ("pearson", CHAPTER_3, "pearson_median_by_layer_longest", 1, "Pearson(raw, effective attention)"),
    # special tokens by role, whatever a model's tokenizer calls them ([SEP], </s>; [CLS], <s>)
    ("sep_raw", CHAPTER_3, f"{_MASS}.{SEPARATOR}.raw", 1, "separator attention mass, raw"),
    ("sep_effective", CHAPTER_3, f"{_MASS}.{SEPARATOR}.effective", 1, "separator mass, effective"),
    ("cls_raw", CHAPTER_3, f"{_MASS}.{START}.raw", 1, "start-token attention mass, raw"),
    ("cls_effective", CHAPTER_3, f"{_MASS}.{START}.effective", 1, "start-token mass, effective"),
]


def role(model: str, reference: str = paths.DEFAULT_MODEL, prov: dict | None = None) -> str:
    """A model's role in the comparison, from its folder's ``provenance.json`` (``prov``: as read already, e.g.
    from a recorded run; default: read from the folder) (see the module docstring)."""
    if model == reference or (paths.is_default_model(model) and paths.is_default_model(reference)):
        return REFERENCE_ROLE
    p = provenance(model) if prov is None else prov
    if p.get("kind") == "fine-tuned":
        return f"fine-tuned: {p.get('task', '?')}"
    if p.get("kind") == "random-init":
        return CONTROL_ROLE
    return "other"


def comparable(table: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """The rows to compare: seed ``seed``, and per chapter and corpus the parameter set that the most models
    share (ties: the one with more rows, i.e. more measured, e.g. ``make compare-full`` over ``make compare``);
    one run per model (a sweep's over a book build of the same parameters)."""
    t = table[table.seed == seed]
    keep = []
    for (_chapter, _corpus), g in t.groupby(["chapter", "corpus"]):
        sets = g.groupby("params_key").agg(models=("model_key", "nunique"), rows=("quantity", "size"))
        best = g[g.params_key == sets.sort_values(["models", "rows"], ascending=False, kind="stable").index[0]]
        last_run = best.sort_values("source").groupby("model_key").run.last()  # "sweep" sorts after "book"
        keep.append(best[best.run.isin(last_run.values)])
    return pd.concat(keep, ignore_index=True) if keep else t.iloc[:0]


def models_of(
    rows: pd.DataFrame, reference: str = paths.DEFAULT_MODEL, provenances: Mapping[str, dict] | None = None
) -> pd.DataFrame:
    """One row per model: key, the name it was run under, its role, and its folder's ``provenance.json``
    ({} for a hub model). ``provenances`` ({name: provenance}, e.g. a recorded run's) replaces reading the
    folders, whose relative names resolve against the working directory only."""
    m = rows.drop_duplicates("model_key")[["model_key", "model"]].copy()
    m["provenance"] = [provenance(x) if provenances is None else dict(provenances.get(x) or {}) for x in m.model]
    m["role"] = [role(x, reference, p) for x, p in zip(m.model, m.provenance)]
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


def compared(curves_: pd.DataFrame) -> pd.DataFrame:
    """The curves of the corpora on which at least two models have curves, when some corpus has: a corpus with
    one model's curves compares nothing (a plain build's book corpus, beside the held-out text its control
    ran on). All of them when no corpus has two models."""
    per_corpus = curves_.groupby("corpus").model.nunique()
    shared = per_corpus[per_corpus >= 2].index
    return curves_[curves_.corpus.isin(shared)].reset_index(drop=True) if len(shared) else curves_


def without_separator(rows: pd.DataFrame, models: pd.DataFrame) -> list[str]:
    """The models (named as in :func:`labels`) with chapter 3 attention-mass curves but none for the separator:
    their tokenizer adds no separator token to a sentence."""
    mass = rows[(rows.chapter == CHAPTER_3) & rows.quantity.str.startswith(f"{_MASS}.")]
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
    sel = rows[(rows.model_key == model_key) & (rows.corpus == corpus) & (rows.chapter == CHAPTER_4)]
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


def quadrature_inputs(rows: pd.DataFrame, models: pd.DataFrame, corpus: str) -> dict:
    """What the original rules of C13 and C14 take, for ``corpus``: per fine-tuned model the last-layer and
    per-layer differences from the reference (two unpaired runs, half-widths in quadrature), and the
    random-initialisation control's."""
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
        d_last = unpaired_difference(last, base_last) if last and base_last else None
        d_layers = (
            [unpaired_difference(a, b) for a, b in zip(layers, base)]
            if layers and base and len(layers) == len(base)
            else None
        )
        if r == CONTROL_ROLE:
            out["control_last"], out["control_layers"] = d_last, d_layers
            continue
        if d_last is not None:
            out["last"][key] = d_last
        if d_layers is not None:
            out["layers"][key] = d_layers
    return out


# --------------------------------------------------------------------------------------------------
# The paired comparison of C13 and C14 (amended rules): chapter 4's per-sentence rates
# --------------------------------------------------------------------------------------------------


def sentence_rates(rows: pd.DataFrame, model_key: str, corpus: str, root: Path) -> dict | None:
    """Chapter 4's per-sentence rates of one model on ``corpus`` (``linear_rate_by_sentence``: its
    ``sentence_keys``, ``probe_seeds``, ``layers`` and ``rate`` (probe seeds, sentences, layers)), read from
    the run's results file under the data folder ``root``: the table keeps numbers, not the sentences' keys
    that pair two runs."""
    sel = rows[(rows.model_key == model_key) & (rows.corpus == corpus) & (rows.chapter == CHAPTER_4)]
    for run in dict.fromkeys(sel.run):
        try:
            found = read_json(root / run).get("results", {}).get(SENTENCE_RATES)
        except (OSError, ValueError):
            continue
        if found and found.get("rate"):
            return found
    return None


def _occurrences(keys: list[str]) -> list[str]:
    """Sentence keys made unique by occurrence ("k#0", "k#1"): a corpus may hold one sentence twice (a story
    the Lee articles repeat), and the k-th copy pairs with the k-th."""
    seen: dict[str, int] = {}
    out = []
    for k in keys:
        out.append(f"{k}#{seen.get(k, 0)}")
        seen[k] = seen.get(k, 0) + 1
    return out


def _shared(reference: dict, fine_tuned: list[dict]) -> tuple[dict[str, int], list[dict[str, int]], list[str]]:
    """(the reference's index per sentence, each run's, the sentences every run measured in the reference's
    order), sentences named by occurrence (:func:`_occurrences`)."""
    ref_keys = _occurrences(reference["sentence_keys"])
    runs = [dict(zip(_occurrences(r["sentence_keys"]), range(len(r["sentence_keys"])))) for r in fine_tuned]
    if len({len(r["layers"]) for r in [reference, *fine_tuned]}) != 1:
        raise ValueError("the runs to pair have different numbers of layers")
    return dict(zip(ref_keys, range(len(ref_keys)))), runs, [k for k in ref_keys if all(k in run for run in runs)]


def reference_rates(reference: dict, fine_tuned: list[dict]) -> tuple[np.ndarray, np.ndarray, bool]:
    """The pre-trained model's rates on the sentences :func:`paired_differences` pairs, in its order, and the
    test tokens of each of those sentences.

    Returns:
        (Q, n, L) the reference's rate per probe seed, test sentence and layer; (n,) test tokens per sentence;
        and whether the runs recorded them (chapter 4's ``tokens``). A run that did not is read for the
        least denominator of every rate measured on the sentence (by any run, seed and layer): a lower
        bound of its tokens, so the variance a power is computed from is, if anything, too large.
    """
    ref_index, runs, shared = _shared(reference, fine_tuned)
    cols = [ref_index[k] for k in shared]
    ref = np.asarray(reference["rate"], dtype=float)[:, cols]
    if reference.get("tokens"):
        return ref, np.asarray(reference["tokens"], dtype=int)[cols], True
    seen = [ref] + [np.asarray(r["rate"], dtype=float)[:, [run[k] for k in shared]] for r, run in zip(fine_tuned, runs)]
    rates = np.concatenate([np.moveaxis(x, 1, 0).reshape(len(shared), -1) for x in seen], axis=1)  # (n, all)
    return ref, np.array([_denominator(r) for r in rates]), False


def _denominator(rates: np.ndarray, most: int = 512) -> int:
    """The least t with every finite rate a multiple of 1/t (rates are recorded to 6 decimals), 1 if none."""
    r = rates[np.isfinite(rates)]
    for t in range(1, most + 1):
        if np.all(np.abs(r * t - np.round(r * t)) < 1e-6 * t + 1e-9):
            return t
    return most


def paired_differences(reference: dict, fine_tuned: list[dict]) -> tuple[np.ndarray, list[str]]:
    """d[f, p, q, s, l] = rate of fine-tune f with probe seed p on test sentence s at layer l, minus the
    pre-trained model's rate with its probe seed q on the same sentence and layer.

    Both runs' probe seeds are kept as axes of their own, so that one bootstrap (``stats.hierarchical_resamples``
    with fine-tune seeds, the fine-tune's probe seeds and the reference's probe seeds as three seed levels)
    resamples the reference's probe seeds too: C13 asks whether fine-tuning moves the rate away from the
    pre-trained model's, and the reference's rate is itself measured through probes whose seed matters.
    Taking the reference's mean over its probe seeds as a fixed baseline would leave that spread out; pairing
    probe seed k with k would treat two probes trained on different hidden states as one unit. The mean of
    d over every axis but the layers is the fine-tuned mean minus the reference mean either way.

    Args:
        reference, fine_tuned: :func:`sentence_rates` of the pre-trained model and of each fine-tune seed.
    Returns:
        (F, P, Q, n, L) differences, on the n test sentences every run measured (in the reference's order)
        and the P probe seeds every fine-tune has; and the n sentence keys.
    """
    ref_index, runs, shared = _shared(reference, fine_tuned)
    seeds = [s for s in fine_tuned[0]["probe_seeds"] if all(s in r["probe_seeds"] for r in fine_tuned)]
    ref = np.asarray(reference["rate"], dtype=float)[:, [ref_index[k] for k in shared]]  # (Q, n, L)
    ft = np.stack(
        [
            np.asarray(r["rate"], dtype=float)[[r["probe_seeds"].index(s) for s in seeds]][:, [run[k] for k in shared]]
            for r, run in zip(fine_tuned, runs)
        ]
    )  # (F, P, n, L)
    d = ft[:, :, None] - ref[None, None]  # (F, P, Q, n, L)
    return d, [k.split("#", 1)[0] for k in shared]


def provenance(model: str) -> dict:
    """A model folder's ``provenance.json`` (what ``finetune`` / ``init-random`` wrote), or {}."""
    prov = Path(model).expanduser() / "provenance.json"
    return json.loads(prov.read_text(encoding="utf-8")) if prov.is_file() else {}


def fine_tune_groups(rows: pd.DataFrame, models: pd.DataFrame) -> tuple[str | None, dict[str, list[str]], str | None]:
    """(reference key, fine-tune seeds per task, random-initialisation control key) for the paired comparison:
    the fine-tunes and the control made from the reference itself (their provenance names its content key;
    a model without one is taken as made from it), grouped by task; a task's fine-tunes with other settings
    than the seed form a group of their own, named by its settings' hash."""
    roles = dict(zip(models.model_key, models.role))
    ref = next((k for k, r in roles.items() if r == REFERENCE_ROLE), None)
    if ref is None:
        return None, {}, None
    ref_content = rows[rows.model_key == ref].content_key.dropna()
    ref_content = ref_content.iloc[0] if len(ref_content) else ""
    provs = _provenances(models)
    groups: dict[tuple[str, str], list[str]] = {}
    control = None
    for key, r in roles.items():
        if key == ref or not (r.startswith("fine-tuned") or r == CONTROL_ROLE):
            continue
        prov = provs[key]
        base = (prov.get("base") if r != CONTROL_ROLE else prov.get("like")) or {}
        if ref_content and base.get("content_key") and base["content_key"] != ref_content:
            continue  # made from another model: not a change of this reference
        if r == CONTROL_ROLE:
            control = control or key
            continue
        ident = {k: v for k, v in (prov.get("identity") or {}).items() if k != "seed"}
        groups.setdefault((r.split(": ", 1)[-1], json.dumps(ident, sort_keys=True)), []).append(key)
    named = {}
    for (task, ident), keys in groups.items():
        same_task = sum(t == task for t, _ in groups) > 1
        name = f"{task} ({hashlib.sha1(ident.encode()).hexdigest()[:6]})" if same_task else task
        named[name] = keys
    return ref, named, control


def _provenances(models: pd.DataFrame) -> dict[str, dict]:
    """{model key: its provenance}: :func:`models_of`'s column, else read from each folder."""
    if "provenance" in models:
        return dict(zip(models.model_key, models.provenance))
    return {k: provenance(n) for k, n in zip(models.model_key, models.model)}


def labels(models: pd.DataFrame) -> dict[str, str]:
    """A short name per model for column heads: its role where no other model has it, its role and seed where
    its provenance names one (the fine-tune seeds of one task), else its key."""
    counts = models.role.value_counts()
    provs = _provenances(models)
    out = {}
    for key, r in zip(models.model_key, models.role):
        seed = provs[key].get("seed") if r != "other" and counts[r] > 1 else None
        out[key] = r if counts[r] == 1 and r != "other" else f"{r}, seed {seed}" if seed is not None else key
    return out
