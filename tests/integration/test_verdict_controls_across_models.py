"""Controls of C13 and C14 whose truth is known by construction, run through the real pipeline: chapter 4's
per-sentence rates (synthetic ones of its results' shape, or computed with the chapter's own probe pieces on
tiny random models) filed as results files, the results table, chapter 9's study (pairing by sentence key,
the hierarchical bootstrap) and the judges. Also the power calculation of C13, checked by simulation."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch

from identifiability import identity as ident
from identifiability.base import stats
from identifiability.base.digits import pct
from identifiability.base.fileio import write_json
from identifiability.base.stats import Interval, chance_of_holding, sentences_for_power, unpaired_difference
from identifiability.chapters.contract import by_name
from identifiability.charts.across_models import differences_chart
from identifiability.models.load import random_model
from identifiability.runs import aggregate, model_comparison
from identifiability.studies.across_models import comparison, paired
from identifiability.text import across_models as prose
from identifiability.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_RUN, NOT_TESTABLE, PARTLY
from identifiability.verdicts.across_models import (
    C13_BAND,
    C13_POWER,
    c13,
    c14,
    judge_c13,
    judge_c13_original,
    judge_c14,
)
from identifiability.verdicts.claims import load_claims, rules

CLAIMS = {c["id"]: c for c in load_claims()}
RULE = {cid: CLAIMS[cid]["rule"] for cid in ("C13", "C14")}
CORPUS = "lee_heldout"
REFERENCE = "all-MiniLM-L6-v2"


def _keys(n: int) -> list[str]:
    return [hashlib.sha1(f"sentence {i}".encode()).hexdigest()[:12] for i in range(n)]


def _file(
    root, model: str, key: str, content: str, rate: np.ndarray, keys: list[str], seeds=(0, 1, 2), tokens=None
) -> None:
    """A chapter 4 results file holding ``linear_rate_by_sentence`` with ``rate`` (probe seeds, n, L) and,
    where given, the test tokens per sentence."""
    doc = {
        "chapter": by_name("token_identity").stem,
        "params": {"model": model, "corpus": CORPUS, "seed": 0, "n_sentences": 400},
        "provenance": {"key": key, "content_key": content},
        "results": {
            "linear_rate_by_sentence": {
                "sentence_keys": keys,
                "probe_seeds": list(seeds),
                "layers": list(range(1, rate.shape[-1] + 1)),
                "rate": np.round(rate, 6).tolist(),
            }
            | ({} if tokens is None else {"tokens": [int(t) for t in tokens]})
        },
    }
    write_json(root / "results" / key / CORPUS / f"{by_name('token_identity').stem}.json", doc)


def _model_folder(root, name: str, prov: dict) -> str:
    folder = root / "models" / name
    folder.mkdir(parents=True)
    (folder / "provenance.json").write_text(json.dumps(prov))
    return str(folder)


def _compare(root, reference: np.ndarray, fine_tuned: list[np.ndarray], control: np.ndarray | None = None, tokens=None):
    """File the reference's and each fine-tune seed's rates (and the control's; the reference's run with its
    test tokens per sentence where given), then run chapter 9's study."""
    n = reference.shape[1]
    keys = _keys(n)
    _file(root, REFERENCE, REFERENCE, "refkey", reference, keys, tokens=tokens)
    for f, rate in enumerate(fine_tuned):
        prov = {
            "kind": "fine-tuned",
            "task": "lee-pairs",
            "seed": f,
            "identity": {"kind": "fine-tuned", "task": "lee-pairs", "seed": f, "epochs": 2},
            "base": {"name": REFERENCE, "content_key": "refkey"},
        }
        model = _model_folder(root, f"ft-seed{f}", prov)
        order = np.random.default_rng(f).permutation(n)  # each run lists its test sentences in its own order
        _file(root, model, f"ft{f}", f"ftkey{f}", rate[:, order], [keys[i] for i in order])
    if control is not None:
        prov = {"kind": "random-init", "seed": 0, "like": {"name": REFERENCE, "content_key": "refkey"}}
        _file(root, _model_folder(root, "random", prov), "rnd", "rndkey", control, keys)
    table = aggregate.read_table(aggregate.write_table(root))
    return comparison(
        table, reference=REFERENCE, seed=0, judge_corpus=CORPUS, data_folder=root, band=C13_BAND, power=C13_POWER
    )


