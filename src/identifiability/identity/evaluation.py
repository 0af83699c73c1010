"""Evaluation: identification rates per layer, where misses land, generalisation across layers.

Rates come as tidy data frames (one row per probe x lookup x candidate set); :func:`nested` turns them into
the nested lists written to the results files.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from .data import SplitData
from .lookup import (
    LOOKUPS,
    SentenceLayout,
    chance_in_sentence,
    chance_in_set,
    nearest_in_sentence,
    nearest_in_set,
    offset_chance,
)
from .probes import ProbeConfig, TrainedProbes, apply_probes, train_probes

CANDIDATES = ("sentence", "all")
NEIGHBOUR_OFFSETS = (-3, -2, -1, 0, 1, 2, 3)


@torch.no_grad()
def evaluate(
    tp: TrainedProbes,
    data: SplitData,
    lookups: Sequence[str] = LOOKUPS,
    candidate_sets: Sequence[str] = ("sentence",),
    input_layers: Sequence[int] | None = None,
    scale: torch.Tensor | None = None,
    offsets: Sequence[int] = NEIGHBOUR_OFFSETS,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Identification rates of every probe on ``data``, and where the same-sentence lookups land.

    Args:
        tp: trained probes; probe p is applied to layer ``input_layers[p]`` (default: the layer it was
            trained on; pass another list to test generalisation across layers).
        data: the split to evaluate (same variant as the probes).
        scale: optional (n,) factors multiplying every input embedding at test time (rescaling ablation).

    Returns:
        rates: one row per probe x lookup x candidate set: mapping, loss, layer (trained on), test_layer,
            lookup, candidates, rate, chance, n.
        neighbours: one row per probe x lookup x offset k: share of tokens whose nearest same-sentence
            candidate is x_{i+k} (k=0 is the rate), and the chance of that.
    """
    layers = tp.layers if input_layers is None else list(input_layers)
    inputs = data.inputs
    if scale is not None:
        # scale e_i^l; for the norm-only variant the input *is* the norm, which scales the same way
        inputs = inputs * scale[None, :, None]
    out = apply_probes(tp.probe, inputs, layers)  # (P, n, d)
    layout = SentenceLayout(data.sentence, data.position)
    ch_sent = chance_in_sentence(layout)
    ch_all = chance_in_set(data.key)
    ch_off = offset_chance(layout, data.position, offsets)
    rows, nrows = [], []
    for p in range(len(layers)):
        base = {
            "mapping": tp.kind,
            "loss": tp.losses[p] if tp.kind != "naive" else "none",
            "layer": tp.layers[p],
            "test_layer": layers[p],
            "n": data.n,
        }
        for lookup in lookups:
            if "sentence" in candidate_sets:
                pred = nearest_in_sentence(out[p], data.targets, layout, lookup)
                off = data.position[pred] - data.position
                rows.append(
                    {
                        **base,
                        "lookup": lookup,
                        "candidates": "sentence",
                        "rate": float((off == 0).double().mean()),
                        "chance": ch_sent,
                    }
                )
                for k in offsets:
                    nrows.append(
                        {
                            **base,
                            "lookup": lookup,
                            "offset": k,
                            "share": float((off == k).double().mean()),
                            "chance": ch_off[k],
                        }
                    )
            if "all" in candidate_sets:
                pred = nearest_in_set(out[p], data.targets, data.key, lookup)
                rows.append(
                    {
                        **base,
                        "lookup": lookup,
                        "candidates": "all",
                        "rate": float((data.key[pred] == data.key).double().mean()),
                        "chance": ch_all,
                    }
                )
    return pd.DataFrame(rows), pd.DataFrame(nrows)


@torch.no_grad()
def predict(
    tp: TrainedProbes,
    data: SplitData,
    layer: int,
    loss: str = "cos",
    lookup: str = "cos",
    candidates: str = "sentence",
    input_layer: int | None = None,
) -> torch.Tensor:
    """(n,) row of ``data`` whose input embedding is nearest to g^l(e_i) for the probe trained on ``layer``
    with ``loss`` (applied to ``input_layer``, default the same layer). Token i is identified when
    ``data.key[row] == data.key[i]``; ``data.token_id[row]`` is the token it was taken for."""
    p = next(
        i for i, (li, lo) in enumerate(zip(tp.layers, tp.losses)) if li == layer and (tp.kind == "naive" or lo == loss)
    )
    q = tp.probe.forward_one(p, data.inputs[layer if input_layer is None else input_layer])
    if candidates == "sentence":
        return nearest_in_sentence(q, data.targets, SentenceLayout(data.sentence, data.position), lookup)
    return nearest_in_set(q, data.targets, data.key, lookup)


