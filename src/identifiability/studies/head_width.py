"""Chapter 7's studies: the predictions C19-C21 across the family of head widths (:mod:`identifiability.pretrain.
family`), measured per model with chapters 2 and 3's own code and then gathered across models.

Per model (a pre-trained member or its untrained twin): :func:`head_threshold` runs chapter 2's threshold
study at d_s = d_v + 1 and its null-space survey at d_s = d_v + 2 (C19), :func:`head_offset` chapter 3's
raw-versus-effective study (C4's per-input paired differences against the random subspace and the random value
weights) and the mean attention entropy (C20, C21). Every model is measured on inputs cut from the same
sentences (:func:`cut_inputs`): an input's key names its sentence and its length relative to the head, so the
members' inputs pair. :func:`c19_evidence`, :func:`c20_evidence` and :func:`c21_evidence` gather the models.
Shapes: d_s tokens, L layers, H heads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch

from ..base.stats import Interval, unit_interval
from ..evidence.head_width import (
    C19Evidence,
    C19Model,
    C20Comparison,
    C20Evidence,
    C20Pair,
    C21Evidence,
    C21Model,
    FamilyModel,
)
from ..models.loaded_model import LoadedModel
from ..models.trace import trace_sentences
from . import Study, data
from .effective_attention import raw_vs_effective
from .nonidentifiability import null_space_survey, threshold

# --------------------------------------------------------------------------------------------------
# the models and their inputs
# --------------------------------------------------------------------------------------------------


def _special_count(tokenizer) -> int:
    """Tokens the tokenizer adds to one sentence ([CLS] and [SEP]: 2)."""
    return len(tokenizer("", add_special_tokens=True)["input_ids"])


def cut_to_tokens(text: str, n_tokens: int, tokenizer, slack: int = 3) -> str | None:
    """The start of ``text`` cut to exactly ``n_tokens`` tokens (special tokens included), or None where the text
    is too short or no cut re-tokenises to that length. Cut at a token, decoded and re-tokenised; where a word
    piece at the cut re-tokenises differently, up to ``slack`` tokens more or fewer are tried."""
    ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
    k = n_tokens - _special_count(tokenizer)
    if k < 1 or len(ids) < k:
        return None
    for j in sorted(range(-slack, slack + 1), key=abs):
        if not 1 <= k + j <= len(ids):
            continue
        cut = tokenizer.decode(ids[: k + j], skip_special_tokens=True, clean_up_tokenization_spaces=False)
        if len(tokenizer(cut, verbose=False)["input_ids"]) == n_tokens:
            return cut
    return None


@dataclass(frozen=True)
class CutInputs:
    """Inputs cut from sentences: ``texts[i]`` has ``lengths[i]`` tokens and was cut from sentence
    ``sentences[i]``; ``keys[i]`` ("<sentence>:<label>") pairs it with the other models' inputs of the same
    sentence and label (a ratio d_s / d_v, or a length)."""

    texts: list[str]
    sentences: list[int]
    lengths: list[int]
    keys: list[str]


def ratio_lengths(d_v: int, ratios: Sequence[float]) -> list[int]:
    """d_s = round(r d_v) for each ratio r (with ratios on a grid of 1/16, exact for d_v of 16, 32, 64)."""
    return [round(r * d_v) for r in ratios]


def design_table(ratios: Sequence[float]) -> pd.DataFrame:
    """The inputs every member of :data:`identifiability.pretrain.family.MEMBERS` reads at ``ratios`` (its d_s
    = round(r d_v), up to the trained positions), one row per member and length: member, d_v, d_s, ratio."""
    from ..pretrain.family import MEMBERS, POSITIONS

    rows = [
        dict(member=m.name, d_v=m.d_v, d_s=d_s, ratio=r)
        for m in MEMBERS
        for r, d_s in zip(ratios, ratio_lengths(m.d_v, ratios))
        if d_s <= POSITIONS
    ]
    return pd.DataFrame(rows)


def cut_inputs(
    sources: Sequence[str],
    tokenizer,
    lengths: Sequence[int],
    labels: Sequence[str] | None = None,
    max_len: int | None = None,
) -> CutInputs:
    """Every source cut to every length in ``lengths`` (at most ``max_len``), each labelled by ``labels``
    (default: the length); a cut that cannot reach its exact length is left out."""
    labels = [str(n) for n in lengths] if labels is None else list(labels)
    out = CutInputs([], [], [], [])
    for i, src in enumerate(sources):
        for n, label in zip(lengths, labels):
            if max_len is not None and n > max_len:
                continue
            text = cut_to_tokens(src, n, tokenizer)
            if text is not None:
                out.texts.append(text)
                out.sentences.append(i)
                out.lengths.append(n)
                out.keys.append(f"{i}:{label}")
    return out


# --------------------------------------------------------------------------------------------------
# C19: chapter 2's threshold on each model's own d_v
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadThreshold(Study):
    """One model's threshold: chapter 2's margins at d_s = d_v + 1 and its survey at d_s = d_v + 2."""

    hw_model: str
    hw_d_v: int
    hw_threshold_inputs: int  # inputs of d_v + 1 tokens
    hw_threshold_sentences: int  # the different sentences they were cut from
    hw_unique_share: float  # (head, input) pairs with rank([T,1]) = d_s above the margin
    hw_alternatives_at_dv2: bool | None  # every head has dim LN([T,1]) >= 1 at d_v + 2 (None: not measured)
    model: FamilyModel = data()
    margins: pd.DataFrame = data()  # nullspace.threshold_margins rows with ``text`` and ``sentence``
    survey: pd.DataFrame = data()  # nullspace.null_space_table rows at d_v + 2


def head_threshold(
    lm: LoadedModel, model: FamilyModel, sources: Sequence[str], margin: float, max_tokens: int = 512
) -> HeadThreshold:
    """Chapter 2's threshold (:func:`studies.nonidentifiability.threshold`, every head, ``margin``: C2's) on
    ``sources`` cut to d_v + 1 tokens, and its survey (:func:`null_space_survey`) on them cut to d_v + 2."""
    d_v = lm.d_v
    at1 = cut_inputs(sources, lm.tokenizer, [d_v + 1], max_len=lm.max_positions)
    at2 = cut_inputs(sources, lm.tokenizer, [d_v + 2], max_len=lm.max_positions)
    if not at1.texts:
        raise ValueError(f"no source has {d_v + 1} tokens: give longer sentences")
    thr = threshold(lm, at1.texts, 1, 0, margin, max_tokens=max_tokens)
    margins = thr.table.assign(sentence=[at1.sentences[i] for i in thr.table.text])
    survey = null_space_survey(lm, at2.texts, max_tokens).table if at2.texts else pd.DataFrame()
    return HeadThreshold(
        hw_model=model.name,
        hw_d_v=d_v,
        hw_threshold_inputs=len(at1.texts),
        hw_threshold_sentences=len(set(at1.sentences)),
        hw_unique_share=thr.unique_share,
        hw_alternatives_at_dv2=bool((survey.dim_LN_T1 >= 1).all()) if len(survey) else None,
        model=model,
        margins=margins,
        survey=survey,
    )


def c19_evidence(thresholds: Sequence[HeadThreshold]) -> C19Evidence:
    """C19's evidence: every model's threshold measurement."""
    return C19Evidence(
        tuple(C19Model(t.model, t.margins, t.hw_threshold_sentences, t.hw_alternatives_at_dv2) for t in thresholds)
    )


# --------------------------------------------------------------------------------------------------
# C20, C21: chapter 3's paired difference on each model, with its attention entropy
# --------------------------------------------------------------------------------------------------


def attention_entropy(attentions: torch.Tensor) -> float:
    """Mean entropy in nats of the attention rows of one input, over layers, heads and query rows.

    Args:
        attentions: (L, H, d_s, d_s), rows summing to one (0 log 0 = 0).
    """
    a = attentions.double()
    rows = -(a * torch.log(a.clamp_min(1e-300))).sum(-1)  # (L, H, d_s)
    return float(rows.mean())


def paired_by_input(table: pd.DataFrame) -> pd.DataFrame:
    """Per input of a :func:`identifiability.effective.projection.correlation_by_length` table, the median over heads
    of Pearson(A, A_eff) minus Pearson(A, A projected onto a random subspace of the same rank) (``sub``) and the
    same against random value weights (``val``): C4's per-input paired differences (as ``c4_evidence``
    computes them: the median of the per-head differences). Columns: text, d_s, sub, val."""
    t = table.assign(sub=table.pearson - table.pearson_random, val=table.pearson - table.pearson_random_weights)
    g = t.groupby("text")
    return pd.DataFrame({"d_s": g.d_s.first(), "sub": g["sub"].median(), "val": g["val"].median()}).reset_index()


@dataclass(frozen=True)
class HeadOffset(Study):
    """One model's C4 offset by input, against d_s / d_v, and its mean attention entropy."""

    hw_model: str
    hw_d_v: int
    hw_inputs: int
    hw_entropy: float  # nats: per input the mean over layers, heads and query rows; then the mean over inputs
    hw_beyond_random: float  # C4's D_sub: mean over inputs with d_s >= d_v + 2 of the per-input paired difference
    hw_beyond_random_weights: float  # D_val: the same against random value weights
    model: FamilyModel = data()
    inputs: pd.DataFrame = data()  # one row per input: key, sentence, d_s, ratio (d_s / d_v), sub, val
    table: pd.DataFrame = data()  # chapter 3's per-(input, head) table (correlation_by_length)
    c21: C21Model = data()