def _rates(rng, n: int, L: int = 6, shift=0.0, seed_sd=0.0, probe_sd=0.005, base=None) -> np.ndarray:
    """(3 probe seeds, n, L) per-sentence rates: a sentence's own level (``base``), plus ``shift`` (per layer),
    one draw of fine-tune seed noise, probe-seed shifts and per-sentence probe noise."""
    seed_shift = rng.normal(0, seed_sd) if seed_sd else 0.0
    probe = rng.normal(0, probe_sd, (3, 1, 1)) + rng.normal(0, 0.03, (3, n, L))
    return np.clip(base + shift + seed_shift + probe, 0, 1)


def _base(rng, n: int, L: int = 6) -> np.ndarray:
    return np.clip(0.9 - 0.02 * np.arange(L) + rng.normal(0, 0.05, (n, 1)), 0, 1)


def _verdicts(cmp):
    ft = cmp.fine_tuning
    return c13(ft, rules("C13")), c14(ft, rules("C14"))


def test_identical_fine_tunes_are_close_with_enough_sentences(tmp_path):
    """Fine-tunes whose per-sentence rates are the reference's (only the probes' own noise differs): C13
    must hold, with the seeds, sentences and pairing the study reports."""
    rng = np.random.default_rng(0)
    n = 300
    base = _base(rng, n)
    cmp = _compare(tmp_path, _rates(rng, n, base=base), [_rates(rng, n, base=base) for _ in range(3)])
    v13, _ = _verdicts(cmp)
    assert v13.verdict == HOLDS, v13.reason
    p = cmp.fine_tuning.tasks["lee-pairs"]
    assert (p.ft_seeds, p.probe_seeds, p.sentences) == (3, 3, n)
    assert cmp.fine_tuning.differences["lee-pairs"].shape == (3, 3, 3, n, 6)
    assert abs(p.last.estimate) < 0.01 and p.last.high - p.last.low < 0.02  # paired: the sentences' spread cancels
    power = cmp.fine_tuning_power["lee-pairs"]
    assert power["chance_of_holding"] > 0.99 and power["sentences_for_power"] < n
    assert v13.original.verdict == NOT_RUN  # the original rule reads other results, which these runs lack
    assert [name for name, _ in v13.robustness] == ["band narrow", "band wide", "unit"]
    names = list(model_comparison.labels(cmp.model_table).values())  # the page's column heads
    assert names == ["pre-trained", *(f"fine-tuned: lee-pairs, seed {f}" for f in range(3))]


def test_without_pairing_the_same_data_would_not_be_close(tmp_path):
    """The sentences' own spread is what pairing removes: the same rates, each run with its interval over
    sentences and the two combined in quadrature (the original rule), do not settle C13; paired they do."""
    rng = np.random.default_rng(1)
    n = 40
    base = np.clip(0.8 + rng.normal(0, 0.15, (n, 1)) + np.zeros((1, 6)), 0, 1)  # sentences differ a lot
    ref = _rates(rng, n, base=base)
    fts = [_rates(rng, n, base=base) for _ in range(3)]
    cmp = _compare(tmp_path, ref, fts)
    assert judge_c13(cmp.fine_tuning.tasks, None, RULE["C13"]).verdict == HOLDS

    def run(rate):  # one run's last-layer rate over its probe seeds, interval over sentences
        per_sentence = rate[:, :, -1].mean(axis=0)
        return Interval(float(per_sentence.mean()), *stats.bootstrap_ci(per_sentence), n=n)

    unpaired = {f"seed{f}": unpaired_difference(run(r), run(ref)) for f, r in enumerate(fts)}
    assert judge_c13_original(unpaired, None, CLAIMS["C13"]["original_rule"]).verdict == INCONCLUSIVE


