"""Token identity across layers (chapter 4): one study per section of the chapter.

Token i is *identified* at layer l when the nearest input embedding x_j (among its sentence's, or among all
test tokens') to g^l(e_i^l) is its own x_i; g^l is the identity map (``naive``), an affine map (``linear``)
or an MLP, trained with an L2 or cosine loss (:mod:`identifiability.identity`). The sections build on each
other: :func:`hidden_sample` (hidden states and the split by sentence) -> :func:`trained_probes` ->
:func:`identification` (rates per layer) and :func:`identity_claims` (C6's evidence; C7's with
:func:`c7_evidence`) ->
:func:`generalisation` -> :func:`neighbours`; :func:`second_corpus` repeats the experiment on other text.

Shapes: L layers (L+1 hidden states, 0 = x), n tokens of a split, d model width. Intervals resample test
*sentences* (a sentence's tokens are not independent).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .. import identity as ident
from ..base.stats import Interval, grouped_ci, hierarchical_interval, mean_interval
from ..evidence.token_identity import C6Evidence, C7Evidence
from ..models.loaded_model import LoadedModel
from . import Study, data

# The paper's last-layer rate: linear map, cosine loss and lookup, layer 12 of BERT-base (MRPC sentences)
PAPER_LAST_LAYER = 0.93
# The identity map counts as keeping a layer's tokens while it identifies at least this share
NAIVE_KEEPS = 0.99


# --------------------------------------------------------------------------------------------------
# Hidden states, once
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SampleResult(Study):
    """The sample's hidden states and its split by sentence (train 70 %, val 15 %, test 15 %)."""

    n_sentences_used: int
    n_tokens_all: int  # special tokens included
    split_sizes: dict  # split -> {"sentences": ..., "tokens": ...} (tokens: special tokens left out)
    n_layers: int
    d_model: int
    causal: bool
    split_sentence_overlap: int  # sentences in both train and test: 0 by construction
    hs: ident.HiddenStates = data()
    splits: dict[str, ident.SplitData] = data()
    key: dict | None = data()  # what the probes trained on this sample are cached under (None: not cached)
    sentence_keys: list[str] = data()  # per sentence of the sample: the first 12 hex digits of sha1(text)


def hidden_sample(
    lm: LoadedModel, texts: Sequence[str], corpus: str, *, max_tokens: int, seed: int, include_special: bool
) -> SampleResult:
    """Hidden states e_i^l of every token of ``texts`` (cached on disk, shared with chapter 5) and the split by
    sentence with ``seed``; special tokens are left out of the splits unless ``include_special``."""
    hs = ident.hidden_states(lm, texts, corpus, max_tokens)
    return sample_of(
        hs,
        seed=seed,
        include_special=include_special,
        key=ident.data_key(lm, corpus, hs, seed, include_special),
        sentence_keys=[hashlib.sha1(t.encode()).hexdigest()[:12] for t in texts],
        causal=bool(lm.adapter.causal),
    )


def sample_of(
    hs: ident.HiddenStates,
    *,
    seed: int,
    include_special: bool,
    key: dict | None = None,
    sentence_keys: Sequence[str] | None = None,
    causal: bool = False,
) -> SampleResult:
    """The split by sentence of hidden states ``hs`` (a model's, from :func:`hidden_sample`, or built by hand
    for a control whose answer is known); probes trained on it are cached under ``key`` unless it is None.
    ``sentence_keys`` name the sentences (default: their index)."""
    splits = ident.make_splits(hs, seed=seed, include_special=include_special)
    sizes = {k: {"sentences": int(v.sentence.unique().numel()), "tokens": v.n} for k, v in splits.items()}
    overlap = set(splits["train"].sentence.tolist()) & set(splits["test"].sentence.tolist())
    return SampleResult(
        n_sentences_used=hs.n_sentences,
        n_tokens_all=hs.n_tokens,
        split_sizes=sizes,
        n_layers=hs.n_layers,
        d_model=hs.d,
        causal=causal,
        split_sentence_overlap=len(overlap),
        hs=hs,
        splits=splits,
        key=key,
        sentence_keys=list(sentence_keys) if sentence_keys is not None else [str(i) for i in range(hs.n_sentences)],
    )