def _val_by_heads(table: pd.DataFrame, d_v: int, seed: int) -> Interval:
    """D_val with its interval over heads, as ``c4_evidence`` builds D_sub's (``beyond_by_heads``)."""
    wide = {
        c: table.pivot(index="text", columns=["layer", "head"], values=c) for c in ("pearson", "pearson_random_weights")
    }
    ds = table.groupby("text").d_s.first().loc[wide["pearson"].index].to_numpy()
    d = (wide["pearson"].to_numpy() - wide["pearson_random_weights"].to_numpy())[ds >= d_v + 2]
    return unit_interval(d.shape[1], lambda h: float(np.median(d[:, h], axis=1).mean()), seed, "heads")


def head_offset(
    lm: LoadedModel,
    model: FamilyModel,
    inputs: CutInputs,
    precision: str = "float32",
    seed: int = 0,
    progress: bool = False,
) -> HeadOffset:
    """Chapter 3's :func:`studies.effective_attention.raw_vs_effective` on ``inputs`` (its per-input paired
    differences and C4's intervals over inputs and heads), and the mean attention entropy of the same inputs."""
    if not inputs.texts:
        raise ValueError("no inputs: cut the sources to lengths the model takes (cut_inputs)")
    fig = raw_vs_effective(lm, inputs.texts, precision, seed, progress=progress)
    per = paired_by_input(fig.table)
    per = per.assign(
        key=[inputs.keys[i] for i in per.text],
        sentence=[inputs.sentences[i] for i in per.text],
        ratio=per.d_s / lm.d_v,
    )
    traces = trace_sentences(lm, inputs.texts, batch_size=8, progress=progress)
    entropy = float(np.mean([attention_entropy(tr.attentions) for tr in traces]))
    model = replace(model, entropy=entropy)
    c4 = fig.c4  # chapter 3's evidence: D_sub = beyond, D_val = beyond_random_weights, intervals over inputs
    c21 = C21Model(
        model, c4.beyond, c4.beyond_random_weights, c4.beyond_by_heads, _val_by_heads(fig.table, lm.d_v, seed)
    )
    return HeadOffset(
        hw_model=model.name,
        hw_d_v=lm.d_v,
        hw_inputs=len(per),
        hw_entropy=entropy,
        hw_beyond_random=c4.beyond.estimate,
        hw_beyond_random_weights=c4.beyond_random_weights.estimate,
        model=model,
        inputs=per,
        table=fig.table,
        c21=c21,
    )


