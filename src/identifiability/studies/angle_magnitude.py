"""Studies of the angle-versus-magnitude chapter (05): where in e_i^l does a token's identity live?

One function per section of the chapter, each returning a :class:`~identifiability.studies.Study`:

* :func:`probe_sample`: the token-identity chapter's sample (hidden states e_i^l, splits by sentence, probes
  g^l), read from its caches when the parameters match;
* :func:`cosine_vs_l2`: the paper's evidence, probes trained and looked up with the cosine or the L2 distance;
* :func:`ablations`: angle only (unit vectors), magnitude only (norms), random rescaling at test time;
* :func:`norms_and_angles`: |e_i^l| and the angle between e_i^l and x_i per layer;
* :func:`c8_evidence`: the intervals claim C8 is judged on, per test sentence.

Rates are test-split, same-sentence identification rates (the paper's setting); layers run 0..L (0 is x).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import identity as ident
from ..base.stats import hierarchical_interval
from ..evidence.angle_magnitude import C8Evidence
from ..identity import HiddenStates, SplitData, TrainedProbes
from ..models.loaded_model import LoadedModel
from . import Study, data

# (training loss, lookup) pairs, in the order a tie between them is broken (the first wins)
COMBOS = tuple((lo, lk) for lo in ident.LOSSES for lk in ident.LOOKUPS)


def curve(df: pd.DataFrame, mapping: str, loss: str | None, lookup: str) -> np.ndarray:
    """(L+1,) rate per layer of one probe in a rates frame (columns mapping, loss, lookup, layer, rate); the
    identity map (``naive``) has no training loss, so ``loss`` is ignored for it."""
    q = df[(df.mapping == mapping) & (df.lookup == lookup)]
    q = q if mapping == "naive" else q[q.loss == loss]
    return q.sort_values("layer").rate.to_numpy()


# --------------------------------------------------------------------------------------------------
# The sample
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeSample(Study):
    """The sample every section reads: hidden states, their splits by sentence and the trained probes."""

    n_sentences_used: int
    test_tokens: int
    n_layers: int
    probes_from_cache: bool  # the linear probes were read from the cache (trained by chapter 04 or a rerun)
    hs: HiddenStates = data()
    splits: dict[str, SplitData] = data()  # "train", "val", "test" (raw variant)
    probes: dict[str, TrainedProbes] = data()  # "naive" and "linear", every layer x loss
    key: dict | None = data()  # what the probe cache is keyed by besides the probes' own configuration
    seed: int = data()
    include_special: bool = data()
    training: dict = data()  # epochs, batch_size, mlp_hidden, patience: how every probe is trained

    def train(self, variant: str, kind: str) -> tuple[dict[str, SplitData], TrainedProbes]:
        """Splits of ``variant`` ("unit", "norm", "unit+norm"; :func:`identifiability.identity.make_split`)
        and the ``kind`` probes trained on them (read from the cache when trained before)."""
        sp = ident.make_splits(self.hs, self.seed, variant, self.include_special)
        tp = ident.train_all(sp, (kind,), **self.training, seed=self.seed, cache_key=self.key, progress=False)
        return sp, tp[kind]


def probe_sample(
    lm: LoadedModel,
    texts: Sequence[str],
    corpus: str,
    max_tokens: int,
    seed: int = 0,
    include_special: bool = False,
    epochs: int = 40,
    patience: int = 3,
    batch_size: int = 512,
    mlp_hidden: int = 512,
) -> ProbeSample:
    """Hidden states of ``texts`` (cached per model, corpus and texts), split 70/15/15 by sentence with
    ``seed``, and the identity map and linear probes g^l for every layer and loss, trained on the training
    split (cached per data and configuration: the same calls as the token-identity chapter, so its work is
    reused)."""
    hs = ident.hidden_states(lm, texts, corpus, max_tokens)
    key = ident.data_key(lm, corpus, hs, seed, include_special)
    training = dict(epochs=epochs, batch_size=batch_size, mlp_hidden=mlp_hidden, patience=patience)
    return probe_sample_of(hs, key, seed=seed, include_special=include_special, **training)


def probe_sample_of(
    hs: HiddenStates,
    key: dict | None,
    *,
    seed: int,
    include_special: bool,
    epochs: int,
    patience: int,
    batch_size: int,
    mlp_hidden: int,
) -> ProbeSample:
    """:func:`probe_sample` on hidden states ``hs`` (a model's, or built by hand for a control whose answer is
    known); probes are cached under ``key`` unless it is None."""
    splits = ident.make_splits(hs, seed=seed, include_special=include_special)
    training = dict(epochs=epochs, batch_size=batch_size, mlp_hidden=mlp_hidden, patience=patience)
    probes = ident.train_all(splits, kinds=("naive", "linear"), **training, seed=seed, cache_key=key, progress=False)
    return ProbeSample(
        n_sentences_used=hs.n_sentences,
        test_tokens=splits["test"].n,
        n_layers=hs.n_layers,
        probes_from_cache=bool(probes["linear"].history.get("cached")),
        hs=hs,
        splits=splits,
        probes=probes,
        key=key,
        seed=seed,
        include_special=include_special,
        training=training,
    )


# --------------------------------------------------------------------------------------------------
# Cosine versus L2 (the paper's evidence)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CosineL2(Study):
    """Test rates of every probe with cosine or L2 training loss and lookup; lists run over layers 0..L."""

    rates: dict  # mapping -> loss -> lookup -> rate per layer
    chance: float  # a uniformly random same-sentence guess
    linear_cos_cos: list[float]
    linear_l2_l2: list[float]
    naive_cos: list[float]
    naive_l2: list[float]
    cos_minus_l2_linear_mean: float
    cos_minus_l2_naive_mean: float
    cos_beats_l2_layers_linear: int
    cos_beats_l2_layers_naive: int
    cos_at_least_l2_layers_linear: int
    cos_at_least_l2_layers_naive: int
    table: pd.DataFrame = data()  # one row per probe x lookup x layer (identity.evaluate's columns)


def cosine_vs_l2(s: ProbeSample) -> CosineL2:
    """The linear map trained with the cosine (L2) distance and looked up with the cosine (L2) distance, and
    the identity map with either lookup, on the test split."""
    table, _ = ident.evaluate_all(s.probes, s.splits, test_candidates=("sentence",), with_train=False)
    cos_cos, l2_l2 = curve(table, "linear", "cos", "cos"), curve(table, "linear", "l2", "l2")
    naive_cos, naive_l2 = curve(table, "naive", None, "cos"), curve(table, "naive", None, "l2")
    return CosineL2(
        rates=ident.nested(table, ["mapping", "loss", "lookup"], "rate"),
        chance=float(table.chance.iloc[0]),
        linear_cos_cos=cos_cos.tolist(),
        linear_l2_l2=l2_l2.tolist(),
        naive_cos=naive_cos.tolist(),
        naive_l2=naive_l2.tolist(),
        cos_minus_l2_linear_mean=float((cos_cos - l2_l2).mean()),
        cos_minus_l2_naive_mean=float((naive_cos - naive_l2).mean()),
        cos_beats_l2_layers_linear=int((cos_cos > l2_l2).sum()),
        cos_beats_l2_layers_naive=int((naive_cos > naive_l2).sum()),
        cos_at_least_l2_layers_linear=int((cos_cos >= l2_l2).sum()),
        cos_at_least_l2_layers_naive=int((naive_cos >= naive_l2).sum()),
        table=table,
    )


# --------------------------------------------------------------------------------------------------
# Separating angle from magnitude
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ablations(Study):
    """Test rates per layer (0..L) of the ablations that separate angle from magnitude."""

    ablations: dict  # ablation label -> loss -> lookup -> rate per layer
    ablation_labels: list[str]
    ablation_seconds: float
    unit_linear_cos_cos: list[float]  # angle only: linear map on unit vectors, cosine loss and lookup
    norm_only_best: list[float]  # magnitude only: the MLP on |e_i^l|, its best loss x lookup per layer
    rescaled_linear_cos_cos: list[float]
    rescaled_linear_l2_l2: list[float]
    rescaled_naive_cos: list[float]
    rescaled_naive_l2: list[float]
    unit_minus_original_last: float
    unit_minus_original_max_abs: float
    unit_minus_original_min: float
    norm_only_best_max: float
    norm_only_best_max_layer: int
    rescale_drop_linear_cos_last: float
    rescale_drop_linear_l2_last: float
    rescale_naive_cos_max_change: float  # 0 by construction: the cosine ignores a length
    rescale_drop_naive_l2_mean: float
    table: pd.DataFrame = data()  # identity.ablation_study's rows: ablation, mapping, loss, lookup, layer, rate
    last_layer: pd.DataFrame = data()  # rates at layer L: one row per loss / lookup, one column per ablation
    rescale_max: float = data()

    def best_norm_probe(self, layer: int) -> tuple[str, str]:
        """The (training loss, lookup) of the best magnitude-only MLP at ``layer``."""
        return max(COMBOS, key=lambda c: ablation_curve(self.table, "magnitude only", "mlp", *c)[layer])


def ablation_curve(table: pd.DataFrame, ablation: str, mapping: str, loss: str | None, lookup: str) -> np.ndarray:
    """(L+1,) rate per layer of one probe under the ablation whose label starts with ``ablation`` ("original",
    "angle only", "magnitude only", "rescaled") in :func:`identifiability.identity.ablation_study`'s rows."""
    return curve(table[table.ablation.str.startswith(ablation)], mapping, loss, lookup)