def test_a_shift_of_two_tenths_fails(tmp_path):
    rng = np.random.default_rng(2)
    n = 60
    base = _base(rng, n)
    cmp = _compare(tmp_path, _rates(rng, n, base=base), [_rates(rng, n, base=base, shift=-0.2) for _ in range(3)])
    v13, v14 = _verdicts(cmp)
    assert v13.verdict == FAILS, v13.reason
    assert cmp.fine_tuning.tasks["lee-pairs"].last.estimate == pytest.approx(-0.2, abs=0.02)
    assert v14.verdict != HOLDS  # the same change at every layer: the last does not beat the first


def test_changes_in_the_last_layers_only_make_c14_hold(tmp_path):
    rng = np.random.default_rng(3)
    n = 60
    base = _base(rng, n)
    late = np.array([0, 0, 0, 0, -0.1, -0.2])
    fts = [_rates(rng, n, base=base, shift=late, seed_sd=0.01) for _ in range(3)]
    cmp = _compare(tmp_path, _rates(rng, n, base=base), fts)
    _, v14 = _verdicts(cmp)
    assert v14.verdict == HOLDS, v14.reason
    assert cmp.fine_tuning.tasks["lee-pairs"].peak_late == 1.0
    assert [name for name, _ in v14.robustness] == ["peak share", "unit"]


def test_changes_in_the_first_layers_only_make_c14_fail(tmp_path):
    rng = np.random.default_rng(4)
    n = 60
    base = _base(rng, n)
    early = np.array([-0.2, -0.1, 0, 0, 0, 0])
    fts = [_rates(rng, n, base=base, shift=early, seed_sd=0.01) for _ in range(3)]
    cmp = _compare(tmp_path, _rates(rng, n, base=base), fts)
    _, v14 = _verdicts(cmp)
    assert v14.verdict == FAILS, v14.reason
    task = v14.parts[0]
    assert [p.verdict for p in task.parts] == [FAILS, FAILS]


def test_a_model_off_the_ceiling_in_its_upper_half_only_makes_c14_not_testable(tmp_path):
    """The real data's shape: every model identifies every token at layers 1-3 (rate 1, no spread). Version 3
    called a task without change not testable and held C14 once the last layers moved (|d_L| - |d_1| = |d_L|
    in every draw: the ceiling alone). Version 4 judges the layers off the ceiling only, and here none of them
    lies in the lower half: not testable on this model, whether the fine-tunes change nothing or move the
    last two layers, the reason naming the layers at the ceiling with their rates."""
    rng = np.random.default_rng(9)
    n = 60
    base = _base(rng, n)
    ceiling = np.array([1, 1, 1, 0, 0, 0], dtype=bool)

    def rates():
        r = _rates(rng, n, base=base)
        r[..., ceiling] = 1.0
        return r

    for root, shift in ((tmp_path, 0.0), (tmp_path / "late", np.array([0, 0, 0, 0, 0.1, 0.2]))):
        cmp = _compare(root, rates(), [rates() - shift for _ in range(3)])
        assert cmp.fine_tuning.off_ceiling == (4, 5, 6)
        v14 = judge_c14(cmp.fine_tuning.tasks, None, RULE["C14"])
        assert v14.verdict == NOT_TESTABLE, v14.reason
        assert "layers 1 (100.00%), 2 (100.00%), 3 (100.00%)" in v14.reason and "lower half" in v14.reason


def test_a_change_that_misses_the_last_layer_fails_last_beats_first(tmp_path):
    """A measurable change at layer 5 of 6 only: "last beats first" fails (d_L's interval contains 0 while
    layer 5 changed) and "peak late" holds, so C14 partly holds."""
    rng = np.random.default_rng(11)
    n = 60
    base = _base(rng, n)
    shape = np.array([0, 0, 0, 0, -0.2, 0])
    fts = [_rates(rng, n, base=base, shift=shape, seed_sd=0.01) for _ in range(3)]
    cmp = _compare(tmp_path, _rates(rng, n, base=base), fts)
    v14 = judge_c14(cmp.fine_tuning.tasks, None, RULE["C14"])
    task = v14.parts[0]
    assert [p.verdict for p in task.parts] == [FAILS, HOLDS], task.reason
    assert "contains 0 while layer 5 changed" in task.parts[0].reason and v14.verdict == PARTLY
    assert "[" not in task.parts[0].reason and "(s)" not in task.parts[0].reason  # words, not a Python list