def c21_evidence(offsets: Sequence[HeadOffset]) -> C21Evidence:
    """C21's evidence: every model's D_sub and D_val (members and twins)."""
    return C21Evidence(tuple(o.c21 for o in offsets))


# --------------------------------------------------------------------------------------------------
# C20: D on the common d_s / d_v range, members against the seed difference
# --------------------------------------------------------------------------------------------------


def _trained_enough(m: FamilyModel, min_gain: float) -> bool:
    """Which members the comparison holds (the chapter passes the verdicts' FAMILY_MIN_GAIN): the gain where
    known, else the provenance's flag; never a twin."""
    if m.twin:
        return False
    return m.accuracy_gain >= min_gain if m.accuracy_gain is not None else m.trained_enough


def common_range(offsets: Sequence[HeadOffset]) -> tuple[float, float]:
    """(largest (d_v + 2) / d_v, smallest longest d_s / d_v) over ``offsets``' models: C20's common range."""
    low = max((o.hw_d_v + 2) / o.hw_d_v for o in offsets)
    high = min(o.inputs.d_s.max() / o.hw_d_v for o in offsets)
    return float(low), float(high)


def _in_range(o: HeadOffset, lo: float, hi: float) -> pd.Series:
    """The model's per-input paired difference (``sub``) on the inputs inside [lo, hi], indexed by key."""
    eps = 1e-9  # ratios are exact fractions; guard the float comparison at the ends
    inside = o.inputs[(o.inputs.ratio >= lo - eps) & (o.inputs.ratio <= hi + eps)]
    return inside.set_index("key")["sub"]


