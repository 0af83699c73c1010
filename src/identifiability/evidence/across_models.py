"""What C13 and C14 read (chapter 9, across models), built by :mod:`identifiability.studies.across_models`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..base.stats import Interval, power_to_detect, rate_variance


@dataclass(frozen=True)
class Paired:
    """One fine-tuned task's (or the random-initialisation control's) paired differences d_l, fine-tuned
    minus pre-trained identifiability rate on the same test sentence, layers 1..L, from one bootstrap.

    ``layers``, ``reference``, ``gap`` and ``peak_late`` are read from the same draws, so C14's two parts
    are joint. The pre-trained reference's rate per layer (``reference``, resampled with the differences)
    says where it leaves room to change: ``off_ceiling`` lists the layers whose interval's upper bound lies
    below ``ceiling`` (1 - C13's band, which the study is given), and C14's ``gap`` and ``peak_late`` are
    read on those layers only (C14, version 4).
    ``seed_var`` and ``sentence_var`` split the variance of the last-layer estimate into the part more test
    sentences cannot shrink (fine-tune and probe seeds) and the per-sentence part (its share is
    ``sentence_var / sentences``); :func:`identifiability.base.stats.sentences_for_power` reads them.
    """

    layers: tuple[Interval, ...]  # d_l, l = 1..L: mean over seeds and sentences, 95% interval
    gap: Interval  # |d_m| - |d_f|, f and m the first and last off-ceiling layer (NaN with fewer than two)
    peak_late: float  # share of draws whose largest |d_l| among the off-ceiling layers lies in l > L/2
    seed_var: float
    sentence_var: float
    ft_seeds: int
    probe_seeds: int
    sentences: int
    # (m, share): the share of draws peaking late were every unit m times as many (draws shrunk by 1/sqrt(m)
    # around the estimate); what an inconclusive "peak late" names as the sentences that would settle it
    peak_late_scaled: tuple[tuple[int, float], ...] = field(default=())
    # the pre-trained reference's rate per layer l = 1..L (mean over its probe seeds and the test sentences),
    # its 95% interval from the draws of the differences (its probe seeds and the sentences resampled alike)
    reference: tuple[Interval, ...] = field(default=())
    ceiling: float = 0.95  # a layer is off the ceiling when its reference's upper bound lies below this
    off_ceiling: tuple[int, ...] = field(default=())  # those layers (1-based), the only ones C14 judges
    layer_var: tuple[float, ...] = field(default=())  # the variance of d_l over the draws, l = 1..L
    # test tokens per test sentence (C13's power at the ceiling); ``tokens_recorded`` False where a run did not
    # record them and they are the least denominator of every rate measured on the sentence (a lower bound)
    tokens: tuple[int, ...] = field(default=())
    tokens_recorded: bool = True

    @property
    def last(self) -> Interval:
        return self.layers[-1]

    @property
    def at_ceiling(self) -> bool:
        """Both models identify every test token at the last layer: d_L = 0 and the reference's rate 1 in every
        draw (C13, version 3)."""
        d, ref = self.last, self.reference[-1] if self.reference else None
        return d.has_interval and d.low == d.high == 0 and ref is not None and ref.low == 1

    def ceiling_power(self, band: float) -> float:
        """The power C13's test had at the ceiling: the chance that a true difference of ``band``, with the
        variance of a rate of 1 - ``band`` on the same test tokens (``stats.rate_variance``), gives an interval
        excluding 0 (``stats.power_to_detect``). NaN without the test tokens."""
        return power_to_detect(band, rate_variance(1 - band, self.tokens)) if self.tokens else float("nan")


@dataclass(frozen=True)
class FineTuning:
    """Everything C13 and C14 take, current and original rules: per fine-tuned task the paired evidence
    (``tasks``: seeds and sentences resampled; ``unit``: sentences only, seeds fixed), the random-initialisation
    control's, and per fine-tuned model the original rules' unpaired differences."""

    tasks: dict[str, Paired] = field(default_factory=dict)
    unit: dict[str, Paired] = field(default_factory=dict)
    control: Paired | None = None
    control_unit: Paired | None = None
    differences: dict[str, np.ndarray] = field(default_factory=dict)  # task -> (F, P, n, L) d per sentence
    original_last: dict[str, Interval] = field(default_factory=dict)  # model -> last-layer difference
    original_layers: dict[str, list[Interval]] = field(default_factory=dict)  # model -> d_l, l = 1..L
    original_control_last: Interval | None = None
    original_control_layers: list[Interval] | None = None

    @property
    def reference(self) -> tuple[Interval, ...]:
        """The pre-trained reference's rate per layer (the same for every task), () without paired evidence."""
        p = next(iter(self.tasks.values()), None) or self.control
        return p.reference if p is not None else ()

    @property
    def off_ceiling(self) -> tuple[int, ...]:
        """The layers whose reference rate leaves room to change (:attr:`Paired.off_ceiling`)."""
        p = next(iter(self.tasks.values()), None) or self.control
        return p.off_ceiling if p is not None else ()
