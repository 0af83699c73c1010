"""Chapter 10's studies: every context-mixing measure (:mod:`identifiability.contributions`) scored against
exact HTA and against an intervention, layer by layer, over sentences (C22-C27).

Like is compared with like (C22, version 2; :func:`pairs`): every measure, rolled-out and cumulative ones
included, is scored against the references from the input to layer l (exact HTA, the input interventions);
a measure of one layer's mixing (``per_layer`` in the registry, as it is) also against the references of one
layer (:mod:`identifiability.contributions.one_layer`), and exact HTA of one layer against the one-layer
intervention (C26's robustness row).

Per sentence, each measure's (L+1, d_s, d_s) array is compared with each reference's by
:func:`identifiability.contributions.agreement.agreement`; :func:`summarise` turns the per-sentence statistics
into one :class:`LayerScore` per (measure, reference, layer, variant), with intervals over sentences.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from ..base.errors import UserError
from ..base.results import cached_tensors
from ..base.stats import Interval, mean_interval, paired_interval
from ..chapters.parameters import SAMPLES
from ..contributions import MEASURES, compute, rollout, version
from ..contributions.agreement import SentenceAgreement, agreement
from ..contributions.intervention import mean_hidden, token_replacement
from ..contributions.one_layer import hta_layer, intervention_layer
from ..evidence.measures import MAIN, NO_OWN, ROLLED, LayerScore, MeasuresEvidence
from ..hta import hta_corpus
from ..models.loaded_model import LoadedModel
from ..models.trace import SentenceTrace, trace_sentences
from . import Study, data

RAW = "raw"  # the measure C23 compares rollout and flow with, as it is

MEASURES_CACHE_VERSION = 1  # bump when a measure's numbers change: cached arrays are then recomputed


def _layer_values(rows: Sequence[SentenceAgreement], name: str, layer: int) -> np.ndarray:
    """One statistic at one layer, per sentence: (n_sentences,)."""
    return np.array([getattr(r, name)[layer] for r in rows], dtype=float)


_VARIANTS = {
    MAIN: ("spearman", "shuffled", "distance"),
    NO_OWN: ("spearman_no_own", "shuffled_no_own", "distance_no_own"),
}


def summarise(
    agreements: Mapping[tuple[str, str], Sequence[SentenceAgreement]], seed: int = 0
) -> tuple[LayerScore, ...]:
    """Scores over sentences from per-sentence agreements.

    Args:
        agreements: {(measure, reference): one :class:`SentenceAgreement` per sentence, in the same sentence
            order for every key}; where (``raw``, reference) is present, every other measure against that
            reference also gets ``minus_raw``.
        seed: seed of the bootstrap.
    Returns:
        One :class:`LayerScore` per (measure, reference, layer 1..L, variant), with the stronger null (per
        sentence the larger of the two nulls), the paired difference from it, and (variant :data:`MAIN`) the
        paired differences from every other measure against the same reference (:func:`_pairs`).
    """
    out = []
    for (measure, reference), rows in agreements.items():
        if not rows:
            continue
        raw = agreements.get((RAW, reference))
        n_layers = len(rows[0].spearman) - 1
        for variant, (stat, shuf, dist) in _VARIANTS.items():
            for layer in range(1, n_layers + 1):
                s, a, b = (_layer_values(rows, k, layer) for k in (stat, shuf, dist))
                stronger = np.fmax(a, b)  # per sentence the larger null; NaN only where both are
                minus_raw = None
                if raw is not None and measure != RAW:
                    minus_raw = paired_interval(s, _layer_values(raw, stat, layer), seed)
                others = _pairs(agreements, measure, reference, layer, seed) if variant == MAIN else ()
                out.append(
                    LayerScore(
                        measure, reference, layer, variant,
                        statistic=mean_interval(s, seed), shuffled=mean_interval(a, seed),
                        distance=mean_interval(b, seed), minus_shuffled=paired_interval(s, a, seed),
                        minus_distance=paired_interval(s, b, seed), minus_raw=minus_raw,
                        top1=float(np.nanmean(_layer_values(rows, "top1", layer))),
                        top3=float(np.nanmean(_layer_values(rows, "top3", layer))),
                        stronger=mean_interval(stronger, seed), minus_stronger=paired_interval(s, stronger, seed),
                        minus_others=others,
                    )
                )  # fmt: skip
    return tuple(out)


def _pairs(
    agreements: Mapping[tuple[str, str], Sequence[SentenceAgreement]],
    measure: str,
    reference: str,
    layer: int,
    seed: int,
) -> tuple[tuple[str, Interval], ...]:
    """The paired per-sentence differences of ``measure``'s statistic minus each other measure's against the
    same reference at ``layer``, for the measures whose key sorts after ``measure`` (each pair once:
    :meth:`MeasuresEvidence.difference` reads the reverse), scored on the same sentences."""
    rows = agreements[(measure, reference)]
    s = _layer_values(rows, "spearman", layer)
    return tuple(
        (other, paired_interval(s, _layer_values(theirs, "spearman", layer), seed))
        for (other, ref), theirs in sorted(agreements.items())
        if ref == reference and other > measure and len(theirs) == len(rows)
    )


# --------------------------------------------------------------------------------------------------
# measuring sentences
# --------------------------------------------------------------------------------------------------

CLAIMS = ("C22", "C23", "C24", "C25", "C26", "C27")
HTA, INTERVENTION, MASK = "hta", "intervention", "intervention_mask"  # the references from the input to layer l
HTA_LAYER, INTERVENTION_LAYER = "hta_layer", "intervention_layer"  # the references of layer l alone
REFERENCE_LABELS = {
    HTA: "Exact HTA", INTERVENTION: "Intervention (mean embedding)", MASK: "Intervention ([MASK])",
    HTA_LAYER: "Exact HTA (one layer)", INTERVENTION_LAYER: "Intervention (one layer)",
}  # fmt: skip
INPUT_REFERENCES, LAYER_REFERENCES = (HTA, INTERVENTION, MASK), (HTA_LAYER, INTERVENTION_LAYER)
# the order a page lists them in: attention, then the decomposed layer, then interventions and gradients
ORDER = ("raw", "effective", "rollout", "flow", "norm", "norm_resln", "globenc", "alti", "value_zeroing", "grad_input",
         "integrated_gradients")  # fmt: skip
MEAN_SENTENCES = 128  # corpus sentences averaged for the interventions' mean hidden states per position


def chosen(measures: str) -> list[str]:
    """The registry names ``measures`` lists (comma-separated; empty: every measure but the intervention,
    which is a reference here); UserError naming the measures for an unknown one."""
    every = sorted((n for n in MEASURES if n != INTERVENTION), key=lambda n: (ORDER + (n,)).index(n))
    names = [x.strip() for x in measures.split(",") if x.strip()] or every
    bad = [n for n in names if n not in every]
    if bad:
        raise UserError(f"unknown measure(s) {', '.join(bad)}: choose from {', '.join(every)} (empty: all)")
    return names


def sentences(ch, sample: str) -> list[str]:
    """The chapter's sentences: ``short`` (n_sentences of 6 to max_tokens tokens, for a live build) or
    ``proportional`` (the first n_sentences draws of C10's sample design, duplicates kept as drawn: what
    ``make measures`` scores)."""
    n = ch.params["n_sentences"]
    if sample == "short":
        return ch.sentences(n, min_tokens=6)
    if sample == "proportional":
        from ..corpus.corpora import token_lengths
        from ..recorded.proportional import draw, eligible

        corpus = ch.corpus.sentences
        pool = eligible(token_lengths(corpus, ch.lm.tokenizer))
        return [corpus[i] for i in draw(pool, n, ch.params["seed"])]
    raise UserError(f"sample must be one of {', '.join(SAMPLES)}, got {sample!r}")


def corpus_mean(lm: LoadedModel, texts: Sequence[str], longest: int) -> torch.Tensor:
    """The corpus's mean hidden state of layers 0..L-1 at each position 0..longest-1, (L, longest, d): entry
    [k, p] the mean of hidden[k][p] over ``texts`` (at most :data:`MEAN_SENTENCES` of them) that reach position
    p, the layer's mean over every position where none does. Entry 0 (the mean input embedding) is what the
    input intervention replaces x_j by, entry l - 1 what the one-layer intervention replaces token j of layer
    l's input by: one sample for both."""
    traces = trace_sentences(lm, list(texts)[:MEAN_SENTENCES], progress=False)
    mean = mean_hidden(traces)
    if mean.shape[1] < longest:
        # each layer's fill by the one operation a mean of x alone takes, so entry 0 has the bytes (and
        # keys the cache entries, see measure_sentence) of the input embedding's mean by itself
        fill = torch.stack([torch.cat([t.hidden[k] for t in traces]).mean(0) for k in range(mean.shape[0])])
        fill = fill.unsqueeze(1)  # (L, 1, d)
        mean = torch.cat([mean, fill.expand(-1, longest - mean.shape[1], -1)], dim=1)
    return mean