# --------------------------------------------------------------------------------------------------
# Training the probes
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProbesResult(Study):
    """Every probe: per mapping (linear, mlp), one per layer and training loss, trained until early stopping
    triggers or the epoch cap runs out."""

    training: dict  # column -> list, one entry per trained probe (:func:`identifiability.identity.training_summary`)
    train_seconds: float
    epoch_cap: int
    patience: int
    probes_trained: int
    probes_stopped_early: int  # early stopping triggered: ``patience`` epochs without a better validation loss
    probes_at_cap: int  # the epoch cap ran out first
    levels_off_at_cap: int | None  # the latest epoch at which a capped probe's validation rate levels off
    level_tol: float  # levelled off: within this of its last value from then on (identity.levels_off)
    probes: dict[str, ident.TrainedProbes] = data()
    overview: pd.DataFrame = data()  # per mapping and loss: epochs run, best epochs, best val loss at 0 and L
    curves: pd.DataFrame = data()  # every probe's validation rate per epoch (identity.rate_curves)


def trained_probes(
    sample: SampleResult, *, epochs: int, batch_size: int, mlp_hidden: int, patience: int, seed: int
) -> ProbesResult:
    """Train (or read from the cache, keyed by the sample) 2 x 2 x (L+1) probes side by side, with early stopping
    on the validation split (``epochs`` is the cap)."""
    t0 = time.time()
    probes = ident.train_all(
        sample.splits,
        epochs=epochs,
        batch_size=batch_size,
        mlp_hidden=mlp_hidden,
        patience=patience,
        seed=seed,
        cache_key=sample.key,
    )
    seconds = time.time() - t0
    summary = ident.training_summary(probes)
    overview = (
        summary.groupby(["mapping", "loss"])
        .agg(
            probes=("layer", "size"),
            stopped_early=("stopped early", "sum"),
            epochs_run=("epochs run", "median"),
            best_epoch_min=("best epoch", "min"),
            best_epoch_max=("best epoch", "max"),
            val_loss_first=("best val loss", "first"),
            val_loss_last=("best val loss", "last"),
        )
        .round(3)
    )
    capped = summary[~summary["stopped early"]]
    return ProbesResult(
        training=summary.round(4).to_dict(orient="list"),
        train_seconds=round(seconds, 1),
        epoch_cap=epochs,
        patience=patience,
        probes_trained=len(summary),
        probes_stopped_early=int(summary["stopped early"].sum()),
        probes_at_cap=len(capped),
        levels_off_at_cap=int(capped["levels off"].max()) if len(capped) else None,
        level_tol=ident.LEVEL_TOL,
        probes=probes,
        overview=overview,
        curves=ident.rate_curves(probes),
    )


# --------------------------------------------------------------------------------------------------
# Identifiability per layer
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IdentificationResult(Study):
    """Identification rates of every probe per layer (test and training sentences, both candidate sets)."""

    rates_sentence: dict  # mapping -> loss -> lookup -> rate per layer (test, same-sentence candidates)
    rates_all: dict  # the same with every test token as a candidate
    rates_train: dict  # the same on the training sentences (paper Figure 7)
    chance_sentence: float  # mean over test tokens of 1/d_s
    chance_all: float
    linear_cos_cos_last: float
    mlp_cos_cos_last: float
    naive_cos_last: float
    naive_l2_last: float
    naive_layer0: list  # the identity map at layer 0: [sentence l2, sentence cos, all l2, all cos]; 1 by definition
    linear_cos_cos_last_all: float
    paper_last_layer: float
    eval_seconds: float
    max_train_test_gap: float
    mean_train_test_gap: float
    best_last: dict  # the best last-layer probe (same-sentence candidates): mapping, loss, lookup, rate
    naive_cos_first_layer_below_99: int | None  # first layer where the identity map falls below NAIVE_KEEPS
    rates: pd.DataFrame = data()  # one row per probe x lookup x candidate set x split
    neighbour_table: pd.DataFrame = data()  # test split: share of tokens whose nearest candidate is x_{i+k}
    last_layer: pd.DataFrame = data()  # test rates at the last layer: (mapping, loss) x (candidates, lookup)
    test_tokens: int = data()
    n_layers: int = data()