def _mean(v: np.ndarray, seed: int) -> Interval:
    """The mean of per-input values with its interval over inputs."""
    return unit_interval(len(v), lambda i: float(np.mean(v[i])), seed, "inputs")


def _difference(a: pd.Series, b: pd.Series, seed: int, absolute: bool = False) -> Interval:
    """mean(a) - mean(b) (or its absolute value) over the keys both have, interval resampling those inputs."""
    keys = a.index.intersection(b.index)
    x, y = a.loc[keys].to_numpy(), b.loc[keys].to_numpy()
    f = (lambda i: abs(float(np.mean(x[i] - y[i])))) if absolute else (lambda i: float(np.mean(x[i] - y[i])))
    return unit_interval(len(keys), f, seed, "inputs")


def _comparison(
    offsets: Sequence[HeadOffset], compared: list[HeadOffset], seeds: list[HeadOffset], seed: int
) -> C20Comparison:
    lo, hi = common_range(compared)
    values = {o.model.name: _in_range(o, lo, hi) for o in offsets}
    lengths = min(
        (o.inputs[o.inputs.key.isin(values[o.model.name].index)].d_s.nunique() for o in (*compared, *seeds)),
        default=0,
    )
    d = {name: _mean(v.to_numpy(), seed) for name, v in values.items()}
    names = [o.model.name for o in compared]
    pairs = tuple(
        C20Pair(a, b, _difference(values[a], values[b], seed)) for k, a in enumerate(names) for b in names[k + 1 :]
    )
    twin_of = {o.model.member: o.model.name for o in offsets if o.model.twin}
    twin_pairs = tuple(
        C20Pair(twin_of[a], twin_of[b], _difference(values[twin_of[a]], values[twin_of[b]], seed))
        for k, a in enumerate(names)
        for b in names[k + 1 :]
        if a in twin_of and b in twin_of
    )
    seed_diff = _difference(values[seeds[0].model.name], values[seeds[1].model.name], seed, True) if seeds else None
    return C20Comparison(
        members=tuple(names),
        ratio_range=(lo, hi),
        lengths=int(lengths),
        d=d,
        pairs=pairs,
        twin_pairs=twin_pairs,
        seed_difference=seed_diff,
        seeds=tuple(o.model.name for o in seeds),
    )


def c20_evidence(offsets: Sequence[HeadOffset], min_gain: float, seed: int = 0) -> C20Evidence:
    """C20's evidence from every model's :func:`head_offset`. Compared: the trained-enough (``min_gain``) seed-0
    members of the width with the most head splits; the robustness comparison adds the seed-0 members of the
    other widths (the half width with two heads of 32). The seed bound comes from a member whose two seeds are
    both trained enough. Each model's D is the mean over its inputs in the common range; a difference of two
    models resamples the inputs both have there (paired: the same sentence at the same d_s / d_v)."""
    ok = [o for o in offsets if _trained_enough(o.model, min_gain)]
    first = [o for o in ok if o.model.seed == 0]
    widths: dict[int, list[HeadOffset]] = {}
    for o in first:
        widths.setdefault(o.model.width, []).append(o)
    width = max(widths, key=lambda w: (len({o.hw_d_v for o in widths[w]}), w), default=None)
    compared = widths.get(width, [])
    seeds: list[HeadOffset] = []
    for o in compared:
        others = [
            p for p in ok if p.model.seed != 0 and (p.model.width, p.model.heads) == (o.model.width, o.model.heads)
        ]
        if others:
            seeds = [o, others[0]]
            break
    models = tuple(o.model for o in offsets)
    if not compared:
        empty = C20Comparison((), (math.nan, math.nan), 0, {}, (), (), None)
        return C20Evidence(models, empty, None)
    main = _comparison(offsets, compared, seeds, seed)
    extra = [o for o in first if o.model.width != width]
    half = _comparison(offsets, compared + extra, seeds, seed) if extra else None
    return C20Evidence(models, main, half)


