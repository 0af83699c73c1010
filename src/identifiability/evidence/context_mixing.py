"""What C9 to C12 read (chapter 6, context mixing), built by :mod:`identifiability.studies.context_mixing`."""

from __future__ import annotations

from dataclasses import dataclass

from ..base.stats import Interval


@dataclass(frozen=True)
class C9Evidence:
    """What C9's rule reads, built by ``studies.context_mixing.own_share``.

    Attributes:
        steps: (L-1,) per step l -> l+1 (l = 1..L-1), the change of the median own-token share, per sentence
            (its median over the sentence's hidden tokens), mean and interval over sentences.
        last_minus_first: layer L minus layer 1, the same way.
        steps_by_tokens, last_minus_first_by_tokens: the same changes per hidden token, mean and interval
            over hidden tokens (robustness 'unit').
        uniform: the own share under uniform mixing, 1/d_s averaged over the hidden tokens.
    """

    steps: tuple[Interval, ...]
    last_minus_first: Interval
    steps_by_tokens: tuple[Interval, ...]
    last_minus_first_by_tokens: Interval
    uniform: float


@dataclass(frozen=True)
class C10Evidence:
    """What C10's rules read, built by ``studies.context_mixing.top_contributor`` from exact HTA.

    Attributes:
        share: the mean over the recorded run's drawn sentences (drawn in proportion to their hidden tokens,
            :mod:`identifiability.recorded.proportional`) of each sentence's share of hidden tokens whose largest
            contributor at the last layer is their own input token; interval over the draws. None: no
            recorded run for this model and corpus (``not_run`` names the command that computes it).
        words, special: the same over each sentence's word tokens and special tokens only, over the draws
            that have them (special None when the tokenizer adds none).
        chance, word_chance: 1/d_s averaged the same way (the own token on top by chance).
        sample: what the sample is, for the reason (its numbers and the run's caption), or why there is none.
        original: the original rule's share on its sample (the chapter's short exact sentences), pooled.
        original_chance: ``chance`` there.
        not_run: the command that computes the recorded run, when there is none ("" otherwise).
    """

    share: Interval | None
    words: Interval | None
    special: Interval | None
    chance: float | None
    word_chance: float | None
    sample: str
    original: Interval
    original_chance: float
    not_run: str = ""


@dataclass(frozen=True)
class C11Evidence:
    """What C11's rules read, built by ``studies.context_mixing.context_locality`` at the windows the chapter
    passes it (the rule's, ``verdicts.context_mixing.C11_WINDOWS``).

    Attributes:
        windows: ((near, far), (near_alt, far_alt)): near is distances 1..near, far beyond far; the rule's
            windows, then the 'distances' alternative's.
        near_minus_far: (L,) per layer: the mean contribution of one input token within the near window minus
            that of one in the far window, per hidden token, averaged per sentence; interval over sentences.
        far_share_growth: the far share of the context, f = (sum of c_ij over the far window) / (1 - c_ii), at
            layer L minus layer 1, per hidden token, averaged per sentence; interval over sentences (version
            4's long-range part).
        near_minus_far_alt, far_share_growth_alt: the same at the alternative's windows (robustness
            'distances').
        near_minus_far_by_tokens, far_share_growth_by_tokens: the same per hidden token, interval over hidden
            tokens (robustness 'unit').
        far_growth: version 3's long-range quantity, the far per-token mean at layer L minus layer 1, per
            sentence (reported beside the verdict, not part of it).
        dilution_growth: the growth of the far per-token mean that dilution alone predicts, the own token's
            lost share spread evenly over the other tokens: (c_ii^1 - c_ii^L) / (d_s - 1), the same way.
        far_growth_minus_dilution: the far per-token mean at layer L, observed minus predicted by dilution
            (far mean at 1 + (c_ii^1 - c_ii^L) / (d_s - 1)), the same way.
        original_near_minus_far, original_far_growth: the original rule's quantities, the context share
            summed within the near window minus that in the far window, and the far share's growth.
        position_only: the original rule's baseline, the far share under uniform mixing.
        far_share_uniform: f under uniform mixing over the context, n_far / (d_s - 1), averaged the same way
            (its growth is 0, the baseline of version 4); NaN where no hidden token has a far input token.
    """

    windows: tuple[tuple[int, int], tuple[int, int]]
    near_minus_far: tuple[Interval, ...]
    far_share_growth: Interval
    near_minus_far_alt: tuple[Interval, ...]
    far_share_growth_alt: Interval
    near_minus_far_by_tokens: tuple[Interval, ...]
    far_share_growth_by_tokens: Interval
    far_growth: Interval
    dilution_growth: Interval
    far_growth_minus_dilution: Interval
    original_near_minus_far: tuple[Interval, ...]
    original_far_growth: Interval
    position_only: float
    far_share_uniform: float


@dataclass(frozen=True)
class C12Evidence:
    """What C12's rule reads, built by ``studies.context_mixing.c12_evidence``, at the last layer.

    Attributes:
        special_minus_words: per sentence, the special tokens' mean own share minus the median word token's;
            interval over sentences. None when no sentence has special tokens (the tokenizer adds none).
        content_minus_function: per sentence, content words' (``pos.CONTENT_TAGS``) mean own share minus
            function words' (``pos.FUNCTION_TAGS``); interval over sentences. None when no sentence has both.
        content_minus_function_no_adv: the same without ADV among the content words (robustness).
        special_minus_words_by_tokens, content_minus_function_by_tokens: the same per token, intervals over
            tokens (robustness 'unit').
        uniform: the own share under uniform mixing, 1/d_s averaged over the hidden tokens.
    """

    special_minus_words: Interval | None
    content_minus_function: Interval | None
    content_minus_function_no_adv: Interval | None
    special_minus_words_by_tokens: Interval | None
    content_minus_function_by_tokens: Interval | None
    uniform: float