def identification(sample: SampleResult, probes: ProbesResult) -> IdentificationResult:
    """Rates of every probe on the test split (both candidate sets) and on the training split."""
    t0 = time.time()
    rates, neighbour_table = ident.evaluate_all(probes.probes, sample.splits)
    L = sample.n_layers
    test = rates[rates.split == "test"]
    sent, allc = test[test.candidates == "sentence"], test[test.candidates == "all"]
    keys = ["mapping", "loss", "lookup"]
    last, table = ident.last_layer(test, L)
    gap = ident.train_test_gap(rates)
    best = last[last.candidates == "sentence"].sort_values("rate").iloc[-1]
    naive = [ident.rate_of(sent, "naive", None, "cos", layer) for layer in range(L + 1)]
    first_drop = next((layer for layer, r in enumerate(naive) if r < NAIVE_KEEPS), None)
    return IdentificationResult(
        rates_sentence=ident.nested(sent, keys, "rate"),
        rates_all=ident.nested(allc, keys, "rate"),
        rates_train=ident.nested(rates[rates.split == "train"], keys, "rate"),
        chance_sentence=float(sent.chance.iloc[0]),
        chance_all=float(allc.chance.iloc[0]),
        linear_cos_cos_last=ident.rate_of(sent, "linear", "cos", "cos", L),
        mlp_cos_cos_last=ident.rate_of(sent, "mlp", "cos", "cos", L),
        naive_cos_last=ident.rate_of(sent, "naive", None, "cos", L),
        naive_l2_last=ident.rate_of(sent, "naive", None, "l2", L),
        naive_layer0=[ident.rate_of(df, "naive", None, lk, 0) for df in (sent, allc) for lk in ident.LOOKUPS],
        linear_cos_cos_last_all=ident.rate_of(allc, "linear", "cos", "cos", L),
        paper_last_layer=PAPER_LAST_LAYER,
        eval_seconds=round(time.time() - t0, 1),
        max_train_test_gap=float(gap.max()),
        mean_train_test_gap=float(gap.mean()),
        best_last=dict(mapping=best.mapping, loss=best.loss, lookup=best.lookup, rate=float(best.rate)),
        naive_cos_first_layer_below_99=first_drop,
        rates=rates,
        neighbour_table=neighbour_table,
        last_layer=table,
        test_tokens=sample.splits["test"].n,
        n_layers=L,
    )


@dataclass(frozen=True)
class ClaimsResult(Study):
    """The evidence of C6 (a linear probe identifies the last layer's tokens, beyond what their position
    tells) and C7 (the identity map loses them with depth), and the linear cosine probe's rate per layer over
    its training seeds. Rates here are means over test sentences of each sentence's share of identified
    tokens (the unit the intervals resample), so they differ slightly from the token-weighted rates of
    :class:`IdentificationResult`."""

    c6_seed_rates: list  # the last-layer linear cosine probe's rate, one per training seed
    c6_position_rate: float  # the position-only lookup (mean x of each position): C6's null
    c6_shuffled_rate: float  # the same probe trained on shuffled targets: the original rule's null
    c6_chance: float  # a uniform guess among the sentence's tokens
    c6_over_position: list  # [estimate, low, high]: probe minus position-only, per sentence, seeds and sentences
    c6_over_shuffled: list  # [estimate, low, high]: probe minus shuffled-label probe, same resampling
    linear_cos_cos_by_layer: list  # per layer 0..L: the linear cosine probe's rate over every training seed
    linear_cos_cos_ci95_by_layer: list  # per layer: [low, high], probe seeds and test sentences resampled
    linear_rate_by_sentence: dict  # per probe seed, test sentence and layer 1..L: the rate (C13/C14 read it)
    seed_training: dict  # the extra seeds' probes: seed, layer, epochs run, best epoch (as ``training``)
    c6_unseen_types_rate: float  # C6's estimate on test tokens whose word type no training sentence holds
    c6_unseen_types_ci95: list
    c6_unseen_tokens: int
    c6: C6Evidence = data()  # what C6's verdict reads (``verdicts.token_identity.c6``)
    naive_drop: Interval = data()  # C7: identity map, cosine lookup, layer L minus layer 1, sentences resampled
    naive_drop_by_token: Interval = data()  # the same, tokens resampled (C7's robustness 'unit')
    unseen: Interval = data()  # the C6 estimate on unseen word types
    rates: np.ndarray = data()  # (probe seeds, test sentences, L+1) the linear cosine probe's rate
    position: np.ndarray = data()  # (test sentences,) the position-only lookup's rate

    @property
    def last_rate(self) -> Interval:
        """C6's estimate: the last-layer rate over probe seeds and test sentences."""
        return self.c6.rate