# --------------------------------------------------------------------------------------------------
# tables the chapter's charts draw
# --------------------------------------------------------------------------------------------------


def threshold_table(thresholds: Sequence[HeadThreshold]) -> pd.DataFrame:
    """One row per model: model, member, d_v, width, twin, unique_share (at d_v + 1, the margin of the study),
    alternatives_at_dv2, sentences."""
    return pd.DataFrame(
        [
            dict(
                model=t.model.name, member=t.model.member, d_v=t.hw_d_v, width=t.model.width, twin=t.model.twin,
                unique_share=t.hw_unique_share, alternatives_at_dv2=t.hw_alternatives_at_dv2,
                sentences=t.hw_threshold_sentences,
            )
            for t in thresholds
        ]
    )  # fmt: skip


def offset_curves(offsets: Sequence[HeadOffset]) -> pd.DataFrame:
    """One row per model and input length: model, member, d_v, twin, ratio (d_s / d_v), d_s, sub and val (the
    mean over that length's inputs of the per-input paired differences), inputs (how many), entropy."""
    rows = []
    for o in offsets:
        g = o.inputs.groupby("d_s").agg(sub=("sub", "mean"), val=("val", "mean"), inputs=("sub", "size"))
        rows.append(
            g.reset_index().assign(
                model=o.model.name, member=o.model.member, d_v=o.hw_d_v, twin=o.model.twin,
                ratio=lambda d, dv=o.hw_d_v: d.d_s / dv, entropy=o.hw_entropy,
            )
        )  # fmt: skip
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


# --------------------------------------------------------------------------------------------------
# during training: C4's offset and the sink at each checkpoint
# --------------------------------------------------------------------------------------------------

TRAJECTORY_WIDTH, TRAJECTORY_SEED = 128, 0  # the members followed through training: one seed of each d_v
TRAJECTORY_SOURCES = 6  # texts whose inputs each checkpoint reads (a checkpoint costs what a model does)
_SAME_CHECKPOINT = 0.02  # a checkpoint within 2% of the next one's tokens (the last two) is drawn once


def sink_peaks(attentions: Sequence[torch.Tensor]) -> tuple[float, float]:
    """The attention sink of raw attention: per input the mean attention a query pays to the first token
    ([CLS]) and to the last ([SEP]), over layers, heads and query rows, in units of the uniform share 1/d_s;
    the median over inputs of each. ``attentions``: per input (L, H, d_s, d_s)."""
    cls = [float(a[..., 0].double().mean()) * a.shape[-1] for a in attentions]
    sep = [float(a[..., -1].double().mean()) * a.shape[-1] for a in attentions]
    return float(np.median(cls)), float(np.median(sep))


def beyond_inputs(inputs: CutInputs, d_v: int, sources: int = TRAJECTORY_SOURCES) -> CutInputs:
    """The inputs D_sub reads (d_s >= d_v + 2), cut from the first ``sources`` texts only."""
    keep = [k for k, (s, n) in enumerate(zip(inputs.sentences, inputs.lengths)) if s < sources and n >= d_v + 2]
    return CutInputs(*([getattr(inputs, f)[k] for k in keep] for f in ("texts", "sentences", "lengths", "keys")))


