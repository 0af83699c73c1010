"""Chapter 10's studies: every context-mixing measure (:mod:`identifiability.contributions`) scored against
exact HTA and against an intervention, layer by layer, over sentences (C22-C27).

Per sentence, each measure's (L+1, d_s, d_s) array is compared with each reference's by
:func:`identifiability.contributions.agreement.agreement`; :func:`summarise` turns the per-sentence statistics
into one :class:`LayerScore` per (measure, reference, layer, variant), with intervals over sentences.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..contributions.agreement import SentenceAgreement
from ..evidence.measures import MAIN, NO_OWN, LayerScore
from ..stats import mean_interval, paired_interval

RAW = "raw"  # the measure C23 compares rollout and flow with, as it is


def _layer_values(rows: Sequence[SentenceAgreement], name: str, layer: int) -> np.ndarray:
    """One statistic at one layer, per sentence: (n_sentences,)."""
    return np.array([getattr(r, name)[layer] for r in rows], dtype=float)


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
        One :class:`LayerScore` per (measure, reference, layer 1..L, variant).
    """
    out = []
    for (measure, reference), rows in agreements.items():
        if not rows:
            continue
        raw = agreements.get((RAW, reference))
        n_layers = len(rows[0].spearman) - 1
        for variant, (stat, shuf, dist) in {
            MAIN: ("spearman", "shuffled", "distance"),
            NO_OWN: ("spearman_no_own", "shuffled_no_own", "distance_no_own"),
        }.items():
            for layer in range(1, n_layers + 1):
                s, a, b = (_layer_values(rows, k, layer) for k in (stat, shuf, dist))
                minus_raw = None
                if raw is not None and measure != RAW:
                    minus_raw = paired_interval(s, _layer_values(raw, stat, layer), seed)
                out.append(
                    LayerScore(
                        measure, reference, layer, variant,
                        statistic=mean_interval(s, seed), shuffled=mean_interval(a, seed),
                        distance=mean_interval(b, seed), minus_shuffled=paired_interval(s, a, seed),
                        minus_distance=paired_interval(s, b, seed), minus_raw=minus_raw,
                        top1=float(np.nanmean(_layer_values(rows, "top1", layer))),
                        top3=float(np.nanmean(_layer_values(rows, "top3", layer))),
                    )
                )  # fmt: skip
    return tuple(out)