def identity_claims(
    sample: SampleResult,
    probes: ProbesResult,
    *,
    epochs: int,
    batch_size: int,
    mlp_hidden: int,
    patience: int,
    seed: int,
    more_seeds: Sequence[int] = (1, 2),
) -> ClaimsResult:
    """C6's and C7's evidence and the per-layer curve, over the training seeds ``seed`` and ``seed`` + each of
    ``more_seeds`` (linear cosine probes for every layer, cached: chapter 5 reads them back).

    C6: per test sentence, the share of its tokens the last layer's probe identifies, per seed; intervals
    resample seeds and sentences (hierarchical bootstrap), for the rate and for its paired difference from
    the position-only lookup (the mean training x of each position, looked up among the sentence's tokens)
    and from the same probe trained on shuffled targets. C7: per test token, identified by the identity map
    (cosine lookup) at layer L minus at layer 1, sentences resampled (tokens, for the alternative)."""
    splits, test, L = sample.splits, sample.splits["test"], sample.n_layers
    config = ident.probe_config("linear", epochs, batch_size, mlp_hidden, patience, seed)
    runs = ident.seeded_probes(splits, probes.probes["linear"], config, more_seeds, cache_key=sample.key)
    rates = ident.rates_by_sentence(runs, test, range(L + 1))  # (seeds, sentences, L+1)
    last = rates[..., L]
    position = np.array([ok.mean() for ok in ident.position_only_by_sentence(splits["train"], test)])
    shuffled_rates, sizes = ident.shuffled_label_rates(splits, config, L, seed)
    # the pre-registered interval: per token the share of seeds that identify it, sentences resampled
    per_token = ident.seed_shares(runs, test, L)
    c6 = C6Evidence(
        rate=hierarchical_interval(last, 1, seed),
        over_position=hierarchical_interval(last - position, 1, seed),
        over_shuffled=hierarchical_interval(last - shuffled_rates, 1, seed),
        rate_seed0=hierarchical_interval(last[0], 0, seed),
        over_position_seed0=hierarchical_interval(last[0] - position, 0, seed),
        position_rate=float(position.mean()),
        shuffled_rate=float(shuffled_rates.mean()),
        chance=float((1 / sizes).mean()),
        original_rate=Interval(*grouped_ci(per_token, np.mean, seed=seed), n=len(per_token), unit="test sentences"),
    )
    drops = ident.change_by_sentence(probes.probes["naive"], test, 1, L)
    all_drops = np.concatenate(drops)
    by_layer = [hierarchical_interval(rates[..., layer], 1, seed) for layer in range(L + 1)]
    unseen_groups, n_unseen = ident.unseen_shares(splits["train"], test, per_token)
    unseen_rate = grouped_ci(unseen_groups, np.mean, seed=seed)  # NaN where every test type was seen
    ids, tokens = torch.unique(test.sentence, return_counts=True)  # sentence order, as ``rates``
    keys = [sample.sentence_keys[int(s)] for s in ids]
    return ClaimsResult(
        c6_seed_rates=[float(r) for r in last.mean(1)],
        c6_position_rate=c6.position_rate,
        c6_shuffled_rate=c6.shuffled_rate,
        c6_chance=c6.chance,
        c6_over_position=[c6.over_position.estimate, c6.over_position.low, c6.over_position.high],
        c6_over_shuffled=[c6.over_shuffled.estimate, c6.over_shuffled.low, c6.over_shuffled.high],
        linear_cos_cos_by_layer=[b.estimate for b in by_layer],
        linear_cos_cos_ci95_by_layer=[[b.low, b.high] for b in by_layer],
        linear_rate_by_sentence={
            "sentence_keys": keys,
            "probe_seeds": [seed + k for k in (0, *more_seeds)],
            "layers": list(range(1, L + 1)),
            "rate": rates[..., 1:].round(6).tolist(),
            "tokens": tokens.tolist(),  # test tokens per sentence: C13's power at the ceiling reads them
        },
        seed_training=ident.seed_training(runs[1:], [seed + k for k in more_seeds]),
        c6_unseen_types_rate=unseen_rate[0],
        c6_unseen_types_ci95=list(unseen_rate[1:]),
        c6_unseen_tokens=n_unseen,
        c6=c6,
        naive_drop=Interval(*grouped_ci(drops, np.mean, seed=seed), n=len(drops), unit="test sentences"),
        naive_drop_by_token=mean_interval(all_drops, seed, "test tokens"),
        unseen=Interval(*unseen_rate, n=len(unseen_groups), unit="test sentences"),
        rates=rates,
        position=position,
    )


