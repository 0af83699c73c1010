"""Chapter 9's study: every model this copy of the book has results for, compared on shared parameters, and
the paired evidence of the fine-tuning claims C13 and C14."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..base import paths
from ..base.stats import LEVEL, RESAMPLES, Interval, chance_of_holding, hierarchical_resamples, sentences_for_power
from ..evidence.across_models import FineTuning, Paired
from ..recorded import compare as record_compare
from ..recorded import store as recorded
from ..recorded.store import Recorded
from ..runs import aggregate, model_comparison
from . import Study, data

SCALES = (2, 4, 8, 16, 32, 64)  # unit multiples at which an inconclusive "peak late" is re-read


def _interval(estimate: float, draws: np.ndarray, n: int) -> Interval:
    alpha = (1 - LEVEL) / 2
    if n < 2:
        return Interval(float(estimate), np.nan, np.nan, n, "test sentences")
    low, high = float(np.quantile(draws, alpha)), float(np.quantile(draws, 1 - alpha))
    return Interval(float(estimate), low, high, n, "test sentences")


def _late_share(draws: np.ndarray, layers: tuple[int, ...], L: int) -> float:
    """Share of draws (R, L) whose largest |d_l| among ``layers`` (1-based) lies in l > L/2; NaN without any."""
    if not layers:
        return float("nan")
    cols = np.asarray(layers) - 1
    return float(np.mean(np.asarray(layers)[np.argmax(np.abs(draws[:, cols]), axis=1)] > L / 2))


def paired(
    d: np.ndarray,
    reference: np.ndarray,
    tokens: np.ndarray | None = None,
    *,
    ceiling: float,
    seed: int = 0,
    n_resamples: int = RESAMPLES,
    seeds_fixed: bool = False,
    tokens_recorded: bool = True,
) -> Paired:
    """The paired evidence of C13 and C14 from per-sentence differences, one hierarchical bootstrap
    (``stats.hierarchical_resamples``) whose draws give every layer's interval, the reference's rate per layer,
    and, on the layers off the ceiling, |d_m| - |d_f| and the share of draws peaking late, jointly.

    Args:
        d: (F, P, Q, n, L) differences d_l per test sentence, layers 1..L
            (:func:`identifiability.runs.model_comparison.paired_differences`): three seed levels (fine-tune seeds,
            their
            probe seeds, the reference's probe seeds), resampled before the sentences.
        reference: (Q, n, L) the reference's rates on the same sentences
            (:func:`identifiability.runs.model_comparison.reference_rates`). They are resampled with the differences
            (stacked beside them, repeated over the fine-tune axes, whose resampling leaves their mean as it is),
            so each draw's reference rate is that of the reference probe seeds and sentences of its d_l.
        tokens: (n,) test tokens per sentence, kept for C13's power at the ceiling.
        ceiling: a layer is off the ceiling when the upper bound of its reference rate lies below this
            (C14's rule: 1 - C13's band, which the chapter passes).
        seeds_fixed: average the seeds and resample the sentences only (the claims table's "unit" alternative).
    Returns:
        :class:`Paired`. Its variance split reads the bootstrap: the last layer's variance over draws V and its
        variance with the seeds averaged and only sentences resampled V_s; ``seed_var`` = V - V_s (what more
        sentences do not shrink; 0 with the seeds fixed) and ``sentence_var`` = n V_s.
    """
    d = np.asarray(d, dtype=float)
    F, P, _, n, L = d.shape
    ref = np.asarray(reference, dtype=float)
    if ref.shape != d.shape[2:]:
        raise ValueError(f"the reference's rates {ref.shape} do not match the differences {d.shape}")
    both = np.concatenate([d, np.broadcast_to(ref, d.shape)], axis=-1)  # (F, P, Q, n, 2L): d_l, then the rate
    est = np.nanmean(both.reshape(-1, n, 2 * L), axis=0)  # (n, 2L): seeds averaged
    est_l = np.nanmean(est, axis=0)  # (2L,)
    if n < 2:
        draws = sentence_draws = np.full((1, 2 * L), np.nan)
    else:
        sentence_draws = hierarchical_resamples(est, 0, seed=seed, n_resamples=n_resamples)  # (R, 2L)
        draws = sentence_draws if seeds_fixed else hierarchical_resamples(both, 3, seed=seed, n_resamples=n_resamples)
    rate = tuple(_interval(est_l[L + k], draws[:, L + k], n) for k in range(L))
    off = tuple(k + 1 for k, r in enumerate(rate) if r.has_interval and r.high < ceiling)
    est_l, draws, sentence_draws = est_l[:L], draws[:, :L], sentence_draws[:, :L]
    if len(off) >= 2:
        f, m = off[0] - 1, off[-1] - 1
        gap = _interval(abs(est_l[m]) - abs(est_l[f]), np.abs(draws[:, m]) - np.abs(draws[:, f]), n)
    else:
        gap = Interval(float("nan"), float("nan"), float("nan"), n, "test sentences")
    v_all, v_sent = float(np.var(draws[:, -1])), float(np.var(sentence_draws[:, -1]))
    return Paired(
        layers=tuple(_interval(est_l[k], draws[:, k], n) for k in range(L)),
        gap=gap,
        peak_late=_late_share(draws, off, L) if n >= 2 else float("nan"),
        seed_var=max(0.0, v_all - v_sent),
        sentence_var=n * v_sent,
        ft_seeds=F,
        probe_seeds=P,
        sentences=n,
        peak_late_scaled=tuple((m, _late_share(est_l + (draws - est_l) / np.sqrt(m), off, L)) for m in SCALES)
        if n >= 2
        else (),
        reference=rate,
        ceiling=ceiling,
        off_ceiling=off,
        layer_var=tuple(float(np.var(draws[:, k])) for k in range(L)),
        tokens=() if tokens is None else tuple(int(t) for t in tokens),
        tokens_recorded=tokens_recorded,
    )


def fine_tuning(
    rows: pd.DataFrame, models: pd.DataFrame, corpus: str, root: Path, band: float, power: float, seed: int = 0
) -> tuple[FineTuning, dict]:
    """C13's and C14's evidence on ``corpus`` (the held-out text): per fine-tuned task the paired differences
    over its fine-tune seeds (:func:`identifiability.runs.model_comparison.paired_differences`) and their bootstrap,
    with the
    seeds resampled (the rule) and fixed (the "unit" alternative); the random-initialisation control's; and the
    original rules' unpaired inputs. Also what the page says of each task's power: fine-tune, probe and
    reference probe seeds, test sentences, the variance split, the chance that the interval lies inside
    ±``band`` at a true difference of 0 and the sentences that make it ``power`` (the chapter passes C13's).
    ``band`` also sets C14's ceiling: a layer is off it when its reference rate's upper bound lies below
    1 - ``band``."""
    ref, groups, control = model_comparison.fine_tune_groups(rows, models)
    original = model_comparison.quadrature_inputs(rows, models, corpus)
    ev = dict(
        original_last=original["last"],
        original_layers=original["layers"],
        original_control_last=original["control_last"],
        original_control_layers=original["control_layers"],
    )
    base = model_comparison.sentence_rates(rows, ref, corpus, root) if ref else None
    if base is None:
        return FineTuning(**ev), {}
    tasks, unit, diffs, chances = {}, {}, {}, {}

    def both(runs: list[dict]) -> tuple[np.ndarray, Paired, Paired]:  # seeds resampled (the rule), fixed
        d, _ = model_comparison.paired_differences(base, runs)
        ref, tokens, recorded = model_comparison.reference_rates(base, runs)
        kw = dict(ceiling=1 - band, seed=seed, tokens_recorded=recorded)
        return d, paired(d, ref, tokens, **kw), paired(d, ref, tokens, seeds_fixed=True, **kw)

    for task, keys in sorted(groups.items()):
        runs = [r for r in (model_comparison.sentence_rates(rows, k, corpus, root) for k in keys) if r is not None]
        if not runs:
            continue
        diffs[task], tasks[task], unit[task] = both(runs)
        chances[task] = _power(tasks[task], diffs[task].shape[2], band, power)
    ctrl = ctrl_unit = None
    runs = [model_comparison.sentence_rates(rows, control, corpus, root)] if control else []
    if runs and runs[0] is not None:
        d, ctrl, ctrl_unit = both(runs)
        chances["random init"] = _power(ctrl, d.shape[2], band, power)
    return FineTuning(tasks, unit, ctrl, ctrl_unit, diffs, **ev), chances


def _power(p: Paired, reference_probe_seeds: int, band: float, power: float) -> dict:
    return {
        "fine_tune_seeds": p.ft_seeds,
        "probe_seeds": p.probe_seeds,
        "reference_probe_seeds": reference_probe_seeds,
        "sentences": p.sentences,
        "d_last": p.last.estimate,
        "seed_var": p.seed_var,
        "sentence_var": p.sentence_var,
        "chance_of_holding": chance_of_holding(p.seed_var, p.sentence_var, p.sentences, band),
        "sentences_for_power": sentences_for_power(p.seed_var, p.sentence_var, band, power),
    }


@dataclass(frozen=True)
class Comparison(Study):
    """The results table read for a comparison across models, and what the page shows of it."""

    models: int  # models that can be compared (same seed and shared parameters)
    table_rows: int  # rows of the whole results table
    # per fine-tuned task (and "random init"): seeds, test sentences, d_L, the variance split of d_L, the
    # chance that C13 holds at a true difference of 0 and the test sentences that make it C13_POWER (the
    # band and power :func:`comparison` is given)
    fine_tuning_power: dict
    runs: int = data()  # chapter runs in the table
    models_in_table: int = data()
    model_table: pd.DataFrame = data()  # one row per compared model: model_key, model, role
    claim_table: pd.DataFrame = data()  # model_comparison.claims
    # model_comparison.curves, of the corpora two models share (model_comparison.compared)
    curves: pd.DataFrame = data()
    no_separator: list[str] = data()  # models whose tokenizer adds no separator to a sentence
    fine_tuning: FineTuning = data()  # what C13 and C14 take (evidence.across_models.FineTuning)
    # "" when computed from the live data folder; else the recorded `make compare` run's caption
    # (recorded.caption: its date, duration and machine, and what changed since)
    recorded: str = data(default="")
    # the one line saying a recorded run was there but partial (record_compare.partial), "" else
    partial: str = data(default="")


def comparison(
    table: pd.DataFrame,
    reference: str,
    seed: int,
    judge_corpus: str,
    data_folder: Path | None = None,
    *,
    band: float,
    power: float,
    provenances: Mapping[str, dict] | None = None,
) -> Comparison:
    """Compare the models of ``table`` (``aggregate.read_table`` of ``data_folder``, default the data folder)
    on runs of ``seed`` with the parameters most models share; ``reference`` is the pre-trained model,
    ``judge_corpus`` the text C13 and C14 are judged on; ``band`` and ``power`` C13's band and the power its
    sample sizes are reported for (the chapter passes ``verdicts.across_models.C13_BAND`` and ``C13_POWER``);
    ``provenances`` the model folders' provenance by model name (a recorded run's; default: read the
    folders)."""
    rows = model_comparison.comparable(table, seed=seed)
    models = model_comparison.models_of(rows, reference=reference, provenances=provenances)
    ft, chances = fine_tuning(rows, models, judge_corpus, data_folder or paths.data_root(), band, power, seed)
    return Comparison(
        models=len(models),
        table_rows=len(table),
        fine_tuning_power=chances,
        runs=int(table.run.nunique()) if len(table) else 0,
        models_in_table=int(table.model_key.nunique()) if len(table) else 0,
        model_table=models,
        claim_table=model_comparison.claims(rows, models),
        curves=model_comparison.compared(model_comparison.curves(rows, models)),
        no_separator=model_comparison.without_separator(rows, models),
        fine_tuning=ft,
    )


def recorded_comparison(
    live: Comparison,
    reference: str,
    seed: int,
    judge_corpus: str,
    *,
    band: float,
    power: float,
    source: Path | None = None,
) -> tuple[Comparison, Recorded | None]:
    """``live`` when it has fine-tuned results (they take precedence) or ``reference`` has no recorded
    `make compare` run (``data/recorded/compare/<reference key>/`` of the checkout ``source``); else the same
    :func:`comparison` on the recorded run, its files written back at their paths into a temporary data
    folder (model_comparison.sentence_rates reads each run's file by that path), with the run's caption
    (``Comparison.recorded``: its date, duration and machine, and what changed since). Returns the comparison
    and the recorded run (None: live). A live folder that holds models other than the reference and its
    random-initialisation control (a reader's own sweep) keeps its live page too: the recording stands in only
    for what a plain book build has."""
    roles = set(live.model_table.role) if "role" in live.model_table else set()
    if live.fine_tuning.tasks or roles - {model_comparison.REFERENCE_ROLE, model_comparison.CONTROL_ROLE}:
        return live, None
    rec, why = recorded.for_page(
        lambda: record_compare.find(reference, source), lambda r: record_compare.partial(r, source)
    )
    if why:  # unreadable, or missing or partial numbers: said, and the live page shown
        return replace(live, partial=why), None
    if rec is None:
        return live, None
    return _from_record(rec, reference, seed, judge_corpus, band, power, source), rec


def reference_comparison(
    name: str,
    seed: int,
    judge_corpus: str,
    *,
    band: float,
    power: float,
    source: Path | None = None,
) -> Comparison | None:
    """The same :func:`comparison` on the recorded `make compare` run whose reference is the model folder called
    ``name`` (:func:`identifiability.recorded.compare.find_named`; the family's d_v = 32 member, a masked-language
    model pre-trained here), with its caption; None when the checkout ``source`` has none."""
    rec, why = recorded.for_page(
        lambda: record_compare.find_named(name, source), lambda r: record_compare.partial(r, source)
    )
    if rec is None or why:  # none, unreadable or partial: no comparison
        return None
    return _from_record(rec, str(rec.results["reference"]), seed, judge_corpus, band, power, source)


def _from_record(
    rec: Recorded, reference: str, seed: int, judge_corpus: str, band: float, power: float, source: Path | None
) -> Comparison:
    with tempfile.TemporaryDirectory(prefix="recorded-compare-") as tmp:
        root = record_compare.materialise(rec.results, Path(tmp))
        provs = record_compare.provenances(rec.results)
        cmp = comparison(
            aggregate.build_table(root), reference, seed, judge_corpus, root, band=band, power=power, provenances=provs
        )
    return replace(cmp, recorded=recorded.caption(rec, source))


RESULTS = (Comparison,)