def generalisation(tp: TrainedProbes, data: SplitData, lookups: Sequence[str] = LOOKUPS) -> pd.DataFrame:
    """Train-layer x test-layer identification rates (same-sentence candidates): each probe trained on
    layer l applied to the embeddings of every layer m. Columns: mapping, loss, layer, test_layer, lookup,
    rate, chance."""
    frames = []
    for m in range(data.inputs.shape[0]):
        r, _ = evaluate(tp, data, lookups, ("sentence",), input_layers=[m] * len(tp.layers), offsets=())
        frames.append(r)
    return pd.concat(frames, ignore_index=True)


def evaluate_all(
    probes: dict[str, TrainedProbes],
    splits: dict[str, SplitData],
    test_candidates: Sequence[str] = CANDIDATES,
    with_train: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rates on the test split (both candidate sets) and on the training split (same-sentence only,
    the paper's Figure 7), plus the test split's neighbour table. Both frames get a ``split`` column."""
    rates, nbs = [], []
    for tp in probes.values():
        r, nb = evaluate(tp, splits["test"], LOOKUPS, test_candidates)
        rates.append(r.assign(split="test"))
        nbs.append(nb.assign(split="test"))
        if with_train:
            r, _ = evaluate(tp, splits["train"], LOOKUPS, ("sentence",), offsets=())
            rates.append(r.assign(split="train"))
    return pd.concat(rates, ignore_index=True), pd.concat(nbs, ignore_index=True)


def nested(df: pd.DataFrame, keys: Sequence[str], value: str, order: str = "layer", digits: int = 4) -> dict:
    """Frame -> nested dict keys[0] -> keys[1] -> ... -> list of ``value`` sorted by ``order`` (for JSON)."""
    out: dict = {}
    for combo, g in df.groupby(list(keys), sort=True):
        combo = combo if isinstance(combo, tuple) else (combo,)
        node = out
        for k in combo[:-1]:
            node = node.setdefault(str(k), {})
        node[str(combo[-1])] = [round(float(v), digits) for v in g.sort_values(order)[value]]
    return out


def _by_sentence(data: SplitData, rows: torch.Tensor) -> list[np.ndarray]:
    """Per sentence of ``data`` (in sentence order), one 0/1 value per token: whether the row it landed on
    holds its own input embedding."""
    ok = (data.key[rows] == data.key).double().numpy()
    sentence = data.sentence.numpy()
    return [ok[sentence == s] for s in np.unique(sentence)]


def correct_by_sentence(
    tp: TrainedProbes, data: SplitData, layer: int, loss: str = "cos", lookup: str = "cos"
) -> list[np.ndarray]:
    """Per sentence of ``data`` (in sentence order), one 0/1 value per token: identified or not by the probe
    trained on ``layer`` with ``loss`` and ``lookup`` among the same sentence's tokens. Sentences are the
    independent units that the chapters' intervals resample."""
    return _by_sentence(data, predict(tp, data, layer, loss, lookup))


def change_by_sentence(tp: TrainedProbes, data: SplitData, first: int, last: int) -> list[np.ndarray]:
    """Per sentence of ``data``, per token: identified at layer ``last`` minus at layer ``first`` (1, 0 or
    -1), by the probes ``tp`` (cosine loss and lookup, as :func:`correct_by_sentence`)."""
    at_first, at_last = (correct_by_sentence(tp, data, layer, "cos", "cos") for layer in (first, last))
    return [b - a for a, b in zip(at_first, at_last)]


def rate_of(rates: pd.DataFrame, mapping: str, loss: str | None, lookup: str, layer: int) -> float:
    """One rate of a rates table (:func:`evaluate`); the identity map has no loss."""
    q = rates[(rates.mapping == mapping) & (rates.lookup == lookup) & (rates.layer == layer)]
    q = q if mapping == "naive" else q[q.loss == loss]
    return float(q.rate.iloc[0])


def last_layer(test: pd.DataFrame, layer: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of a test split's rates (:func:`evaluate_all`) at ``layer``, the identity map's loss written
    '—', and the same as a table: (mapping, loss) rows x (candidates, lookup) columns."""
    last = test[test.layer == layer].copy()
    last["loss"] = last["loss"].where(last.mapping != "naive", "—")
    table = last.pivot_table(index=["mapping", "loss"], columns=["candidates", "lookup"], values="rate")
    return last, table.reindex(columns=pd.MultiIndex.from_product([list(CANDIDATES), list(LOOKUPS)]))


def train_test_gap(rates: pd.DataFrame) -> pd.Series:
    """Per trained probe (the identity map left out), lookup and layer: its rate on the training sentences
    minus on the test sentences, same-sentence candidates (:func:`evaluate_all`'s rates)."""
    index = ["mapping", "loss", "lookup", "layer"]
    trained = rates[rates.mapping != "naive"]
    train, test = (
        trained[trained.split == "train"],
        trained[(trained.split == "test") & (trained.candidates == "sentence")],
    )
    return train.set_index(index).rate - test.set_index(index).rate


def seed_shares(runs: Sequence[TrainedProbes], data: SplitData, layer: int) -> list[np.ndarray]:
    """Per sentence of ``data``, per token the share of ``runs`` (one probe set per training seed) whose
    probe of ``layer`` (cosine loss and lookup) identifies it."""
    return [np.mean(seeds, axis=0) for seeds in zip(*(correct_by_sentence(tp, data, layer) for tp in runs))]


def shuffled_label_rates(
    splits: dict[str, SplitData], config: ProbeConfig, layer: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """The probe of ``layer`` (cosine loss) trained on the training split's targets shuffled with ``seed``:
    per test sentence its rate (cosine lookup), and each test sentence's number of tokens."""
    perm = torch.randperm(splits["train"].n, generator=torch.Generator().manual_seed(seed))
    targets = splits["train"].targets[perm]
    shuffled = train_probes(splits["train"], splits["val"], [layer], ["cos"], config, targets=targets, progress=False)
    rates = rates_by_sentence([shuffled], splits["test"], [layer])[0, :, 0]
    sizes = np.array([len(ok) for ok in correct_by_sentence(shuffled, splits["test"], layer)])
    return rates, sizes


def unseen_shares(train: SplitData, data: SplitData, per_token: Sequence[np.ndarray]) -> tuple[list[np.ndarray], int]:
    """The values of ``per_token`` (one array per sentence of ``data``, in sentence order, one value per
    token) at the tokens whose word type no token of ``train`` holds (a probe cannot have learnt them): one
    array per sentence that has such a token, and how many such tokens ``data`` has."""
    unseen = ~torch.isin(data.token_id, train.token_id)
    masks = [unseen[data.sentence == s].numpy() for s in torch.unique(data.sentence)]
    return [v[m] for v, m in zip(per_token, masks) if m.any()], int(unseen.sum())


def uniform_misses(data: SplitData) -> dict[int, float]:
    """Per neighbour offset k != 0, the share of misses landing on x_{i+k} were they spread uniformly over the
    sentence's other tokens (:func:`identifiability.identity.lookup.offset_chance`)."""
    others = [k for k in NEIGHBOUR_OFFSETS if k]
    return offset_chance(SentenceLayout(data.sentence, data.position), data.position, others, among_others=True)


def misses_elsewhere(tp: TrainedProbes, train: SplitData, data: SplitData, layer: int) -> tuple[float, float]:
    """Where misses land besides a neighbour: the share of the probe's misses at ``layer`` (cosine loss and
    lookup) that retrieve the same word at another position, and the share of the position-only lookup's
    wrong guesses that land on an adjacent token (|k| = 1)."""
    rows = predict(tp, data, layer=layer, loss="cos", lookup="cos")
    missed = data.key[rows] != data.key
    same_word = float((missed & (data.token_id[rows] == data.token_id)).sum()) / max(1, int(missed.sum()))
    pos_rows = position_only_rows(train, data, "cos")
    pos_off = (data.position[pos_rows] - data.position)[pos_rows != torch.arange(data.n)]
    return same_word, float((pos_off.abs() == 1).double().mean()) if pos_off.numel() else 0.0


def rates_by_sentence(
    runs: Sequence[TrainedProbes], data: SplitData, layers: Sequence[int], loss: str = "cos", lookup: str = "cos"
) -> np.ndarray:
    """(runs, sentences, layers): per probe set (e.g. one per training seed), sentence of ``data`` and layer,
    the share of the sentence's tokens identified (:func:`correct_by_sentence`)."""
    return np.array(
        [[[float(ok.mean()) for ok in correct_by_sentence(tp, data, la, loss, lookup)] for la in layers] for tp in runs]
    ).transpose(0, 2, 1)


@torch.no_grad()
def position_only_rows(train: SplitData, data: SplitData, lookup: str = "cos") -> torch.Tensor:
    """The position-only lookup: each token of ``data`` is looked up with the mean input embedding of its
    *position* (over ``train``; the overall mean for positions ``train`` lacks), which knows where a token is
    and nothing of what it is. Returns (n,) the row of ``data`` it lands on among the same sentence's tokens,
    as :func:`predict` does; where it lands on x_{i+k} shows what position similarity alone produces."""
    n_pos = int(max(train.position.max(), data.position.max())) + 1
    d = train.targets.shape[-1]
    total = torch.zeros(n_pos, d, dtype=train.targets.dtype).index_add_(0, train.position, train.targets)
    count = torch.zeros(n_pos, dtype=train.targets.dtype).index_add_(
        0, train.position, torch.ones_like(train.position, dtype=train.targets.dtype)
    )
    means = torch.where(count[:, None] > 0, total / count.clamp_min(1)[:, None], train.targets.mean(0))
    return nearest_in_sentence(means[data.position], data.targets, SentenceLayout(data.sentence, data.position), lookup)


def position_only_by_sentence(train: SplitData, data: SplitData, lookup: str = "cos") -> list[np.ndarray]:
    """The position-only lookup's 0/1 per token, per sentence of ``data`` (as :func:`correct_by_sentence`):
    the null a probe must beat to show that e_i^l carries the token and not just its position."""
    return _by_sentence(data, position_only_rows(train, data, lookup))