def c7_evidence(claims: ClaimsResult, rates: IdentificationResult) -> C7Evidence:
    """C7's evidence: the identity map's drop from layer 1 to the last (intervals over test sentences and,
    for the alternative, test tokens) and chance among the sentence's tokens as its baseline."""
    return C7Evidence(claims.naive_drop, claims.naive_drop_by_token, rates.chance_sentence)


# --------------------------------------------------------------------------------------------------
# Generalisation across layers
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GeneralisationResult(Study):
    """Probes trained on layer l applied to layer m (test sentences, same-sentence candidates); the
    ``gen_linear_cos_*`` summaries are of the linear probe with cosine loss and lookup."""

    generalisation: dict  # mapping -> loss -> lookup -> trained layer -> rate per tested layer
    gen_linear_cos_diag_mean: float  # trained and tested on the same layer
    gen_linear_cos_offdiag_mean: float
    gen_linear_cos_last_on_first: float  # the layer-L probe applied to x
    gen_linear_cos_first_on_last: float  # the layer-0 probe applied to e^L
    gen_linear_cos_neighbour_mean: float  # tested on the layer just above or below
    table: pd.DataFrame = data()  # mapping, loss, layer, test_layer, lookup, rate, chance
    matrix: np.ndarray = data()  # (L+1, L+1) the linear cosine probe's rates: [trained on, tested on]


def generalisation(sample: SampleResult, probes: ProbesResult) -> GeneralisationResult:
    """Every trained probe applied to every layer of the test split."""
    kinds = ("linear", "mlp")
    gen = pd.concat([ident.generalisation(probes.probes[k], sample.splits["test"]) for k in kinds], ignore_index=True)
    g = gen[(gen.mapping == "linear") & (gen.loss == "cos") & (gen.lookup == "cos")]
    m = g.pivot(index="layer", columns="test_layer", values="rate").to_numpy()
    off = m[~np.eye(len(m), dtype=bool)]
    adjacent = [m[i, i + 1] for i in range(len(m) - 1)] + [m[i + 1, i] for i in range(len(m) - 1)]
    return GeneralisationResult(
        generalisation={
            k: ident.nested(gen[gen.mapping == k], ["loss", "lookup", "layer"], "rate", order="test_layer")
            for k in kinds
        },
        gen_linear_cos_diag_mean=float(np.diag(m).mean()),
        gen_linear_cos_offdiag_mean=float(off.mean()),
        gen_linear_cos_last_on_first=float(m[-1, 0]),
        gen_linear_cos_first_on_last=float(m[0, -1]),
        gen_linear_cos_neighbour_mean=float(np.mean(adjacent)),
        table=gen,
        matrix=m,
    )


# --------------------------------------------------------------------------------------------------
# Where the misses land
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NeighbourResult(Study):
    """Where the nearest candidate lands: x_{i+k} instead of x_i (test sentences)."""

    neighbours: dict  # mapping -> loss -> lookup -> k -> share of tokens per layer (k = 0: the rate)
    neighbour_chance: dict  # k -> chance that a uniform same-sentence guess is x_{i+k}
    linear_cos_last_miss: float  # share of test tokens the linear cosine probe misses at layer L
    linear_cos_last_miss_within_3: float  # share of test tokens whose miss lands at 0 < |k| <= 3
    naive_cos_last_neighbour_shares: dict  # k -> share, the identity map (cosine lookup) at layer L
    linear_cos_last_misses_by_offset: dict  # k -> share of the misses landing on x_{i+k}
    uniform_misses_by_offset: dict  # k -> the same if misses were spread uniformly over the other tokens
    linear_cos_last_miss_same_word: float  # share of misses that retrieve the same word at another position
    position_only_adjacent: float  # share of the position-only lookup's wrong guesses that land at |k| = 1
    table: pd.DataFrame = data()  # the neighbour table of :func:`identification`

    @property
    def adjacent(self) -> float:
        """Share of the linear cosine probe's last-layer misses that land on x_{i-1} or x_{i+1}."""
        return self.linear_cos_last_misses_by_offset[-1] + self.linear_cos_last_misses_by_offset[1]

    @property
    def adjacent_uniform(self) -> float:
        return self.uniform_misses_by_offset[-1] + self.uniform_misses_by_offset[1]