def _digest(t: torch.Tensor) -> str:
    """A short SHA-256 of a tensor's float32 bytes, to key cache entries by it."""
    return hashlib.sha256(t.detach().float().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]


def pairs(keys: Sequence[str]) -> list[tuple[str, str]]:
    """Which array is scored against which reference (C22, version 2: like with like), of the ``keys`` a
    sentence has (:func:`measure_sentence`).

    Every measure and exact HTA (everything but the references themselves and the one-layer HTA) against
    each reference from the input present; each per-layer measure as it is (the registry's ``per_layer``; not
    its ``@rolled`` copy) against each one-layer reference present; exact HTA of one layer against the
    one-layer intervention.
    """
    out = [
        (k, ref) for ref in INPUT_REFERENCES if ref in keys
        for k in keys if k not in (ref, INTERVENTION, MASK, *LAYER_REFERENCES)
    ]  # fmt: skip
    per_layer = [k for k in keys if k in MEASURES and MEASURES[k].per_layer]
    out += [(k, ref) for ref in LAYER_REFERENCES if ref in keys for k in per_layer]
    if HTA_LAYER in keys and INTERVENTION_LAYER in keys:
        out.append((HTA_LAYER, INTERVENTION_LAYER))
    return out


def measure_sentence(
    lm: LoadedModel, tr: SentenceTrace, names: Sequence[str], mean: torch.Tensor | None = None, cache: bool = True
) -> tuple[dict[str, np.ndarray], dict[str, float], dict[str, str]]:
    """Every measure of ``names`` on one traced sentence (per-layer ones also rolled out, under
    ``<name>@rolled``) and the references: exact HTA, the intervention with the corpus mean input embedding
    and, where the tokenizer has one, with [MASK]; exact HTA of each layer alone and the one-layer
    intervention (:mod:`identifiability.contributions.one_layer`).

    Args:
        mean: (L, positions, d) from :func:`corpus_mean`: entry 0 replaces input tokens, entry l - 1 the
            tokens of layer l's input; None: the sentence's own mean (per layer).
    Returns:
        ({key: (L+1, d_s, d_s)}, {key: seconds}, {measure: why} for measures this model does not support).
    """
    arrays, seconds, unsupported = {}, {}, {}
    if mean is not None and (mean.dim() != 3 or mean.shape[0] != lm.n_layers):
        raise UserError(
            f"mean must be ({lm.n_layers}, positions, {lm.d_model}), one row per layer 0..L-1: make it with "
            f"corpus_mean(lm, texts, lm.max_positions); got {tuple(mean.shape)}"
        )
    # each intervention is keyed by the replacement it uses alone: the input one by entry 0, so its entries
    # are shared with any mean that has the same input embedding's mean
    mean_keys = {} if mean is None else {INTERVENTION: _digest(mean[0]), INTERVENTION_LAYER: _digest(mean)}

    def timed(key: str, fn) -> None:
        def run() -> dict[str, torch.Tensor]:
            t0 = time.perf_counter()
            c = torch.as_tensor(np.asarray(fn(), dtype=float))
            return {"c": c, "seconds": torch.tensor(time.perf_counter() - t0, dtype=torch.float64)}

        # each measure's array is cached per sentence as it is made: a run stopped later (a chart, Ctrl-C)
        # loses none of them, and its seconds are those measured when it was computed, as for exact HTA
        params = {"version": MEASURES_CACHE_VERSION, "model": lm.content_key, "text": tr.text, "key": key}
        # a measure's own version enters the key from 2 on, so the arrays cached before versions existed stay
        # valid and a raised version recomputes that measure alone
        params |= {"measure_version": version(key)} if version(key) > 1 else {}
        params |= {"mean": mean_keys.get(key)} if key in (INTERVENTION, INTERVENTION_LAYER) else {}
        got = cached_tensors(f"measures/{lm.key}", params, run) if cache else run()
        arrays[key], seconds[key] = got["c"].numpy(), float(got["seconds"])

    for name in names:
        try:
            timed(name, lambda name=name: compute(lm, tr, name))
        except UserError as e:
            unsupported[name] = str(e).splitlines()[0]
            continue
        if MEASURES[name].per_layer:
            arrays[name + ROLLED] = rollout(torch.as_tensor(arrays[name])).numpy()
    h = hta_corpus(lm, [tr.text], mode="exact", cache=cache, progress=False)[0]
    arrays[HTA], seconds[HTA] = np.asarray(h.c, dtype=float), h.seconds  # its computing time, even when cached
    timed(INTERVENTION, lambda: token_replacement(lm, tr, "mean", None if mean is None else mean[0]))
    if lm.tokenizer.mask_token_id is not None:
        timed(MASK, lambda: token_replacement(lm, tr, "mask"))
    timed(HTA_LAYER, lambda: hta_layer(lm, tr).c)
    timed(INTERVENTION_LAYER, lambda: intervention_layer(lm, tr, mean))
    return arrays, seconds, unsupported