def test_a_peak_late_whose_last_layer_changes_less_than_the_first_partly_holds(tmp_path):
    rng = np.random.default_rng(5)
    n = 80
    base = _base(rng, n)
    shape = np.array([-0.1, 0, 0, -0.25, 0, 0])  # peak at layer 4 of 6, last layer unchanged
    cmp = _compare(tmp_path, _rates(rng, n, base=base), [_rates(rng, n, base=base, shift=shape) for _ in range(3)])
    assert judge_c14(cmp.fine_tuning.tasks, None, RULE["C14"]).verdict == PARTLY


def test_one_fine_tune_seed_is_not_enough_for_the_amended_rule(tmp_path):
    rng = np.random.default_rng(6)
    n = 60
    base = _base(rng, n)
    cmp = _compare(tmp_path, _rates(rng, n, base=base), [_rates(rng, n, base=base)])
    v13, v14 = _verdicts(cmp)
    assert v13.verdict == INCONCLUSIVE and "at least 3" in v13.reason
    assert v14.verdict == INCONCLUSIVE


def test_nothing_run_is_not_run_for_both_rules(tmp_path):
    rng = np.random.default_rng(7)
    n = 20
    cmp = _compare(tmp_path, _rates(rng, n, base=_base(rng, n)), [])
    v13, v14 = _verdicts(cmp)
    for v in (v13, v14):
        assert v.verdict == NOT_RUN and v.original.verdict == NOT_RUN and "make compare" in v.reason
        assert all(label == NOT_RUN for _, label in v.robustness)


def test_the_random_initialisation_control_is_the_baseline_and_not_close(tmp_path):
    """The control changes every weight: its d_L is far from 0, and judged as if it were a fine-tune it is
    not "close" (the negative control of C13)."""
    rng = np.random.default_rng(8)
    n = 60
    base = _base(rng, n)
    rand = np.clip(rng.normal(0.3, 0.1, (3, n, 6)), 0, 1)
    cmp = _compare(tmp_path, _rates(rng, n, base=base), [_rates(rng, n, base=base) for _ in range(3)], rand)
    v13, v14 = _verdicts(cmp)
    ctrl = cmp.fine_tuning.control
    assert v13.baseline == pytest.approx(ctrl.last.estimate) and ctrl.last.estimate < -0.4
    chart = differences_chart(cmp.fine_tuning, "d_l").to_dict()  # the page's chart: a line per task and control
    rows = next(d for d in chart["datasets"].values() if "model" in d[0])
    assert {(r["model"], r["layer"]) for r in rows} == {
        (m, la) for m in ("lee-pairs", "random init") for la in range(1, 7)
    }
    assert judge_c13({"random init": ctrl}, None, RULE["C13"], min_seeds=1).verdict == FAILS
    assert v14.baseline == pytest.approx(ctrl.gap.estimate)


# --------------------------------------------------------------------------------------------------
# the real pieces on tiny random models: chapter 4's probes and per-sentence correctness
# --------------------------------------------------------------------------------------------------


def _sentences(n: int) -> list[str]:
    rng = np.random.default_rng(0)
    words = "the a cat dog sat ran on under mat tree river fire town road people news day night".split()
    return [" ".join(rng.choice(words, rng.integers(6, 12))) + "." for _ in range(n)]


EPOCHS = 3  # enough for probes of different seeds to end apart (one epoch from least squares: identical)
MIX = 10  # the tiny model's linear weights times this: its layers mix tokens, so probes miss some


def _per_sentence_rates(lm, texts, probe_seeds) -> np.ndarray:
    """(probe seeds, test sentences, L) per-sentence identifiability rate, linear map, cosine loss and lookup,
    the way chapter 4 measures it (split by sentence with seed 0, probes trained per layer)."""
    hs = ident.extract_hidden(lm, texts, progress=False)
    splits = ident.make_splits(hs, seed=0)
    L = lm.n_layers
    out = []
    for s in probe_seeds:
        cfg = ident.probe_config("linear", epochs=EPOCHS, batch_size=256, seed=s)
        tp = ident.train_probes(splits["train"], splits["val"], list(range(1, L + 1)), ["cos"] * L, cfg, progress=False)
        out.append(
            [[float(np.mean(c)) for c in ident.correct_by_sentence(tp, splits["test"], la)] for la in range(1, L + 1)]
        )
    return np.transpose(np.array(out), (0, 2, 1))