def neighbours(sample: SampleResult, probes: ProbesResult, rates: IdentificationResult) -> NeighbourResult:
    """Where the misses land, against two baselines: misses spread uniformly over the sentence's other tokens,
    and a lookup that knows only each token's position (the mean input embedding of its position)."""
    L, test, nb = sample.n_layers, sample.splits["test"], rates.neighbour_table
    lin = nb[(nb.mapping == "linear") & (nb.loss == "cos") & (nb.lookup == "cos")]
    at_last = lin[lin.layer == L].set_index("offset")
    miss_last = 1 - float(at_last.loc[0, "share"])
    near = float(at_last.loc[[k for k in at_last.index if k != 0], "share"].sum())
    naive_nb = nb[(nb.mapping == "naive") & (nb.lookup == "cos") & (nb.layer == L)].set_index("offset")
    others = [k for k in ident.NEIGHBOUR_OFFSETS if k]
    same_word, position_adjacent = ident.misses_elsewhere(probes.probes["linear"], sample.splits["train"], test, L)
    return NeighbourResult(
        neighbours=ident.nested(nb, ["mapping", "loss", "lookup", "offset"], "share"),
        neighbour_chance=nb.groupby("offset").chance.first().to_dict(),
        linear_cos_last_miss=miss_last,
        linear_cos_last_miss_within_3=near,
        naive_cos_last_neighbour_shares={int(k): float(v) for k, v in naive_nb.share.items()},
        linear_cos_last_misses_by_offset={k: float(at_last.loc[k, "share"]) / max(miss_last, 1e-12) for k in others},
        uniform_misses_by_offset=ident.uniform_misses(test),
        linear_cos_last_miss_same_word=same_word,
        position_only_adjacent=position_adjacent,
        table=nb,
    )


# --------------------------------------------------------------------------------------------------
# A second corpus
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SecondCorpusResult(Study):
    """The experiment repeated on a second corpus: probes trained on it, and the first corpus's probes
    applied to it unchanged (test sentences, same-sentence candidates)."""

    second_corpus_name: str
    second_sentences: int
    second_test_tokens: int
    second_rates: dict  # mapping -> loss -> lookup -> rate per layer, probes trained on the second corpus
    second_transfer_rates: dict  # the same with the first corpus's probes
    second_chance: float
    second_linear_cos_cos_last: float
    second_transfer_linear_cos_cos_last: float
    overlay: pd.DataFrame = data()  # test rates of both corpora and of the transfer, one ``series`` each


def second_corpus(
    lm: LoadedModel,
    texts: Sequence[str],
    corpus: str,
    probes: ProbesResult,
    first: IdentificationResult,
    first_corpus: str,
    *,
    max_tokens: int,
    seed: int,
    include_special: bool,
    epochs: int,
    batch_size: int,
    mlp_hidden: int,
    patience: int,
) -> SecondCorpusResult:
    """New probes trained on ``texts`` of ``corpus`` (same split rule and training), and ``probes`` (trained
    on ``first_corpus``, whose rates are ``first``) applied to them."""
    sample = hidden_sample(lm, texts, corpus, max_tokens=max_tokens, seed=seed, include_special=include_special)
    own = trained_probes(
        sample, epochs=epochs, batch_size=batch_size, mlp_hidden=mlp_hidden, patience=patience, seed=seed
    ).probes
    rates, _ = ident.evaluate_all(own, sample.splits, test_candidates=("sentence",), with_train=False)
    transfer, _ = ident.evaluate_all(probes.probes, sample.splits, test_candidates=("sentence",), with_train=False)
    first_rates = first.rates[(first.rates.split == "test") & (first.rates.candidates == "sentence")]
    overlay = pd.concat(
        [
            first_rates.assign(series=first_corpus),
            rates.assign(series=corpus),
            transfer[transfer.mapping != "naive"].assign(series=f"{corpus}, probes trained on {first_corpus}"),
        ],
        ignore_index=True,
    )
    test = rates[rates.split == "test"]
    L = sample.n_layers
    return SecondCorpusResult(
        second_corpus_name=corpus,
        second_sentences=sample.n_sentences_used,
        second_test_tokens=sample.splits["test"].n,
        second_rates=ident.nested(test, ["mapping", "loss", "lookup"], "rate"),
        second_transfer_rates=ident.nested(transfer, ["mapping", "loss", "lookup"], "rate"),
        second_chance=float(test.chance.iloc[0]),
        second_linear_cos_cos_last=ident.rate_of(test, "linear", "cos", "cos", L),
        second_transfer_linear_cos_cos_last=ident.rate_of(transfer, "linear", "cos", "cos", L),
        overlay=overlay,
    )


RESULTS = (
    SampleResult,
    ProbesResult,
    IdentificationResult,
    ClaimsResult,
    GeneralisationResult,
    NeighbourResult,
    SecondCorpusResult,
)