def labelled(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays a page shows, under their readers' names (rolled-out copies and [MASK] left out)."""
    return {label_of(k): v for k, v in arrays.items() if not k.endswith(ROLLED) and k != MASK}


def label_of(key: str) -> str:
    """'Attention norm (rolled out)' for 'norm@rolled'; a reference's name for a reference."""
    if key in REFERENCE_LABELS:
        return REFERENCE_LABELS[key]
    name, rolled = key.removesuffix(ROLLED), key.endswith(ROLLED)
    return MEASURES[name].label + (" (rolled out)" if rolled else "")


def names_of(scores) -> tuple[tuple[str, str], ...]:
    """(key, :func:`label_of`) of every measure and reference in ``scores`` (LayerScores), for the verdicts'
    reasons (:attr:`MeasuresEvidence.names`)."""
    keys = sorted({s.measure for s in scores} | {s.reference for s in scores})
    return tuple((k, label_of(k)) for k in keys)


def seconds_table(seconds: Mapping[str, float]) -> pd.DataFrame:
    """{key: seconds per sentence} as the cost chart's rows: label, seconds."""
    return pd.DataFrame([{"label": label_of(k), "seconds": s} for k, s in seconds.items()])


@dataclass(frozen=True)
class MeasuresRun(Study):
    """Every measure scored on a set of sentences.

    Recorded: ``scores`` (one row per :class:`LayerScore`, :func:`score_rows`), ``seconds`` ({key: mean
    seconds per sentence}), ``n_scored`` (sentences scored), ``unsupported`` ({measure: why}).
    """

    scores: list
    seconds: dict
    n_scored: int
    unsupported: dict
    evidence: MeasuresEvidence = data()
    arrays: dict = data(default_factory=dict)  # {text: (tokens, {key: (L+1, d_s, d_s)})} of each distinct text

    def sentences(self) -> list[tuple[str, list[str], dict[str, np.ndarray]]]:
        """Each distinct sentence's text, tokens and the arrays a page shows (:func:`labelled`), in order."""
        return [(text, tokens, labelled(a)) for text, (tokens, a) in self.arrays.items()]

    @property
    def seconds_table(self) -> pd.DataFrame:
        return seconds_table(self.seconds)


def score_sentences(
    lm: LoadedModel,
    texts: Sequence[str],
    names: Sequence[str],
    mean: torch.Tensor | None = None,
    seed: int = 0,
    cache: bool = True,
    progress: bool = True,
) -> MeasuresRun:
    """Every measure of ``names`` against the references :func:`pairs` gives it, on ``texts`` (one unit per
    text, duplicates kept), summarised per layer with intervals over the texts (:func:`summarise`).

    Args:
        mean: :func:`corpus_mean` (None: each sentence's own mean).
    """
    per: dict[tuple[str, str], list[SentenceAgreement]] = {}
    times: dict[str, list[float]] = {}
    unsupported: dict[str, str] = {}
    done: dict[str, tuple] = {}
    for k, text in enumerate(tqdm(texts, desc="measures", unit="sentence", disable=not progress)):
        if text not in done:
            tr = trace_sentences(lm, [text], progress=False)[0]
            arrays, secs, unsup = measure_sentence(lm, tr, names, mean, cache)
            done[text] = (tr.tokens, arrays)
            unsupported |= unsup
            for key, s in secs.items():
                times.setdefault(key, []).append(s)
        arrays = done[text][1]
        for key, ref in pairs(list(arrays)):
            per.setdefault((key, ref), []).append(agreement(arrays[key], arrays[ref], seed=seed + k))
    scores = summarise(per, seed)
    n_layers = lm.n_layers
    ev = MeasuresEvidence(scores, len(texts), n_layers, tuple(sorted(unsupported.items())), names=names_of(scores))
    secs = {key: float(np.mean(v)) for key, v in times.items()}
    return MeasuresRun(score_rows(scores), secs, len(texts), unsupported, ev, done)


# --------------------------------------------------------------------------------------------------
# scores as rows (results files, recorded runs, charts)
# --------------------------------------------------------------------------------------------------

_INTERVALS = ("statistic", "shuffled", "distance", "minus_shuffled", "minus_distance", "minus_raw")
_LATER = ("stronger", "minus_stronger")  # added with C22 version 2: absent from a run recorded before it


def _row(x: Interval | None) -> list | None:
    return None if x is None else [x.estimate, x.low, x.high, x.n]


def score_rows(scores: Sequence[LayerScore]) -> list[dict]:
    """Each score as a plain dict (intervals as [estimate, low, high, n]; ``minus_others`` as {other: interval},
    only where there are any)."""
    out = []
    for s in scores:
        row = {"measure": s.measure, "reference": s.reference, "layer": s.layer, "variant": s.variant}
        row |= {name: _row(getattr(s, name)) for name in _INTERVALS + _LATER}
        if s.minus_others:
            row["minus_others"] = {other: _row(d) for other, d in s.minus_others}
        out.append(row | {"top1": s.top1, "top3": s.top3})
    return out


def scores_from_rows(rows: Sequence[dict]) -> tuple[LayerScore, ...]:
    """:func:`score_rows` read back; a row recorded before C22 version 2 (no stronger null, no pairs) reads back
    with those left None or empty, which the verdicts that need them say ("not run in this build")."""

    def iv(x):
        return None if x is None else Interval(x[0], x[1], x[2], int(x[3]), "sentences")

    return tuple(
        LayerScore(
            r["measure"],
            r["reference"],
            int(r["layer"]),
            r["variant"],
            **{n: iv(r[n]) for n in _INTERVALS},
            **{n: iv(r.get(n)) for n in _LATER},
            top1=r["top1"],
            top3=r["top3"],
            minus_others=tuple((other, iv(d)) for other, d in (r.get("minus_others") or {}).items()),
        )  # fmt: skip
        for r in rows
    )


RESULTS = (MeasuresRun,)


@dataclass(frozen=True)
class Shown:
    """What the page shows: a recorded run's scores where there is one, else this build's."""

    rows: list  # :func:`score_rows`
    seconds: pd.DataFrame
    evidence: MeasuresEvidence


def shown(run: MeasuresRun, rec=None) -> Shown:
    """The scores, seconds and evidence of the recorded run ``rec`` (its results dict holds ``scores``,
    ``seconds``, ``n_scored``, ``unsupported``), else of ``run``."""
    if rec is None:
        return Shown(run.scores, run.seconds_table, run.evidence)
    r = rec.results
    scores = scores_from_rows(r["scores"])
    ev = MeasuresEvidence(
        scores, int(r["n_scored"]), max(s.layer for s in scores), tuple(sorted((r.get("unsupported") or {}).items())),
        recorded=rec.key, names=names_of(scores),
    )  # fmt: skip
    secs = seconds_table(r["seconds"])
    return Shown(list(r["scores"]), secs, ev)