def _mixing_model():
    """A tiny random 4-layer BERT with its encoder's linear weights scaled by ``MIX``: at the default
    initialisation the residual stream carries every token through and probes identify all of them, which
    leaves a comparison of the model with itself nothing to vary."""
    lm = random_model("bert", seed=0, num_hidden_layers=4)
    with torch.no_grad():
        for m in lm.model.encoder.modules():
            if isinstance(m, torch.nn.Linear):
                m.weight.mul_(MIX)
    return lm


@pytest.fixture(scope="module")
def tiny_rates():
    """Per-sentence rates of a tiny random 4-layer BERT whose layers mix (:func:`_mixing_model`): the reference
    with probe seeds 0-2; three "fine-tunes" that are the same model, each with probe seeds of its own; and a
    copy whose last layer outputs one vector for every token (its output LayerNorm's gain set to 0): identity
    lost at the last layer only, by construction."""
    texts = _sentences(200)
    lm, broken = (_mixing_model() for _ in range(2))  # the same weights, each a copy of its own
    ref = _per_sentence_rates(lm, texts, (0, 1, 2))
    same = [_per_sentence_rates(lm, texts, (3 * f, 3 * f + 1, 3 * f + 2)) for f in (1, 2, 3)]
    with torch.no_grad():
        broken.model.encoder.layer[-1].output.LayerNorm.weight.zero_()
    return ref, same, _per_sentence_rates(broken, texts, (0, 1, 2))


def test_tiny_model_against_itself_is_close(tmp_path, tiny_rates):
    """The same model with probes of other seeds: the true difference is 0, and C13 holds on the real probe
    pieces."""
    ref, same, _ = tiny_rates
    # not degenerate: the probes miss tokens in the upper layers, and other probe seeds miss other ones
    assert ref[..., -1].mean() < 0.9 and not np.array_equal(ref, same[0])
    cmp = _compare(tmp_path, ref, same)
    v13 = judge_c13(cmp.fine_tuning.tasks, None, RULE["C13"])
    assert v13.verdict == HOLDS, v13.reason


def test_tiny_model_whose_last_layer_forgets_tokens(tmp_path, tiny_rates):
    """A last layer that maps every token to one vector: identity at layer L drops to chance, layers below
    are untouched, so C13 fails and C14 holds."""
    ref, _, broken = tiny_rates
    assert ref[:, :, -1].mean() > 2 * broken[:, :, -1].mean()  # about chance (1 / 9 tokens) once forgotten
    assert np.array_equal(ref[..., :-1], broken[..., :-1])  # the same probes on the same layers below
    cmp = _compare(tmp_path, ref, [broken, broken, broken])
    v13, v14 = _verdicts(cmp)
    assert v13.verdict == FAILS and v14.verdict == HOLDS, (v13.reason, v14.reason)


# --------------------------------------------------------------------------------------------------
# C13's power
# --------------------------------------------------------------------------------------------------


def test_sentences_for_power_solves_the_chance_of_holding():
    n = sentences_for_power(1e-5, 0.02, C13_BAND, C13_POWER)
    assert chance_of_holding(1e-5, 0.02, n, C13_BAND) >= C13_POWER > chance_of_holding(1e-5, 0.02, n - 1, C13_BAND)
    assert sentences_for_power(0.001, 0.02, C13_BAND, C13_POWER) is None  # the seeds alone exceed the band
    assert sentences_for_power(0.0, 0.04, C13_BAND, C13_POWER) > sentences_for_power(0.0, 0.01, C13_BAND, C13_POWER)


