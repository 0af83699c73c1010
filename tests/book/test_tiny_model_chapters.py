"""The chapters that judge claims run end to end on a tiny random-weight model (another depth, width and head
size than the embedded one): every claim gets a verdict with all of its fields, each verdict agrees with the
interval it records, and what holds by construction on any model with generic (random) weights holds in the
chapter's results: rank-nullity, A_eff = A up to d_v, row-stochastic alternatives with A's output, raw
attention rows summing to one, own-token shares never above the top contributor's."""

from __future__ import annotations

import pytest

from identifiability.chapters.contract import by_name
from identifiability.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE
from identifiability.verdicts.claims import load_claims

from .background import chapter

TINY_SEED = 3


@pytest.fixture(scope="module")
def tiny_folder(tiny_model_folder):
    return tiny_model_folder(TINY_SEED)


def _verdicts_agree_with_their_intervals(claims: dict) -> int:
    """A verdict (or part of one) judged against a threshold: an interval across the threshold leaves it
    inconclusive, one wholly on one side decides a part (a claim with a band, C6 or C10, may still be
    inconclusive across its other edge), and no interval decides nothing. Returns how many were judged
    against a threshold."""
    judged = 0
    for v in claims.values():
        for x in (v, *v["parts"]):
            if x.get("threshold") is None or x["ci95"] is None:
                continue
            judged += 1
            t, (lo, hi) = x["threshold"], x["ci95"]
            if lo is None or hi is None:  # NaN bounds: too few units to resample
                assert x["verdict"] in (INCONCLUSIVE, NOT_TESTABLE), x
            elif lo < t < hi:
                assert x["verdict"] == INCONCLUSIVE, x
            elif "." in x["claim"]:  # a part: one interval against one threshold
                assert x["verdict"] in (HOLDS, FAILS), x
    return judged


def _nonidentifiability(out: dict) -> None:
    r = out["results"]
    d_v = r["d_v"]
    # rank-nullity: dim LN(T) >= d_s - d_v always; a generic T has full rank, so dim LN([T,1]) = d_s - d_v - 1
    assert r["rank_nullity_violations"] == 0 and r["survey_max_ds"] > d_v + 1
    assert r["share_rank_T_full"] == r["share_LN_T1_at_bound"] == 1.0
    assert r["example_dim_LN_T1"] == r["example_ds"] - d_v - 1 > 0
    # the alternatives built from that null space are attention matrices with A's output, and differ from A
    for alt in (r["construct"], r["lp"]):
        assert alt["row_sum_max_error"] < 1e-12 and alt["min_entry"] > -1e-12 and alt["rel_output_error"] < 1e-10
        assert alt["tv_mean"] > 1e-3
    # at d_s = d_v + 1 a generic head has none: A is the only row-stochastic matrix with its output
    assert r["threshold_ds"] == d_v + 1 and r["threshold_unique_heads"] == r["threshold_heads"] > 0
    assert r["threshold_lp_tv_max"] < 1e-9
    assert r["search_error_max"] < 1e-9  # realisable alternatives found beyond it keep the output too


def _effective_attention(out: dict) -> None:
    r = out["results"]
    d_v = r["d_v"]
    # up to d_v tokens a random head's T has full row rank: no null space, A_eff = A
    assert min(r["fig1_lengths"]) <= d_v < max(r["fig1_lengths"])
    assert r["heads_at_or_below_dv"] > 0 and r["null_heads_at_or_below_dv"] == 0
    assert r["pearson_min_below_dv"] > 1 - 1e-9
    # every W_O^h has full rank, so beyond d_v the null space has exactly d_s - d_v dimensions
    assert r["wo_rank_min"] == d_v and r["wo_deficient_heads"] == 0
    assert r["null_dim_equals_ds_minus_dv"] == 1.0 and r["null_dim_exceeds_ds_minus_dv"] == 0
    # raw attention rows sum to one, so the token categories' raw mass does, in every layer (rounded to 1e-4)
    raw = [m["raw"] for m in r["mass_by_layer"].values()]
    assert len(raw) == len(r["mass_categories"]) and all(abs(sum(layer) - 1) < 1e-3 for layer in zip(*raw))


def _context_mixing(out: dict) -> None:
    r = out["results"]
    assert r["exact_sentences"] > 0
    for corpus, s in r["layer_summary"].items():
        # every hidden token counted at every layer; the own share is never above the top contributor's
        assert set(s["tokens"]) == {r["corpus_tokens"][corpus]}
        assert all(own <= top for own, top in zip(s["own_median"], s["top_median"]))
        quantiles = zip(*(s[k] for k in ("own_p05", "own_q1", "own_median", "own_q3", "own_p95")))
        assert all(list(q) == sorted(q) for q in quantiles)
        assert all(0 <= p <= 100 for p in s["top_is_self_pct"])
    main = r["layer_summary"][out["corpus"]["name"]]
    assert r["own_median_first"] == pytest.approx(main["own_median"][0], abs=1e-5)
    assert r["own_median_last"] == pytest.approx(main["own_median"][-1], abs=1e-5)


BY_CONSTRUCTION = {
    "nonidentifiability": _nonidentifiability,
    "effective_attention": _effective_attention,
    "context_mixing": _context_mixing,
}
BACKGROUND = tuple(chapter(name, TINY_SEED) for name in BY_CONSTRUCTION)


@pytest.mark.parametrize("name", list(BY_CONSTRUCTION))
def test_chapter_judges_its_claims_on_a_tiny_random_model(name, tiny_folder, background):
    out = background.chapter(name, TINY_SEED)  # with its quick parameters
    assert out["provenance"]["content_key"] and out["params"]["model"] == str(tiny_folder)
    r = out["results"]
    claims = r["claims"]
    expected = {c["id"] for c in load_claims() if c["chapter"] == by_name(name).stem}
    assert set(claims) == expected
    for v in claims.values():
        assert v["rule"] and v["reason"]
        assert {"estimate", "ci95", "baseline", "baseline_note", "parts"} <= set(v)
        assert v["baseline"] is not None or v["baseline_note"]  # a missing baseline says why none applies
    judged = _verdicts_agree_with_their_intervals(claims)
    assert judged > 0 or name == "nonidentifiability"  # chapter 2 counts exactly: no intervals
    BY_CONSTRUCTION[name](out)