def _last_layer_table(table: pd.DataFrame, layer: int) -> pd.DataFrame:
    def rate(ablation, mapping, loss, lookup):
        return ablation_curve(table, ablation, mapping, loss, lookup)[layer]

    rows = []
    for lk in ident.LOOKUPS:
        for lo in ident.LOSSES:
            rows.append(
                {
                    "loss / lookup": f"{lo} / {lk}",
                    "original (linear)": rate("original", "linear", lo, lk),
                    "angle only (linear)": rate("angle only", "linear", lo, lk),
                    "magnitude only (MLP)": rate("magnitude only", "mlp", lo, lk),
                    "rescaled (linear)": rate("rescaled", "linear", lo, lk),
                }
            )
        rows.append(
            {
                "loss / lookup": f"— / {lk} (identity map)",
                "original (linear)": rate("original", "naive", None, lk),
                "rescaled (linear)": rate("rescaled", "naive", None, lk),
            }
        )
    return pd.DataFrame(rows).set_index("loss / lookup")


def ablations(s: ProbeSample, rescale_max: float = 4.0) -> Ablations:
    """:func:`identifiability.identity.ablation_study` on the sample: the raw probes (original), linear maps
    trained and looked up on unit vectors e/|e| -> x/|x| (angle only), an MLP from |e_i^l| alone to x_i
    (magnitude only), and the raw probes on e_i^l times a random factor in [1/rescale_max, rescale_max] per
    token (rescaled). The new probes are cached like the sample's."""
    t0 = time.time()
    table = ident.ablation_study(
        s.hs,
        s.splits,
        s.probes,
        rescale_max=rescale_max,
        seed=s.seed,
        include_special=s.include_special,
        **s.training,
        cache_key=s.key,
    )
    labels = list(dict.fromkeys(table.ablation))
    recorded = {a: ident.nested(table[table.ablation == a], ["loss", "lookup"], "rate") for a in labels}
    seconds = round(time.time() - t0, 1)

    def at(ablation, mapping, loss, lookup):
        return ablation_curve(table, ablation, mapping, loss, lookup)

    cos_cos, l2_l2 = at("original", "linear", "cos", "cos"), at("original", "linear", "l2", "l2")
    naive_cos, naive_l2 = at("original", "naive", None, "cos"), at("original", "naive", None, "l2")
    unit_cos = at("angle only", "linear", "cos", "cos")
    norm_best = np.max([at("magnitude only", "mlp", lo, lk) for lo, lk in COMBOS], axis=0)
    resc_cos, resc_l2 = at("rescaled", "linear", "cos", "cos"), at("rescaled", "linear", "l2", "l2")
    resc_naive_cos, resc_naive_l2 = at("rescaled", "naive", None, "cos"), at("rescaled", "naive", None, "l2")
    return Ablations(
        ablations=recorded,
        ablation_labels=labels,
        ablation_seconds=seconds,
        unit_linear_cos_cos=unit_cos.tolist(),
        norm_only_best=norm_best.tolist(),
        rescaled_linear_cos_cos=resc_cos.tolist(),
        rescaled_linear_l2_l2=resc_l2.tolist(),
        rescaled_naive_cos=resc_naive_cos.tolist(),
        rescaled_naive_l2=resc_naive_l2.tolist(),
        unit_minus_original_last=float(unit_cos[-1] - cos_cos[-1]),
        unit_minus_original_max_abs=float(np.abs(unit_cos - cos_cos).max()),
        unit_minus_original_min=float((unit_cos - cos_cos).min()),
        norm_only_best_max=float(norm_best.max()),
        norm_only_best_max_layer=int(norm_best.argmax()),
        rescale_drop_linear_cos_last=float(cos_cos[-1] - resc_cos[-1]),
        rescale_drop_linear_l2_last=float(l2_l2[-1] - resc_l2[-1]),
        rescale_naive_cos_max_change=float(np.abs(resc_naive_cos - naive_cos).max()),
        rescale_drop_naive_l2_mean=float((naive_l2 - resc_naive_l2).mean()),
        table=table,
        last_layer=_last_layer_table(table, s.n_layers),
        rescale_max=rescale_max,
    )