def test_the_powered_size_gives_about_its_chance_of_holding_in_simulation():
    """At a true difference of 0, data of the size :func:`sentences_for_power` names (from the variance split
    of a pilot) make the real bootstrap and judge say "holds" about C13_POWER of the time."""
    rng = np.random.default_rng(0)
    sd_sentence, sd_seed = 0.09, 0.006

    def draw(n):  # (F, P, Q, n, L=2): fine-tune seed shifts, sentence effects, noise per run and sentence
        seeds = rng.normal(0, sd_seed, (3, 1, 1, 1, 1))
        sentences = rng.normal(0, sd_sentence, (1, 1, 1, n, 1))
        return seeds + sentences + rng.normal(0, 0.03, (3, 3, 3, n, 2))

    def study(d, **kw):  # the reference well off the ceiling: C13's plain case
        return paired(d, np.full(d.shape[2:], 0.5), ceiling=1 - C13_BAND, **kw)

    pilot = study(draw(400), n_resamples=1000)
    n = sentences_for_power(pilot.seed_var, pilot.sentence_var, C13_BAND, C13_POWER)
    assert 20 < n < 400
    holds = [
        judge_c13({"t": study(draw(n), seed=k, n_resamples=300)}, None, RULE["C13"]).verdict == HOLDS
        for k in range(150)
    ]
    assert abs(np.mean(holds) - C13_POWER) < 0.12, (n, np.mean(holds))


def test_the_reference_beside_its_control_alone(tmp_path):
    """What a plain build compares (the reference and its random-initialisation control on the held-out text):
    the control's paired change per layer is drawn and worded, and C13 and C14 are not run."""
    import numpy as np

    from identifiability.charts.across_models import differences_chart
    from identifiability.text.across_models import claims_markdown, control_text

    rng = np.random.default_rng(3)
    n = 20
    cmp = _compare(tmp_path, _rates(rng, n, base=_base(rng, n)), [], np.clip(rng.normal(0.3, 0.1, (3, n, 6)), 0, 1))
    ft = cmp.fine_tuning
    assert cmp.models == 2 and not ft.tasks and ft.control.last.estimate < -0.4
    assert {v.verdict for v in _verdicts(cmp)} == {NOT_RUN}
    chart = differences_chart(ft, "t").to_dict()
    rows = next(d for d in chart["datasets"].values() if "model" in d[0])
    assert {(r["model"], r["layer"]) for r in rows} == {("random init", la) for la in range(1, 7)}
    assert str(ft.control.last) in control_text(ft)
    assert claims_markdown(cmp.claim_table, cmp.model_table) == "No run these models share judges a claim."
    assert chart["title"] == "t"  # on the layered chart, where the page shows it


# --------------------------------------------------------------------------------------------------
# C13 version 3 and C14 version 4 from per-token correctness (0/1 per test token, its truth known):
# the ceiling, the layers off it, and the null result with its power
# --------------------------------------------------------------------------------------------------


def _tokens(rng, n: int) -> np.ndarray:
    return rng.integers(8, 25, n)  # test tokens per sentence, as the held-out text's


def _correct(rng, tokens: np.ndarray, p) -> np.ndarray:
    """(3 probe seeds, n, L) per-sentence rates: each test token identified (1) or not (0) with the
    probability ``p`` of its layer (L,), drawn afresh per probe seed; a sentence's rate is its tokens' mean."""
    p = np.asarray(p, dtype=float)
    return np.stack([[(rng.random((t, len(p))) < p).mean(axis=0) for t in tokens] for _ in range(3)])


OFF = [0.8] * 6  # a reference off the ceiling at every layer


def _ft_compare(root, seed: int, ref_p, ft_p, seeds: int = 3, n: int = 80):
    rng = np.random.default_rng(seed)
    tokens = _tokens(rng, n)
    ref = _correct(rng, tokens, ref_p)
    cmp = _compare(root, ref, [_correct(rng, tokens, ft_p) for _ in range(seeds)], tokens=tokens)
    return cmp, tokens


