"""Controls for C9 to C12 through the chapter's real computation: contributions built so that each claim is
true, false or empty by construction go through the study functions that turn HTA results into estimates
(``studies.context_mixing``: token tables, per-sentence and per-token intervals, window means) and the
verdict assemblers, and the verdict must come out right.

- uniform contributions (every input token 1/d_s): no claim may hold;
- contributions that fall with depth, stay local with long-range growth, keep the own token on top for
  about 70% of hidden tokens, favour content words and starve the special tokens: every claim holds;
- the reversed effects: every claim fails.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from identifiability.base.stats import Interval
from identifiability.evidence.context_mixing import C10Evidence
from identifiability.hta import HTAResult, layer_summary, token_table
from identifiability.recorded import store as recorded
from identifiability.recorded.proportional import sentence_row
from identifiability.studies import context_mixing as study
from identifiability.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_RUN, PARTLY
from identifiability.verdicts.claims import load_claims, robustness_names, rules
from identifiability.verdicts.context_mixing import (
    C11_WINDOWS,
    c9,
    c10,
    c11,
    c12,
    judge_c9,
    judge_c10,
    judge_c11,
    judge_c12,
)

LAYERS = 4
SENTENCES = 30
TAGS = ("NOUN", "DET", "VERB", "ADP", "ADJ", "PRON", "NOUN", "AUX", "ADV", "CCONJ", "NOUN", "DET", "VERB")
RULES = {c["id"]: c for c in load_claims()}


def _rows(c: torch.Tensor, rng: np.random.Generator, noise: float) -> torch.Tensor:
    """``c`` (L+1, n, n) with multiplicative noise per entry, rows renormalised to sum to 1."""
    jitter = torch.from_numpy(1 + noise * rng.uniform(-1, 1, size=c.shape))
    c = c * jitter
    return c / c.sum(-1, keepdim=True)


def _sentences(
    make, seed: int = 0, noise: float = 0.2, lengths: tuple[int, int] = (12, 20)
) -> tuple[list[HTAResult], list[list[str]]]:
    """SENTENCES synthetic sentences of ``lengths`` tokens, [CLS] and [SEP] at the ends: layer l of sentence k
    is ``make(l, n, tags, rng)`` ((n, n) contributions before noise), as HTA results (S = c², so that the
    results' c is the given one) with their POS tags."""
    rng = np.random.default_rng(seed)
    results, tags = [], []
    for _ in range(SENTENCES):
        n = int(rng.integers(lengths[0], lengths[1] + 1))
        tag = ["[CLS]", *[TAGS[i % len(TAGS)] for i in range(n - 2)], "[SEP]"]
        eye = torch.eye(n, dtype=torch.float64)
        c = torch.stack([eye] + [make(layer, n, tag, rng) for layer in range(1, LAYERS + 1)])
        c = torch.cat([c[:1], _rows(c[1:], rng, noise)])
        special = [True] + [False] * (n - 2) + [True]
        results.append(HTAResult("x", [f"t{i}" for i in range(n)], c**2, "synthetic", special=special))
        tags.append(tag)
    return results, tags


def _corpus(results: list[HTAResult], tags: list[list[str]]) -> study.CorpusHTA:
    """The CorpusHTA the chapter's corpus_hta would assemble from these results (one corpus, "syn")."""
    table = token_table(results, tags)
    return study.CorpusHTA(
        corpus_mode="exact",
        corpus_sentences={"syn": len(results)},
        corpus_tokens={"syn": sum(r.n_tokens for r in results)},
        corpus_seconds=0.0,
        layer_summary={},
        main="syn",
        results={"syn": results},
        tables={"syn": table},
        summaries={"syn": layer_summary(table)},
    )


def _recorded(results: list[HTAResult]) -> recorded.Recorded:
    """The recorded run ``record-c10`` would write for these results, each drawn once (corpus index k)."""
    rows = {str(k): {"text": r.text, **sentence_row(r)} for k, r in enumerate(results)}
    res = {
        "seed": 0,
        "draws": list(range(len(results))),
        "sentences": rows,
        "eligible": {"max_tokens": 20, "covered": 0.9},
    }
    prov = {"date": "2026-12-03T10:00:00+00:00", "seconds": 7200.0, "target": "record-c10", "claims": ["C10"]}
    return recorded.Recorded("c10", "m/c", res, prov)


def _live(results: list[HTAResult]) -> study.LiveSample:
    return study.LiveSample(1, 8, 0, 20, 0.9, ["x"], [0], [results[0].n_tokens])


def _uniform(layer: int, n: int, tag, rng) -> torch.Tensor:
    return torch.full((n, n), 1.0 / n, dtype=torch.float64)


# --------------------------------------------------------------------------------------------------
# C9: the own share falls with depth
# --------------------------------------------------------------------------------------------------


def _own_share(shares):
    def make(layer: int, n: int, tag, rng) -> torch.Tensor:
        a = shares[layer - 1] + rng.uniform(-0.02, 0.02)
        eye = torch.eye(n, dtype=torch.float64)
        return a * eye + (1 - a) / (n - 1) * (1 - eye)

    return make


def _c9(make) -> object:
    results, tags = _sentences(make)
    return c9(study.own_share(_corpus(results, tags), seed=0).evidence, rules("C9"))


def test_c9_holds_when_the_own_share_falls_at_every_layer():
    v = _c9(_own_share([0.8, 0.6, 0.45, 0.3]))
    assert v.verdict == HOLDS and v.estimate < 0
    assert dict(v.robustness) == {"threshold": HOLDS, "unit": HOLDS}


def test_c9_does_not_hold_under_uniform_mixing():
    v = _c9(_uniform)
    assert v.verdict not in (HOLDS, PARTLY)
    assert all(label not in (HOLDS, PARTLY) for _, label in v.robustness)


def test_c9_fails_when_the_own_share_rises():
    v = _c9(_own_share([0.3, 0.45, 0.6, 0.8]))
    assert v.verdict == FAILS and v.estimate > 0


def test_c9_is_partly_true_when_one_step_rises():
    v = _c9(_own_share([0.8, 0.5, 0.6, 0.3]))  # down overall, up from layer 2 to 3
    assert v.verdict == PARTLY and "layer 3" in v.parts[1].reason


def test_c9_is_inconclusive_when_a_step_stays_open_and_the_decrease_holds():
    """Version 2: the own share falls overall but stays level from layer 2 to 3 (a step whose interval
    contains 0): 'monotonically' is undecided, so C9 is inconclusive, not partly, and says how many
    sentences would settle it."""
    v = _c9(_own_share([0.8, 0.6, 0.6, 0.3]))
    assert v.parts[0].verdict == HOLDS and v.parts[1].verdict == INCONCLUSIVE
    assert v.verdict == INCONCLUSIVE and "layer 3" in v.parts[1].reason
    assert "would settle" in v.parts[1].reason or "would not settle" in v.parts[1].reason


C9_DOWN, C9_UP, C9_OPEN = Interval(-0.1, -0.12, -0.08, 30), Interval(0.1, 0.08, 0.12, 30), Interval(0, -0.02, 0.02, 30)


@pytest.mark.parametrize(
    "steps, decrease, expected",
    [
        ([C9_DOWN, C9_DOWN], C9_DOWN, HOLDS),  # both parts hold
        ([C9_DOWN, C9_UP], C9_DOWN, PARTLY),  # the decrease holds, a step lies above 0
        ([C9_DOWN, C9_OPEN], C9_DOWN, INCONCLUSIVE),  # the decrease holds, a step stays open
        ([C9_OPEN, C9_UP], C9_DOWN, PARTLY),  # a step above 0 fails the monotone part though another is open
        ([C9_DOWN, C9_DOWN], C9_UP, FAILS),  # the decrease fails, the steps do not matter
        ([C9_OPEN, C9_OPEN], C9_UP, FAILS),
        ([C9_UP, C9_UP], C9_UP, FAILS),
        ([C9_DOWN, C9_DOWN], C9_OPEN, INCONCLUSIVE),  # the decrease open
        ([C9_UP, C9_DOWN], C9_OPEN, INCONCLUSIVE),  # the decrease open, the monotone part fails
    ],
)
def test_c9_decides_every_case_its_rule_states(steps, decrease, expected):
    """C9 version 2's combination, case by case, through the judge the entry point calls."""
    assert judge_c9(steps, decrease, 0.05, RULES["C9"]["rule"]).verdict == expected


# --------------------------------------------------------------------------------------------------
# C10: the own token stays on top for about 70% of hidden tokens
# --------------------------------------------------------------------------------------------------


def _on_top(rate: float):
    """The last layer keeps the own token on top with probability ``rate`` per hidden token (own 0.3, the
    rest spread evenly); otherwise another token takes 0.3 and the own one 0.05. Earlier layers keep it."""

    def make(layer: int, n: int, tag, rng) -> torch.Tensor:
        eye = torch.eye(n, dtype=torch.float64)
        if layer < LAYERS:
            return 0.6 * eye + 0.4 / (n - 1) * (1 - eye)
        c = torch.zeros(n, n, dtype=torch.float64)
        for i in range(n):
            if rng.uniform() < rate:
                c[i] = 0.7 / (n - 1)
                c[i, i] = 0.3
            else:
                rival = (i + int(rng.integers(1, n))) % n
                c[i] = 0.65 / (n - 2)
                c[i, i], c[i, rival] = 0.05, 0.3
        return c

    return make


def _c10(make, run: bool = True) -> object:
    """C10 through the chapter's real path: the recorded run's per-sentence numbers (``sentence_row`` of
    each sentence's HTA, as ``record-c10`` records them) rebuilt into evidence by ``top_contributor``;
    ``run=False``: no recorded run."""
    drawn, tags = _sentences(make, seed=0, noise=0.05)
    original, _ = _sentences(make, seed=1, noise=0.05)
    rec = _recorded(drawn) if run else None
    top = study.top_contributor(_corpus(drawn, tags), rec, _live(drawn), drawn[:1], original, 0, "make record-c10")
    return c10(top.evidence, rules("C10"))


def test_c10_holds_when_about_70_percent_keep_the_top_place():
    v = _c10(_on_top(0.7))
    assert v.verdict == HOLDS and 0.6 < v.estimate < 0.8
    assert v.original.verdict == HOLDS and dict(v.robustness)["band wide"] == HOLDS


def test_c10_fails_under_uniform_mixing():
    """Every input token ties: the own token is on top only where the argmax picks it first (position 0)."""
    v = _c10(_uniform)
    assert v.verdict == FAILS and v.estimate < 0.2 and v.original.verdict == FAILS


@pytest.mark.parametrize("rate", [0.1, 0.98])
def test_c10_fails_when_the_own_token_rarely_or_almost_always_stays_on_top(rate):
    v = _c10(_on_top(rate))
    assert v.verdict == FAILS and all(label == FAILS for _, label in v.robustness)


def test_c10_is_inconclusive_when_the_interval_straddles_a_bound():
    v = _c10(_on_top(0.55))
    assert v.verdict == INCONCLUSIVE and v.ci95[0] < 0.55 < v.ci95[1]


def test_c10_is_not_run_without_a_recorded_run_whatever_the_live_sentences_say():
    """The live sentences keep the own token on top for about 70%, which would hold; without a recorded
    run the verdict is 'not run in this build', naming the command, every alternative too, and the original
    rule's verdict on the short exact sentences stays live."""
    v = _c10(_on_top(0.7), run=False)
    assert v.verdict == NOT_RUN and v.estimate is None and "`make record-c10` computes it" in v.reason
    assert [label for _, label in v.robustness] == [NOT_RUN] * 3
    assert v.original.verdict == HOLDS


def test_c10_band_alternatives_move_with_the_band():
    """An interval around 0.6: inside the rule's and the wide band, across the narrow band's lower bound."""
    x = Interval(0.6, 0.585, 0.615, 40)
    e = C10Evidence(x, x, None, 0.05, 0.05, "a sample", x, 0.05)
    v = c10(e, rules("C10"))
    assert v.verdict == HOLDS
    assert dict(v.robustness) == {"band wide": HOLDS, "band narrow": INCONCLUSIVE, "words only": HOLDS}
    assert "special tokens none" in v.reason


# --------------------------------------------------------------------------------------------------
# C11: near tokens outweigh far ones, far ones grow with depth
# --------------------------------------------------------------------------------------------------


def _by_distance(weight):
    def make(layer: int, n: int, tag, rng) -> torch.Tensor:
        at = torch.arange(n, dtype=torch.float64)
        c = weight(layer, (at[None, :] - at[:, None]).abs())
        return c / c.sum(-1, keepdim=True)

    return make


def _c11(make, lengths: tuple[int, int] = (12, 20)) -> object:
    results, tags = _sentences(make, lengths=lengths)
    loc = study.context_locality(_corpus(results, tags), max_offset=10, seed=0, windows=C11_WINDOWS)
    return c11(loc.evidence, rules("C11"))


def test_c11_holds_when_mixing_is_local_and_widens_with_depth():
    v = _c11(_by_distance(lambda layer, dist: torch.exp(-dist / (0.5 + layer))))
    assert v.verdict == HOLDS and v.estimate > 0
    assert dict(v.robustness) == {"distances": HOLDS, "unit": HOLDS}
    assert v.original.verdict == HOLDS


def test_c11_does_not_hold_under_uniform_mixing():
    v = _c11(_uniform)
    assert v.verdict not in (HOLDS, PARTLY) and v.baseline == 0.0
    assert all(label not in (HOLDS, PARTLY) for _, label in v.robustness)


def test_c11_fails_when_far_tokens_dominate_and_shrink_with_depth():
    v = _c11(_by_distance(lambda layer, dist: (1 + dist) ** (2.5 - 0.5 * layer)))
    assert v.verdict == FAILS and v.estimate < 0
    assert dict(v.robustness) == {"distances": FAILS, "unit": FAILS}


def _thinning_own(shares, weight):
    """Layer l keeps ``shares[l - 1]`` of the own token and gives the rest to the other tokens in the fixed
    proportions ``weight(distance)``: the own share thins while the context keeps its distance profile."""

    def make(layer: int, n: int, tag, rng) -> torch.Tensor:
        at = torch.arange(n, dtype=torch.float64)
        eye = torch.eye(n, dtype=torch.float64)
        w = weight((at[None, :] - at[:, None]).abs()) * (1 - eye)
        return shares[layer - 1] * eye + (1 - shares[layer - 1]) * w / w.sum(-1, keepdim=True)

    return make


def test_c11_long_range_does_not_hold_when_only_the_own_share_thins():
    """Control (a): the other tokens' contributions are scaled by one factor per layer, so every far token
    gains (version 3's far per-token mean grows, its interval above 0) while the context's distance profile
    stays the same: the far share of the context does not grow, and the long-range part must not hold."""
    results, tags = _sentences(_thinning_own([0.8, 0.6, 0.45, 0.3], lambda d: torch.exp(-d / 3)))
    e = study.context_locality(_corpus(results, tags), 10, 0, C11_WINDOWS).evidence
    v = c11(e, rules("C11"))
    assert e.far_growth.low > 0 and e.dilution_growth.low > 0  # what version 3 read as growth
    assert v.parts[0].verdict == HOLDS and v.parts[1].verdict != HOLDS and v.verdict != HOLDS
    assert abs(v.estimate) < 0.01 and "dilution of the own token alone predicts" in v.reason
    assert dict(v.robustness)["distances"] != HOLDS and dict(v.robustness)["unit"] != HOLDS


def test_c11_long_range_holds_when_the_context_widens():
    """Control (b): the own share stays 0.4 and the context spreads farther with depth (far tokens take more
    of it at the last layer): the far share grows, the long-range part holds, and so does C11; dilution
    predicts nothing, so the far per-token mean's growth is all excess."""

    def widening(layer: int, n: int, tag, rng) -> torch.Tensor:
        return _thinning_own([0.4] * LAYERS, lambda d: torch.exp(-d / (0.5 + layer)))(layer, n, tag, rng)

    results, tags = _sentences(widening)
    e = study.context_locality(_corpus(results, tags), 10, 0, C11_WINDOWS).evidence
    v = c11(e, rules("C11"))
    assert v.parts[1].verdict == HOLDS and v.verdict == HOLDS and v.estimate > 0
    assert abs(e.dilution_growth.estimate) < 0.002 and e.far_growth_minus_dilution.low > 0


def test_c11_is_partly_true_when_mixing_stays_local_and_narrows():
    """Near tokens outweigh far ones in every layer, but the context narrows with depth: one part holds,
    the other fails."""
    v = _c11(_by_distance(lambda layer, dist: torch.exp(-dist / (4.5 - layer))))
    assert [p.verdict for p in v.parts] == [HOLDS, FAILS] and v.verdict == PARTLY


C11_UP, C11_DOWN, C11_OPEN = Interval(0.1, 0.05, 0.15, 30), Interval(-0.1, -0.15, -0.05, 30), Interval(0, -0.1, 0.1, 30)


@pytest.mark.parametrize(
    "local, growth, expected",
    [
        (C11_UP, C11_UP, HOLDS),
        (C11_DOWN, C11_DOWN, FAILS),
        (C11_UP, C11_DOWN, PARTLY),
        (C11_DOWN, C11_UP, PARTLY),
        (C11_OPEN, C11_UP, INCONCLUSIVE),
        (C11_UP, C11_OPEN, INCONCLUSIVE),
        (C11_DOWN, C11_OPEN, INCONCLUSIVE),
        (C11_OPEN, C11_DOWN, INCONCLUSIVE),
    ],
)
def test_c11_decides_every_case_its_rule_states(local, growth, expected):
    """C11 version 4's combination: both hold, both fail, one of each (partly), either open (inconclusive)."""
    v = judge_c11([C11_UP, local, C11_UP], growth, RULES["C11"]["rule"])
    assert v.verdict == expected and v.baseline == 0.0 and v.estimate == growth.estimate


def test_c11_is_judged_only_on_evidence_measured_at_its_windows():
    """The study measures at the windows the chapter passes it; C11's entry point refuses others."""
    results, tags = _sentences(_uniform, lengths=(12, 20))
    other = (C11_WINDOWS[1], C11_WINDOWS[0])
    loc = study.context_locality(_corpus(results, tags), max_offset=10, seed=0, windows=other)
    assert loc.evidence.windows == other and f"within_{other[0][0]}" in loc.tables[next(iter(loc.tables))]
    with pytest.raises(ValueError, match="windows"):
        c11(loc.evidence, rules("C11"))


def test_c11_window_sums_and_per_token_means_can_disagree():
    """Uniform mixing in sentences of 40 to 60 tokens: per-token means tie (the amended rule cannot hold),
    while the far window's sum beats the near one's (the original rule's local part fails by window size
    alone)."""
    v = _c11(_uniform, lengths=(40, 60))
    assert v.parts[0].verdict != HOLDS
    assert v.original.parts[0].verdict == FAILS


def test_c11_an_open_layer_says_how_many_sentences_would_settle_it():
    clear, unclear = Interval(0.02, 0.01, 0.03, 40), Interval(0.004, -0.002, 0.01, 40)
    v = judge_c11([clear, unclear, unclear], clear, RULES["C11"]["rule"])
    local = v.parts[0]
    assert local.verdict == INCONCLUSIVE and v.verdict == INCONCLUSIVE
    assert "layers 2 and 3" in local.reason and "[" not in local.reason
    assert "about 90 sentences instead of 40 would settle them" in local.reason
    tokens = judge_c11([clear, unclear], clear, RULES["C11"]["rule"], unit="tokens").parts[0]
    assert "layer 2" in tokens.reason and "tokens instead of 40 would settle it" in tokens.reason


# --------------------------------------------------------------------------------------------------
# C12: special tokens gather context, content words keep more of themselves
# --------------------------------------------------------------------------------------------------


def _own_by_kind(special: float, content: float, function: float):
    """The last layer: each hidden token keeps its kind's own share (0.35 for other words), the rest spread."""

    def make(layer: int, n: int, tag, rng) -> torch.Tensor:
        eye = torch.eye(n, dtype=torch.float64)
        if layer < LAYERS:
            return 0.5 * eye + 0.5 / (n - 1) * (1 - eye)
        own = [
            special
            if t.startswith("[")
            else content
            if t in ("NOUN", "VERB", "ADJ", "ADV")
            else function
            if t in ("DET", "ADP", "PRON", "CCONJ", "AUX")
            else 0.35
            for t in tag
        ]
        a = torch.tensor(own, dtype=torch.float64) + torch.from_numpy(rng.uniform(-0.03, 0.03, n))
        return a[:, None] * eye + ((1 - a) / (n - 1))[:, None] * (1 - eye)

    return make


def _c12(make, tiny_lm) -> object:
    results, tags = _sentences(make, noise=0.05)
    corpus = _corpus(results, tags)
    own = study.own_share(corpus, seed=0)
    special = study.special_tokens(tiny_lm, corpus, seed=0)
    pos = study.parts_of_speech(corpus, seed=0)
    return c12(study.c12_evidence(special, pos, own.uniform), rules("C12"))


def test_c12_holds_when_special_tokens_gather_and_content_words_keep(tiny_lm):
    v = _c12(_own_by_kind(special=0.1, content=0.6, function=0.3), tiny_lm)
    assert v.verdict == HOLDS and v.estimate < 0
    assert dict(v.robustness) == {"content without ADV": HOLDS, "unit": HOLDS}


def test_c12_does_not_hold_under_uniform_mixing(tiny_lm):
    v = _c12(_uniform, tiny_lm)
    assert v.verdict not in (HOLDS, PARTLY)


def test_c12_fails_when_the_effects_are_reversed(tiny_lm):
    v = _c12(_own_by_kind(special=0.6, content=0.2, function=0.5), tiny_lm)
    assert v.verdict == FAILS and v.estimate > 0
    assert dict(v.robustness) == {"content without ADV": FAILS, "unit": FAILS}


def test_c12_with_one_sentence_of_special_tokens_says_too_few_to_resample():
    """One sentence with special tokens is an estimate without an interval: inconclusive, and not the
    tokenizer's fault."""
    one = Interval(-0.2, float("nan"), float("nan"), 1)
    v = judge_c12(one, Interval(0.1, 0.05, 0.15, 20), 0.05, RULES["C12"]["rule"])
    special = v.parts[0]
    assert special.verdict == INCONCLUSIVE and "too few to resample" in special.reason
    assert "tokenizer" not in special.reason and v.verdict == INCONCLUSIVE
    none = judge_c12(None, Interval(0.1, 0.05, 0.15, 20), 0.05, RULES["C12"]["rule"])
    assert none.verdict == HOLDS and none.label == "holds (content words keep more part only)"
    assert "adds no special tokens" in none.parts[0].reason


# --------------------------------------------------------------------------------------------------
# the alternatives are the claims table's, by name and order, and move thresholds as stated
# --------------------------------------------------------------------------------------------------


def test_every_verdict_carries_exactly_the_claims_tables_alternatives(tiny_lm):
    verdicts = {
        "C9": _c9(_own_share([0.8, 0.6, 0.45, 0.3])),
        "C10": _c10(_on_top(0.7)),
        "C11": _c11(_by_distance(lambda layer, dist: torch.exp(-dist / (0.5 + layer)))),
        "C12": _c12(_own_by_kind(0.1, 0.6, 0.3), tiny_lm),
    }
    for claim, v in verdicts.items():
        assert [name for name, _ in v.robustness] == robustness_names(RULES[claim])
        assert (v.original is not None) == (RULES[claim]["amendment"] is not None)


def test_c9_threshold_alternative_counts_a_flat_step_as_falling():
    """A step whose interval lies just above 0 but below +0.005 fails the rule and falls under 'threshold'."""
    drop, flat = Interval(-0.1, -0.12, -0.08, 30), Interval(0.002, 0.001, 0.003, 30)
    rule = RULES["C9"]["rule"]
    assert judge_c9([drop, flat], drop, 0.05, rule).parts[1].verdict == FAILS
    assert judge_c9([drop, flat], drop, 0.05, rule, step_below=0.005).verdict == HOLDS


def test_c10_judge_band_edges():
    rule = RULES["C10"]["rule"]
    assert judge_c10(Interval(0.7, 0.6, 0.8, 20), 0.05, rule).verdict == HOLDS
    assert judge_c10(Interval(0.5, 0.45, 0.54, 20), 0.05, rule).verdict == FAILS
    assert judge_c10(Interval(0.9, 0.86, 0.95, 20), 0.05, rule).verdict == FAILS
    straddle = judge_c10(Interval(0.56, 0.5, 0.62, 20), 0.05, rule)
    assert straddle.verdict == INCONCLUSIVE and "units instead of 20 would settle it" in straddle.reason
    assert judge_c10(Interval(0.58, 0.5, 0.62, 20), 0.05, rule, low=0.45).verdict == HOLDS
    assert judge_c10(Interval(0.7, float("nan"), float("nan"), 1), 0.05, rule).verdict == INCONCLUSIVE