# --------------------------------------------------------------------------------------------------
# Norms and angles per layer
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NormsAngles(Study):
    """|e_i^l| and the angle (degrees) between e_i^l and x_i over the test tokens; lists run over layers 0..L."""

    norm_median: list[float]
    norm_q05: list[float]
    norm_q95: list[float]
    norm_spread_last: float  # 95th over 5th percentile of |e_i^L|
    angle_median: list[float]
    angle_q25: list[float]
    angle_q75: list[float]
    angle_other_mean: list[float]  # mean angle between e_i^l and the other tokens' x_j of its sentence
    closest_share: list[float]  # own x_i is the angularly closest: the identity map's cosine rate
    angle_increasing_layers: int  # steps l -> l+1 where the median angle grows
    norms: pd.DataFrame = data()  # identity.norm_summary: one row per layer
    histograms: pd.DataFrame = data()  # identity.norm_histograms: |e_i^l| / median, per layer and bin
    angles: pd.DataFrame = data()  # identity.angle_summary: one row per layer


def norms_and_angles(s: ProbeSample, hist_bins: int = 40) -> NormsAngles:
    """Quantiles of |e_i^l| per layer, their histograms (``hist_bins`` bins, relative to each layer's median)
    and the angle between e_i^l and its own x_i per layer, on the test split."""
    test = s.splits["test"]
    norms = ident.norm_summary(test)
    angles = ident.angle_summary(test)
    return NormsAngles(
        norm_median=norms["median"].round(4).tolist(),
        norm_q05=norms.q05.round(4).tolist(),
        norm_q95=norms.q95.round(4).tolist(),
        norm_spread_last=float((norms.q95 / norms.q05).iloc[-1]),
        angle_median=angles["median"].round(3).tolist(),
        angle_q25=angles.q25.round(3).tolist(),
        angle_q75=angles.q75.round(3).tolist(),
        angle_other_mean=angles.other_mean.round(3).tolist(),
        closest_share=angles.closest_share.round(4).tolist(),
        angle_increasing_layers=int((np.diff(angles["median"].to_numpy()) > 0).sum()),
        norms=norms,
        histograms=ident.norm_histograms(test, bins=hist_bins),
        angles=angles,
    )