def test_c13_at_the_ceiling_holds_with_no_change_detected_and_its_power(tmp_path):
    """Both models identify every test token at the last layer: d_L = 0 in every draw. C13 holds, qualified
    "no change detected" (never "not testable"), and the reason gives the power to detect a change of 0.05 for
    a rate of 0.95 on these test tokens, which the page can check by hand."""
    cmp, tokens = _ft_compare(tmp_path, 20, [0.9, 0.9, 0.9, 0.9, 0.9, 1.0], [0.9, 0.9, 0.9, 0.9, 0.9, 1.0])
    p = cmp.fine_tuning.tasks["lee-pairs"]
    assert p.last.low == p.last.high == 0 and p.reference[-1].low == 1 and p.tokens == tuple(tokens)
    v13, _ = _verdicts(cmp)
    task = v13.parts[0]
    assert (task.verdict, task.qualifier) == (HOLDS, "no change detected"), task.reason
    assert (v13.verdict, v13.qualifier) == (HOLDS, "no change detected")
    power = stats.power_to_detect(C13_BAND, stats.rate_variance(1 - C13_BAND, tokens))
    assert 0.9995 < power < 1 and "power of over 99.9%" in task.reason  # said so, not rounded up to 100%
    assert f"same {tokens.sum()} test tokens in 80 test sentences" in task.reason
    # a handful of short sentences: the power is stated as what it is, and the verdict is still "holds"
    few, few_tokens = _ft_compare(tmp_path / "few", 21, [1.0] * 6, [1.0] * 6, n=6)
    low = stats.power_to_detect(C13_BAND, stats.rate_variance(1 - C13_BAND, few_tokens))
    v = judge_c13(few.fine_tuning.tasks, None, RULE["C13"])
    assert v.verdict == HOLDS and low < 0.99 and f"power of {pct(low)}" in v.parts[0].reason
    # the ceiling without the tokens recorded: read off the rates' denominators (a lower bound, said so)
    rng = np.random.default_rng(22)
    tok = _tokens(rng, 40)
    rates = lambda p: _correct(rng, tok, p)  # noqa: E731
    bare = _compare(tmp_path / "bare", rates([0.8] * 5 + [1.0]), [rates([0.8] * 5 + [1.0]) for _ in range(3)])
    q = bare.fine_tuning.tasks["lee-pairs"]
    assert not q.tokens_recorded and all(t <= u for t, u in zip(q.tokens, tok)) and sum(q.tokens) > 0.8 * tok.sum()
    assert "at least" in judge_c13(bare.fine_tuning.tasks, None, RULE["C13"]).parts[0].reason


def test_c14_off_the_ceiling_holds_where_the_fine_tune_changes_late_layers_most(tmp_path):
    cmp, _ = _ft_compare(tmp_path, 23, OFF, [0.8, 0.8, 0.8, 0.7, 0.6, 0.5])
    assert cmp.fine_tuning.off_ceiling == (1, 2, 3, 4, 5, 6)
    _, v14 = _verdicts(cmp)
    assert v14.verdict == HOLDS, v14.reason
    assert [p.verdict for p in v14.parts[0].parts] == [HOLDS, HOLDS]
    assert "layers 1, 2, 3, 4, 5 and 6" in prose.ceiling_text(cmp.fine_tuning)


def test_c14_reads_the_gap_and_the_peak_on_the_off_ceiling_layers_only(tmp_path):
    """Layer 1 of the reference is at the ceiling and the fine-tunes lose most there (0.5); on the layers off
    the ceiling (2-6) they change the late ones most. C14 holds: f = 2 and m = 6, and the largest change among
    the off-ceiling layers lies late; read on every layer (version 3), both parts would fail."""
    cmp, _ = _ft_compare(tmp_path, 30, [1, 0.8, 0.8, 0.8, 0.8, 0.8], [0.5, 0.8, 0.8, 0.7, 0.6, 0.5])
    p = cmp.fine_tuning.tasks["lee-pairs"]
    assert p.off_ceiling == (2, 3, 4, 5, 6) and abs(p.layers[0].estimate) > abs(p.last.estimate)
    assert p.gap.estimate == pytest.approx(abs(p.last.estimate) - abs(p.layers[1].estimate))
    _, v14 = _verdicts(cmp)
    assert v14.verdict == HOLDS and p.peak_late == 1.0, v14.reason
    assert "|d_6| - |d_2|" in v14.parts[0].reason and "layers 2, 3, 4, 5 and 6" in v14.reason


