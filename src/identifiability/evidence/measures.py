"""What C22-C27 read (chapter 10, which measure to trust): every measure's agreement with each reference at
every layer, built by :mod:`identifiability.studies.measures` from per-sentence agreements
(:mod:`identifiability.contributions.agreement`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..base.stats import Interval

MAIN, NO_OWN = "main", "own token left out"  # the two variants of the statistic every score carries
ROLLED = "@rolled"  # a per-layer measure rolled out across layers: '<name>@rolled'


@dataclass(frozen=True)
class LayerScore:
    """One measure's agreement with one reference at one layer, over the scored sentences.

    Attributes:
        measure: the scored measure's key: a registry name, ``<name>@rolled`` for a per-layer measure rolled
            out across layers, or ``hta`` (exact HTA, scored against the intervention).
        reference: ``hta``, ``intervention`` (the mean input embedding) or ``intervention_mask`` ([MASK]).
        layer: 1..L.
        variant: :data:`MAIN` or :data:`NO_OWN` (each row's own token left out before the correlation).
        statistic: mean over sentences of the median per-row Spearman correlation, with its interval.
        shuffled: the same for the measure's rows shuffled among the sentence's hidden tokens (first null).
        distance: the same for the distance-only baseline (second null).
        minus_shuffled: paired per-sentence difference statistic minus the shuffled null.
        minus_distance: paired per-sentence difference statistic minus the distance-only baseline.
        minus_raw: paired per-sentence difference statistic minus raw attention's (as it is) against the same
            reference (C23); None where not computed.
        top1: mean share of hidden tokens whose largest contributor agrees (reported, not judged).
        top3: mean top-3 overlap (reported, not judged).
        stronger: the stronger null: per sentence the larger of the two nulls' statistics, its mean over
            sentences with an interval (C22 version 2); None in a run recorded before it.
        minus_stronger: paired per-sentence difference statistic minus the stronger null, which 'tracks' compares
            with the margin (C22 version 2); None in a run recorded before it.
        minus_others: ((other measure, paired per-sentence difference statistic minus the other's against the
            same reference at this layer), ...) for the ranking; each pair once, in the row of the measure whose
            key sorts first (:meth:`MeasuresEvidence.difference` reads either way); variant :data:`MAIN` only.
    """

    measure: str
    reference: str
    layer: int
    variant: str
    statistic: Interval
    shuffled: Interval
    distance: Interval
    minus_shuffled: Interval
    minus_distance: Interval
    minus_raw: Interval | None = None
    top1: float = float("nan")
    top3: float = float("nan")
    stronger: Interval | None = None
    minus_stronger: Interval | None = None
    minus_others: tuple[tuple[str, Interval], ...] = ()


@dataclass(frozen=True)
class MeasuresEvidence:
    """Every score of one run, and what bounds the verdicts.

    Attributes:
        scores: every (measure, reference, layer, variant) scored.
        n_sentences: sentences scored (the rules need at least ``MEASURES_MIN_SENTENCES``).
        n_layers: L.
        unsupported: {measure: why} for measures this model's architecture does not support (named in the
            verdict, which is then not testable).
        recorded: where the scores come from when they are a recorded run's ('' for this build's own).
        names: (key, the reader's name) of each measure and reference scored ('norm_resln@rolled', 'Norm +
            residual + LN (rolled out)'): a verdict's reason says the name, never the key.
    """

    scores: tuple[LayerScore, ...]
    n_sentences: int
    n_layers: int
    unsupported: tuple[tuple[str, str], ...] = ()
    recorded: str = ""
    names: tuple[tuple[str, str], ...] = ()

    def name(self, key: str) -> str:
        """The reader's name of a measure or reference key (the key itself where none was given)."""
        return dict(self.names).get(key, key)

    def of(self, measure: str, reference: str = "hta", variant: str = MAIN) -> dict[int, LayerScore]:
        """{layer: score} of one measure against one reference (empty when not scored)."""
        return {
            s.layer: s
            for s in self.scores
            if s.measure == measure and s.reference == reference and s.variant == variant
        }

    def difference(self, measure: str, other: str, reference: str, layer: int) -> Interval | None:
        """The paired difference ``measure`` minus ``other`` against ``reference`` at ``layer`` (variant
        :data:`MAIN`), read from whichever row holds the pair (the reverse pair's interval negated); None where
        the pair was not computed (a run recorded before the ranking)."""
        if measure == other:
            return Interval(0.0, 0.0, 0.0)
        for a, b, sign in ((measure, other, 1.0), (other, measure, -1.0)):
            s = self.of(a, reference).get(layer)
            d = None if s is None else dict(s.minus_others).get(b)
            if d is not None:
                lo, hi = sorted((sign * d.low, sign * d.high))
                return Interval(sign * d.estimate, lo, hi, d.n, d.unit)
        return None

    def top_group(self, reference: str, layer: int) -> tuple[str, ...] | None:
        """The measures scored against ``reference`` at ``layer`` (variant :data:`MAIN`) that the scored sentences
        do not tell apart from the best: the one with the highest mean statistic, then every measure whose
        paired difference from it has an interval that does not lie below 0, highest first. None where a
        pair's difference is missing (a run recorded before the ranking); () with no score."""
        here = (reference, layer, MAIN)
        scores = {s.measure: s for s in self.scores if (s.reference, s.layer, s.variant) == here}
        if not scores:
            return ()
        ranked = sorted(scores, key=lambda m: -scores[m].statistic.estimate)
        best, group = ranked[0], [ranked[0]]
        for m in ranked[1:]:
            d = self.difference(m, best, reference, layer)
            if d is None:
                return None
            if not d.high < 0:  # NaN bounds (too few sentences) never set a measure apart
                group.append(m)
        return tuple(group)
