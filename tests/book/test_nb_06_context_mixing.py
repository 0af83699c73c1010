"""Chapter 6 runs end to end on the real model with small parameters, and its numbers make sense."""

import json
import re

import numpy as np
import pytest

from identifiability.verdicts import NOT_RUN
from identifiability.verdicts.claims import load_claims, robustness_names

from .background import chapter

BACKGROUND = (chapter("context_mixing"),)


def test_context_mixing_notebook(background):
    """One shared execution per session (a background job with the contract's quick parameters), which the
    book test renders too."""
    out = background.chapter("context_mixing")
    res, params = out["results"], out["params"]
    # the untrained twin ran beside the model: its verdicts apart from the model's, on its own weights
    assert sorted(res["twin_claims"]) == ["C11", "C12", "C9"] and res["twin"]["seed"] == 0
    assert res["twin"]["content_key"] != out["provenance"]["content_key"]
    assert all(res["twin_claims"][c]["rule"] == res["claims"][c]["rule"] for c in res["twin_claims"])
    assert res["method"] == "folded" and res["causal"] is False
    assert res["exact_sentences"] == params["n_exact"] and res["corpus_mode"] == "estimate"
    assert set(res["corpus_sentences"]) == {"lee", "polarity"}
    err = res["estimator_error"]
    # the estimator's error with 16 probes per token as stated (median about 2.5–3.5%), with a margin
    assert 0 < err["median"] < 0.06 and err["median"] <= err["p95"] < 0.2
    assert err["abs_median"] < 0.01 and err["top_agreement"] > 0.9 and abs(err["signed_median"]) < err["median"]
    assert len(err["per_layer_median"]) == 6
    # the probes a 1% median would take, from the 1/sqrt(probes) law the chapter states
    assert res["estimator_probes_for_1pct"] == pytest.approx(
        res["estimator_probes"] * (err["median"] / 0.01) ** 2, abs=1
    )
    summ = res["layer_summary"]["lee"]
    assert summ["layer"] == list(range(1, 7))
    own = summ["own_median"]
    assert all(0 < v < 1 for v in own)
    assert own[-1] < own[0]  # mixing accumulates with depth
    assert all(t >= o for t, o in zip(summ["top_median"], own))  # the top contributor is at least the own token
    assert all(0 <= v <= 100 for v in summ["top_is_self_pct"])
    loc = res["locality"]["lee"]
    assert all(0 <= a <= 1 for a in loc["within_3"])
    # context is more local than uniform mixing would make it, in every layer
    assert all(a > u for a, u in zip(loc["within_3"], loc["uniform_within_3"]))
    src = res["special_sources"]
    assert set(src["source"]) == {"itself", "other special tokens", "words"}
    assert "NOUN" in res["pos_own_median_last"] or "VERB" in res["pos_own_median_last"]
    assert res["exact_seconds_per_sentence"] > res["estimate_seconds_per_sentence"]
    claims = res["claims"]
    for c in ("C9", "C10", "C11", "C12"):
        v = claims[c]
        if c == "C10" and v["verdict"] == "not run in this build":  # no recorded run: test_c10_... below
            continue
        assert v["rule"] and v["reason"] and v["verdict"] in ("holds", "partly holds", "fails", "inconclusive")
        assert v["ci95"][0] <= v["estimate"] <= v["ci95"][1]
    assert claims["C9"]["estimate"] < 0  # the own share falls from the first layer to the last
    assert [p["claim"] for p in claims["C11"]["parts"]] == ["C11.local", "C11.long range grows"]
    assert [p["claim"] for p in claims["C12"]["parts"]] == [
        "C12.special tokens gather context",
        "C12.content words keep more",
    ]
    assert claims["C12"]["parts"][0]["estimate"] < 0  # [CLS]/[SEP] keep less of themselves than words do