# --------------------------------------------------------------------------------------------------
# C8: what claim C8 is judged on
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class C8Result(Study):
    """Per test sentence at the last layer L, the share of its tokens each probe identifies, for three probe
    seeds, and the evidence C8's verdict reads (``verdicts.angle_magnitude.c8``)."""

    c8_norm_spread_last: float  # interquartile range over median of |e_i^L|
    c8_best_norm_probe: list[str]  # (training loss, lookup) of the magnitude-only MLP judged
    c8_unit_norm_rate_last: float  # unit vectors with the norm as one more input
    c8_seed_rates: dict  # "raw", "unit", "norm", "unit+norm": per probe seed the mean over test sentences
    c8_seeds: list[int]
    evidence: C8Evidence = data()
    rates: dict[str, np.ndarray] = data()  # the same four: (probe seeds, test sentences) rate at layer L
    chance: np.ndarray = data()  # (test sentences,) one over the sentence's tokens


def c8_evidence(s: ProbeSample, abl: Ablations, more_seeds: Sequence[int] = (1, 2)) -> C8Result:
    """Linear probes on unit vectors (with and without the norm as one more input) and the magnitude-only
    MLP at the last layer (its best loss and lookup in ``abl``), each trained with seed ``s.seed`` and
    ``s.seed`` + each of ``more_seeds``, compared with the raw linear probe of the same seeds (the token-identity
    chapter's, read from the cache) on the same test sentences. Intervals resample probe seeds and test
    sentences (hierarchical bootstrap); the 'unit' alternative's, sentences of seed ``s.seed`` alone."""
    L = s.n_layers
    best_norm = abl.best_norm_probe(L)
    runs = {  # splits, the probes trained on them, the (loss, lookup) judged, the layers the seeds train
        "raw": (s.splits, s.probes["linear"], ("cos", "cos"), None),  # every layer, as chapter 4
        "unit": (*s.train("unit", "linear"), ("cos", "cos"), [L]),
        "norm": (*s.train("norm", "mlp"), best_norm, [L]),
        "unit+norm": (*s.train("unit+norm", "linear"), ("cos", "cos"), [L]),
    }
    rates = {}
    for name, (splits, tp, (loss, lookup), layers) in runs.items():
        config = ident.probe_config(tp.kind, **s.training, seed=s.seed)
        seeds = ident.seeded_probes(splits, tp, config, more_seeds, (loss,), layers, cache_key=s.key)
        rates[name] = ident.rates_by_sentence(seeds, splits["test"], [L], loss, lookup)[..., 0]
    raw, unit, norm, both = (rates[k] for k in ("raw", "unit", "norm", "unit+norm"))
    test = s.splits["test"]
    chance = 1 / np.array([len(ok) for ok in ident.correct_by_sentence(s.probes["naive"], test, L)])
    norms = ident.norm_summary(test)
    q25, median, q75 = norms[norms.layer == L].iloc[0][["q25", "median", "q75"]]
    spread = float((q75 - q25) / median)
    evidence = C8Evidence(
        unit_minus_raw=hierarchical_interval(unit - raw, 1, s.seed),
        norm_vs_chance=hierarchical_interval(norm - chance, 1, s.seed),
        norm_adds=hierarchical_interval(both - unit, 1, s.seed),
        norm_spread=spread,
        unit_minus_raw_seed0=hierarchical_interval((unit - raw)[0], 0, s.seed),
        norm_vs_chance_seed0=hierarchical_interval((norm - chance)[0], 0, s.seed),
        norm_adds_seed0=hierarchical_interval((both - unit)[0], 0, s.seed),
    )
    return C8Result(
        c8_norm_spread_last=spread,
        c8_best_norm_probe=list(best_norm),
        c8_unit_norm_rate_last=float(both.mean()),
        c8_seed_rates={k: [float(x) for x in v.mean(1)] for k, v in rates.items()},
        c8_seeds=[s.seed + k for k in (0, *more_seeds)],
        evidence=evidence,
        rates=rates,
        chance=chance,
    )


RESULTS = (ProbeSample, CosineL2, Ablations, NormsAngles, C8Result)