def training_curve(folder: str, model: FamilyModel, inputs: CutInputs, seed: int = 0) -> pd.DataFrame:
    """C4's D_sub (with its interval over inputs) and the sink peaks (:func:`sink_peaks`) of one member at each
    checkpoint (:func:`identifiability.pretrain.members.checkpoints`, its twin at 0 tokens), on the inputs of
    :func:`beyond_inputs`. Columns: member, d_v, tokens_seen, d_sub, low, high, cls, sep, inputs."""
    from ..models.load import load_model
    from ..pretrain.members import checkpoints

    inputs = beyond_inputs(inputs, model.d_v)

    points = checkpoints(folder)
    points = [
        p for k, p in enumerate(points) if k + 1 == len(points) or points[k + 1][0] > (1 + _SAME_CHECKPOINT) * p[0]
    ]
    rows = []
    for tokens, ck in points:
        lm = load_model(str(ck))
        c4 = raw_vs_effective(lm, inputs.texts, "float32", seed).c4
        traces = trace_sentences(lm, inputs.texts, batch_size=8, progress=False)
        cls, sep = sink_peaks([tr.attentions for tr in traces])
        d = c4.beyond
        rows.append(dict(member=model.member, d_v=lm.d_v, tokens_seen=tokens, d_sub=d.estimate, low=d.low,
                         high=d.high, cls=cls, sep=sep, inputs=len(inputs.texts)))  # fmt: skip
    return pd.DataFrame(rows)


def training_curves(family: Sequence[tuple[LoadedModel, FamilyModel]], inputs: dict[str, CutInputs], seed: int = 0):
    """:func:`training_curve` of each trained member of width 128 and seed 0 (one per d_v), on its own
    ``inputs[name]``; one table (empty when there is none)."""
    parts = [
        training_curve(lm.provenance.get("source", lm.name), m, inputs[m.name], seed)
        for lm, m in family
        if not m.twin and m.width == TRAJECTORY_WIDTH and m.seed == TRAJECTORY_SEED and m.name in inputs
    ]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


@dataclass(frozen=True)
class FamilyRecord(Study):
    """What the chapter's results file holds of the whole family (one study result per model would record the
    same keys once per model): each model's role, the threshold table, the offset curves, the learning curves."""

    hw_models: list  # FamilyModel fields per model
    hw_thresholds: list  # rows of threshold_table
    hw_curves: list  # rows of offset_curves
    hw_learning: list  # rows of learning_table
    hw_training: list  # rows of training_curves


def family_record(
    models: Sequence[FamilyModel],
    thresholds: Sequence[HeadThreshold],
    offsets: Sequence[HeadOffset],
    learning: pd.DataFrame,
    training: pd.DataFrame | None = None,
) -> FamilyRecord:
    """The family's measurements as the results file records them (:class:`FamilyRecord`)."""
    from dataclasses import asdict

    rows = lambda t: t.to_dict("records") if len(t) else []  # noqa: E731
    return FamilyRecord(
        hw_models=[asdict(m) for m in models],
        hw_thresholds=rows(threshold_table(thresholds)) if thresholds else [],
        hw_curves=rows(offset_curves(offsets)) if offsets else [],
        hw_learning=rows(learning),
        hw_training=rows(training) if training is not None else [],
    )


def family_tables(
    thresholds: Sequence[HeadThreshold],
    offsets: Sequence[HeadOffset],
    c20: C20Evidence | None = None,
    recorded: dict | None = None,
    training: pd.DataFrame | None = None,
) -> dict:
    """What the chapter's charts draw: "thresholds" (rows of :func:`threshold_table`), "curves" (of
    :func:`offset_curves`) and "span" (C20's common d_s / d_v range, from ``c20``), from the models measured
    here, or else from a recorded run's results (``recorded``: the :class:`FamilyRecord` filed there; no span);
    empty tables when neither; "training" (rows of :func:`training_curves`) likewise."""
    r = recorded or {}
    return {
        "thresholds": threshold_table(thresholds) if thresholds else pd.DataFrame(r.get("hw_thresholds", [])),
        "curves": offset_curves(offsets) if offsets else pd.DataFrame(r.get("hw_curves", [])),
        "span": c20.comparison.ratio_range if offsets and c20 is not None else None,
        "training": training if training is not None and len(training) else pd.DataFrame(r.get("hw_training", [])),
    }


RESULTS = (HeadThreshold, HeadOffset, FamilyRecord)