def test_c10_is_judged_on_the_recorded_run_or_not_run(background):
    """C10's sample is a recorded run (data/recorded/c10/...): judged on its per-sentence numbers when there is
    one, else 'not run in this build', naming the command, whatever the live sentence says. The live sentence
    is the shortest of the sample's first draws (up to lee's 95th percentile, 49 tokens), exact HTA; where the
    recorded run holds it, its share is the recorded one. The original rule's verdict judges the short exact
    sentences, live."""
    from identifiability.corpus.corpora import drop_unusable, load_corpus, token_lengths
    from identifiability.models.load import load_model
    from identifiability.recorded.proportional import recorded_c10

    res = background.chapter("context_mixing")["results"]
    tok = load_model(None).tokenizer
    lengths = token_lengths(drop_unusable(load_corpus("lee"), tok)[0].sentences, tok)
    assert res["eligible_max_tokens"] == int(np.percentile(lengths, 95)) == 49
    assert 0.85 < res["eligible_covered"] < 0.95 and res["live_sentences"] == 1 and res["live_from"] == 8
    live = res["c10_live"]
    assert len(live["share"]) == 1 and 0 <= live["share"][0] <= 1
    # the estimator's error and exact HTA's cost by the live sentence's length
    assert (
        set(res["estimator_error_by_length"]) == set(res["exact_seconds_by_length"])
        and len(res["exact_seconds_by_length"]) == 1
    )
    v = res["claims"]["C10"]
    assert v["original"]["rule"] != v["rule"] and v["original"]["verdict"] in ("holds", "fails", "inconclusive")
    if recorded_c10(None, "lee") is None:
        assert v["verdict"] == "not run in this build" and v["estimate"] is None and "`make record-c10`" in v["reason"]
        assert res["c10_sample"] is None and res["c10_shares"] is None and live["recorded"] == [None]
        return
    share, sample = res["c10_shares"], res["c10_sample"]
    assert v["estimate"] == pytest.approx(share["all"][0]) and v["ci95"] == pytest.approx(share["all"][1:])
    assert share["special"][0] < share["words"][0] and v["baseline"] < v["estimate"]
    assert sample["distinct"] <= sample["sentences"] and sample["max_tokens"] == 49
    if live["recorded"][0] is not None:  # this build reproduces the recorded per-sentence number
        assert live["share"][0] == pytest.approx(live["recorded"][0], abs=1e-6)
    lo, hi = v["ci95"]
    assert (v["verdict"] == "holds") == (0.55 <= lo and hi <= 0.85)
    assert (v["verdict"] == "fails") == (hi < 0.55 or lo > 0.85)


def test_every_verdict_carries_its_alternatives_and_the_original(background):
    claims = {c["id"]: c for c in load_claims()}
    res = background.chapter("context_mixing")["results"]["claims"]
    for cid in ("C9", "C10", "C11", "C12"):
        v = res[cid]
        assert [name for name, _ in v["robustness"]] == robustness_names(claims[cid])
        assert (v["original"] is not None) == (claims[cid]["amendment"] is not None)
    # C11: the amended quantities are per-token means, so under uniform mixing both differences are 0
    c11 = res["C11"]
    assert c11["baseline"] == 0.0 and "uniform mixing" in c11["baseline_note"]
    for part in c11["parts"]:  # an open part says how many sentences would settle it, never a Python list
        assert "[" not in part["reason"]
        if part["verdict"] == "inconclusive":
            assert re.search(r"about \d+ sentences instead of \d+ would settle", part["reason"])
    # a near token outweighs a far one in the last layer: per-token means, averaged over sentences
    means = background.chapter("context_mixing")["results"]["window_means"]["lee"]
    assert means["near"][-1] > means["far"][-1] > 0
    if res["C10"]["verdict"] != NOT_RUN:  # judged from a recorded run: words and special tokens apart
        assert "word tokens" in res["C10"]["reason"] and "special tokens" in res["C10"]["reason"]
    else:
        assert "`make record-c10`" in res["C10"]["reason"]


def test_the_row_computed_by_hand_is_the_engines(background):
    """The visible cell's reverse-mode row of c (one hidden token's Jacobian blocks, their Frobenius norms,
    normalised) agrees with the engine's on the real model."""
    nb = json.loads(background.notebook("context_mixing").read_text())
    printed = "".join(
        "".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
    )
    gap = re.search(r"engine minus by hand: at most (\S+)\n", printed)
    assert gap and float(gap.group(1)) < 1e-5


def test_the_page_states_no_fixed_estimator_numbers(background):
    """The effective ranks and the estimator's centre come from this run: the ranks the page prints lie
    between 1 and d, and the chapter says nothing of MiniLM's benchmark numbers."""
    nb = json.loads(background.notebook("context_mixing").read_text())
    shown = json.dumps([o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])])
    ranks = re.search(r"effective rank .*? from ([\d.]+) to ([\d.]+) \(median ([\d.]+)\)", shown)
    assert ranks and 1 <= float(ranks.group(1)) <= float(ranks.group(3)) <= float(ranks.group(2)) <= 384
    assert "median signed error" in shown and "12–17" not in shown and "unbiased" not in shown