def test_c14_off_the_ceiling_fails_where_the_fine_tune_changes_early_layers_most(tmp_path):
    cmp, _ = _ft_compare(tmp_path, 24, OFF, [0.5, 0.6, 0.7, 0.8, 0.8, 0.8])
    _, v14 = _verdicts(cmp)
    assert v14.verdict == FAILS, v14.reason
    assert [p.verdict for p in v14.parts[0].parts] == [FAILS, FAILS]


def test_c14_on_the_default_models_ceiling_is_not_testable(tmp_path):
    """Layers 1-4 of the reference identify 99.96-100% of tokens (the default model's), only 5 and 6 are off
    the ceiling: none in the lower half, so C14 is not testable on this model, the fine-tunes' late change
    notwithstanding, and the reason names the layers at the ceiling with their rates."""
    cmp, _ = _ft_compare(tmp_path, 25, [1, 0.9996, 1, 0.9998, 0.8, 0.8], [1, 0.9996, 1, 0.9998, 0.7, 0.5])
    ft = cmp.fine_tuning
    assert ft.off_ceiling == (5, 6) and all(r.high >= 0.95 for r in ft.reference[:4])
    _, v14 = _verdicts(cmp)
    assert v14.verdict == NOT_TESTABLE, v14.reason
    assert "layers 1 (100.00%), 2 (99.9" in v14.reason and "4 (99.9" in v14.reason
    assert "off the ceiling only: **layers 5 and 6**" in prose.ceiling_text(ft)


def test_c14_without_a_measurable_change_is_inconclusive_no_change_detected_with_power(tmp_path):
    """Fine-tunes that identify the tokens as the reference does (a true d_l of 0 at every off-ceiling layer):
    no interval excludes 0, so the task is inconclusive, "no change detected", with the power to detect 0.05
    at each of those layers (from the variance of its draws)."""
    cmp, _ = _ft_compare(tmp_path, 26, OFF, OFF)
    p = cmp.fine_tuning.tasks["lee-pairs"]
    assert all(d.low <= 0 <= d.high for d in p.layers)
    _, v14 = _verdicts(cmp)
    assert (v14.verdict, v14.qualifier) == (INCONCLUSIVE, "no change detected"), v14.reason
    task = v14.parts[0]
    assert task.qualifier == "no change detected" and "power to detect a change of 0.05" in task.reason
    for k in (1, 6):
        power = stats.power_to_detect(C13_BAND, p.layer_var[k - 1])
        assert 0.5 < power < 0.9995 and f"layer {k} {pct(power)}" in task.reason


def test_c14_with_too_few_fine_tune_seeds_is_inconclusive(tmp_path):
    cmp, _ = _ft_compare(tmp_path, 27, OFF, [0.8, 0.8, 0.8, 0.7, 0.6, 0.5], seeds=2)
    v13, v14 = _verdicts(cmp)
    assert v14.verdict == INCONCLUSIVE and "at least 3" in v14.reason, v14.reason
    assert v13.verdict == INCONCLUSIVE


def test_the_reference_rate_comes_from_the_draws_of_the_differences():
    """The reference's interval per layer is that of its rates (probe seeds and sentences resampled with the
    differences): its estimate is their mean, a layer at 1 everywhere has the interval [1, 1], and a rate
    spread over sentences has an interval about as wide as its own bootstrap's."""
    rng = np.random.default_rng(28)
    n = 50
    ref = np.stack([np.ones((3, n)), np.clip(rng.normal(0.7, 0.1, (3, n)), 0, 1)], axis=-1)  # (Q, n, 2)
    d = rng.normal(0, 0.01, (3, 3, 3, n, 2))
    p = paired(d, ref, ceiling=0.95)
    assert (p.reference[0].low, p.reference[0].high) == (1.0, 1.0) and p.off_ceiling == (2,)
    assert p.reference[1].estimate == pytest.approx(ref[..., 1].mean())
    own = stats.hierarchical_interval(ref[..., 1], 1)
    assert p.reference[1].high - p.reference[1].low == pytest.approx(own.high - own.low, rel=0.25)
    with pytest.raises(ValueError, match="another band"):  # evidence built for another band than the rule's
        judge_c14({"t": paired(d, ref, ceiling=0.5)}, None, RULE["C14"])
