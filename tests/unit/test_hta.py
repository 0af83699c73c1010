"""Hidden Token Attribution: the fast engines against the naive reverse-mode reference, the estimator
against exact mode, the statistics against hand-built inputs, and the charts built from them. (The checks
on the real model are in tests/integration/test_hta.py.)"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from identifiability import hta as attribution
from identifiability.charts import context_mixing as hta_charts
from identifiability.corpus.pos import word_piece_tags
from identifiability.hta.core import Directions, prepare
from identifiability.hta.folded import folded_S
from identifiability.models.load import random_model
from identifiability.models.trace import trace_batch

SHORT = "Cats sat."  # 4 tokens with [CLS]/[SEP]: the naive loop stays at a few hundred passes
SENT = "The cat sat on the mat, and the dog barked twice."


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.fixture(scope="module")
def gpt2():
    return random_model("gpt2", seed=0)


# ---------------------------------------------------------------- exactness


def test_exact_engines_match_naive_reference(tiny_lm):
    ref = attribution.hta_naive(tiny_lm, SHORT)
    folded = attribution.hta(tiny_lm, SHORT)
    generic = attribution.hta(tiny_lm, SHORT, method="generic")
    assert folded.method == "folded" and generic.method == "generic"
    assert rel(folded.S, ref.S) <= 1e-4
    assert rel(generic.S, ref.S) <= 1e-4
    # every layer separately, not only overall
    for layer in range(ref.S.shape[0]):
        assert rel(folded.S[layer], ref.S[layer]) <= 1e-4


def test_hidden_graph_gradients_give_exact_hta(tiny_lm):
    """The public graph for reverse-mode experiments (chapter 6's exercise): the squared norm of the gradient
    of each output coordinate, summed, is S exactly (what hta_naive does with the private helpers)."""
    hs, x = attribution.hidden_graph(tiny_lm, SHORT)
    ref = attribution.hta(tiny_lm, SHORT)
    n, d = x.shape
    assert len(hs) == ref.S.shape[0] and torch.equal(hs[0][0], x)
    i, layer = 1, len(hs) - 1
    s = torch.zeros(n, dtype=torch.float64)
    for k in range(d):
        (g,) = torch.autograd.grad(hs[layer][0, i, k], x, retain_graph=True)
        s += g.double().pow(2).sum(-1)
    assert rel(s, ref.S[layer, i].double()) <= 1e-4


def test_generic_matches_naive_on_causal_pre_ln(gpt2):
    ref = attribution.hta_naive(gpt2, SHORT)
    got = attribution.hta(gpt2, SHORT)
    assert got.method == "generic"  # GPT-2 is pre-LN and causal: the folded pass does not apply
    assert rel(got.S, ref.S) <= 1e-4
    # causality: a hidden token never depends on later input tokens, in any layer
    upper = torch.triu(torch.ones(got.n_tokens, got.n_tokens, dtype=torch.bool), 1)
    assert float(got.S[:, upper].abs().max()) == 0.0
    assert float(got.S[:, ~upper].min()) >= 0.0 and float(got.S[1:, ~upper].min()) > 0.0


def test_layer0_is_the_input_itself(tiny_lm):
    r = attribution.hta(tiny_lm, SENT)
    n, d = r.n_tokens, tiny_lm.d_model
    assert torch.allclose(r.S[0], d * torch.eye(n, dtype=torch.float64))
    assert torch.allclose(r.c[0], torch.eye(n, dtype=torch.float64))


def test_folded_unfolded_and_chunking_agree(tiny_lm):
    inp = prepare(tiny_lm, SENT)
    spec = attribution.fold_spec(tiny_lm)
    dirs = Directions(*inp.x.shape)
    base = folded_S(tiny_lm, inp, dirs, None, spec, fold=True)
    assert rel(folded_S(tiny_lm, inp, dirs, None, spec, fold=False), base) <= 1e-5
    assert rel(folded_S(tiny_lm, inp, dirs, 7, spec, fold=True), base) <= 1e-5  # ragged last chunk
    assert rel(attribution.hta(tiny_lm, SENT, method="generic", chunk=300).S, base) <= 1e-4  # ragged too


def test_score_tangent_paths_agree():
    """The score tangent from projected Q/K tangents (dense products in the first layer) and from the
    precomputed score rows (W_q^hᵀ k, W_k^hᵀ q; one-row products in the first layer) agree with each other
    and with the naive reference. At random initialisation attention is almost uniform and the score
    tangent barely moves S, so the query and key weights are scaled up, and the entries off the diagonal
    (all of which come through attention) are compared: leaving out the q·dk term moves them by about 20%."""
    lm = random_model("bert", seed=1)
    with torch.no_grad():
        for layer in lm.model.encoder.layer:
            layer.attention.self.query.weight.mul_(8)
            layer.attention.self.key.weight.mul_(8)
    text = "The cat sat on the mat."
    inp = prepare(lm, text)
    n = inp.x.shape[0]
    spec, dirs, off = attribution.fold_spec(lm), Directions(*inp.x.shape), ~torch.eye(n, dtype=torch.bool)
    project = folded_S(lm, inp, dirs, 7, spec, scores="project")  # 7: a ragged last chunk
    rows = folded_S(lm, inp, dirs, 7, spec, scores="precomputed")
    auto = folded_S(lm, inp, dirs, None, spec)  # n·(H − 1) < d: score rows after the first layer
    ref = attribution.hta(lm, text, method="naive").S
    for a, b in ((rows, project), (rows, ref), (project, ref)):
        assert rel(a, b) <= 1e-5 and rel(a[:, off], b[:, off]) <= 1e-5
    assert rel(auto, rows) <= 1e-6
    # n·(H − 1) >= d: one-row products in the first layer, projected Q/K tangents in the others
    inp = prepare(lm, SENT + " " + SENT)
    n = inp.x.shape[0]
    dirs, off = Directions(*inp.x.shape), ~torch.eye(n, dtype=torch.bool)
    assert n * (lm.n_heads - 1) >= lm.d_model
    mixed, project = folded_S(lm, inp, dirs, None, spec), folded_S(lm, inp, dirs, None, spec, scores="project")
    assert rel(mixed, project) <= 1e-5 and rel(mixed[:, off], project[:, off]) <= 1e-5
    with pytest.raises(ValueError, match="scores"):
        folded_S(lm, inp, dirs, None, spec, scores="rows")


def test_trace_input_equals_text_input(tiny_lm):
    tr = trace_batch(tiny_lm, [SENT, SENT + " " + SENT])[0]  # padded batch: the trace has padding removed
    assert rel(attribution.hta(tiny_lm, tr).S, attribution.hta(tiny_lm, SENT).S) <= 1e-6


def test_every_architecture(tiny_any):
    """Each entry point on every registered architecture: the folded pass where it applies, and it
    agrees with the generic path; the estimator and the statistics run."""
    lm = tiny_any
    expected = "folded" if lm.adapter.foldable else "generic"
    assert attribution.available_method(lm) == expected
    r = attribution.hta(lm, SENT)
    assert r.method == expected
    L, n = lm.n_layers, r.n_tokens
    assert r.S.shape == (L + 1, n, n) and r.c.shape == (L + 1, n, n)
    assert float(r.c.min()) >= 0 and torch.allclose(r.c.sum(-1), torch.ones(L + 1, n, dtype=torch.float64))
    if expected == "folded":
        assert rel(r.S, attribution.hta(lm, SENT, method="generic").S) <= 1e-4
    est = attribution.hta(lm, SENT, mode="estimate", probes=8)
    assert est.mode == "estimate" and est.probes == 8 and est.S.shape == r.S.shape
    assert attribution.estimate_error([r], [est])["median"] < 0.2
    res = attribution.hta_corpus(lm, [SENT, "Cats sat."], progress=False)
    tab = attribution.token_table(res, word_piece_tags(lm.tokenizer, [SENT, "Cats sat."]))
    assert set(attribution.layer_summary(tab)["layer"]) == set(range(1, L + 1))
    assert len(attribution.distance_profile(res, 3)) == L * 9
    assert len(attribution.locality(res)) == L
    prof, src = attribution.special_profile(res)
    assert prof.empty == src.empty == (not any(res[0].special))  # no special tokens: empty frames
    if not src.empty:
        # "words" is what is left after the target itself and the other special tokens: the word tokens'
        # contributions, since a hidden token's contributions sum to one
        words = src[src.source == "words"].set_index(["target", "layer"])["share"]
        for target, pos in (("first", 0), ("last", -1)):
            kept = [r for r in res if r.special[pos]]
            for layer in range(1, L + 1):
                direct = [float(r.c[layer, pos][~torch.tensor(r.special)].sum()) for r in kept]
                assert words[target, layer] == pytest.approx(sum(direct) / len(direct), abs=1e-6)
    spec = hta_charts.contribution_explorer(res).to_dict()
    assert sum(len(r.tokens) for r in res) * L == len(
        attribution.explorer_rows(res)
    )  # one row per (sentence, layer, token)
    assert {p["name"] for p in spec["params"]} == {"sentence", "token"}


def test_tanh_gelu_and_unknown_activation():
    """The folded pass uses the model's own activation (exact erf GELU vs the tanh approximation), and
    hands anything it does not know to the generic path."""
    from transformers.activations import ACT2FN

    lm = random_model("bert", seed=1)
    for blk in lm.model.encoder.layer:
        blk.intermediate.intermediate_act_fn = ACT2FN["gelu_new"]
    lm.model.config.hidden_act = "gelu_new"
    got = attribution.hta(lm, SENT)
    assert got.method == "folded"
    assert rel(got.S, attribution.hta(lm, SENT, method="generic").S) <= 1e-4
    lm.model.config.hidden_act = "something_new"
    assert attribution.fold_spec(lm) is None and attribution.hta(lm, SENT).method == "generic"


def test_folded_falls_back_when_its_forward_pass_disagrees():
    """If the model does something the folded pass does not model, its primal check catches it."""
    lm = random_model("bert", seed=2)
    h = lm.model.encoder.layer[1].output.register_forward_hook(lambda _m, _i, o: o * 1.5)
    try:
        with pytest.warns(UserWarning, match="generic"):
            got = attribution.hta(lm, SENT)
        assert got.method == "generic"
        assert rel(got.S, attribution.hta(lm, SENT, method="generic").S) <= 1e-6
    finally:
        h.remove()


# ---------------------------------------------------------------- estimator


def test_orthonormal_probes_are_exact_at_full_rank(tiny_lm):
    """d orthonormal probes per token span the input space: the 'estimate' is then exact."""
    exact = attribution.hta(tiny_lm, SENT)
    full = attribution.hta(tiny_lm, SENT, mode="estimate", probes=tiny_lm.d_model)
    assert rel(full.S, exact.S) <= 1e-4


def test_estimator_is_unbiased_and_improves_with_probes(tiny_lm):
    exact = attribution.hta(tiny_lm, SENT)
    runs = [attribution.hta(tiny_lm, SENT, mode="estimate", probes=4, probe="gaussian", seed=s) for s in range(40)]
    mean_S = torch.stack([r.S for r in runs]).mean(0)
    assert rel(mean_S, exact.S) < 0.05  # the mean of 40 estimates converges on S
    few = attribution.estimate_error(
        [exact] * 4, [attribution.hta(tiny_lm, SENT, mode="estimate", probes=2, seed=s) for s in range(4)]
    )
    many = attribution.estimate_error(
        [exact] * 4, [attribution.hta(tiny_lm, SENT, mode="estimate", probes=32, seed=s) for s in range(4)]
    )
    assert many["median"] < few["median"] / 2


# ---------------------------------------------------------------- contributions and statistics


def test_contributions_normalise_rows():
    S = torch.rand(3, 5, 5, dtype=torch.float64) ** 2
    c = attribution.contributions(S)
    assert float(c.min()) >= 0 and torch.allclose(c.sum(-1), torch.ones(3, 5, dtype=torch.float64))
    assert torch.allclose(attribution.contributions(7.0 * S), c)  # only ratios of norms matter
    assert torch.allclose(c[0, 0], S[0, 0].sqrt() / S[0, 0].sqrt().sum())  # norms, not squared norms
    assert torch.isfinite(attribution.contributions(torch.zeros(2, 2))).all()


def _synthetic(n: int, own: float, special: bool = True) -> attribution.HTAResult:
    """Layer 1: own share ``own``, the rest spread over the neighbours at distance 1; layer 2: uniform."""
    c1 = torch.zeros(n, n, dtype=torch.float64)
    for i in range(n):
        nb = [j for j in (i - 1, i + 1) if 0 <= j < n]
        c1[i, i] = own
        for j in nb:
            c1[i, j] = (1 - own) / len(nb)
    c2 = torch.full((n, n), 1.0 / n, dtype=torch.float64)
    S = torch.stack([torch.eye(n, dtype=torch.float64), c1, c2]) ** 2
    spec = [special and i in (0, n - 1) for i in range(n)]
    return attribution.HTAResult("x", [f"t{i}" for i in range(n)], S, "synthetic", special=spec)


def _noisy(r: attribution.HTAResult, seed: int = 0) -> attribution.HTAResult:
    """r with every squared norm multiplied by 1.1^z, z standard normal: a stand-in for an estimate."""
    noise = 1.1 ** torch.randn(r.S.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return attribution.HTAResult(r.text, r.tokens, r.S * noise, "x", special=r.special)


def test_statistics_on_known_contributions():
    res = [_synthetic(6, 0.6), _synthetic(9, 0.6)]
    tab = attribution.token_table(res)
    summ = attribution.layer_summary(tab).set_index("layer")
    assert summ.loc[1, "own_median"] == pytest.approx(0.6)
    assert summ.loc[1, "top_is_self_pct"] == pytest.approx(100.0)
    assert summ.loc[2, "own_median"] == pytest.approx(float(tab[tab.layer == 2].own.median()))
    prof = attribution.distance_profile(res, max_offset=3)
    for _, g in prof.groupby("layer"):
        assert g["share"].sum() == pytest.approx(1.0)  # every contribution is counted once
    l1 = prof[prof.layer == 1].set_index("offset")
    assert l1.loc[0, "share"] == pytest.approx(0.6)
    assert l1.loc[[2, 3, -2, -3], "share"].sum() == pytest.approx(0.0)
    loc = attribution.locality(res, radius=1, far=2).set_index("layer")
    assert loc.loc[1, "within_1"] == pytest.approx(1.0)  # layer 1 mixes only neighbours
    assert loc.loc[2, "within_1"] == pytest.approx(loc.loc[2, "uniform_within_1"])  # layer 2 is uniform
    prof_s, src = attribution.special_profile(res)
    first_prof = prof_s[prof_s.target == "first"].set_index(["layer", "offset"])["c"]
    assert first_prof[1, 0] == pytest.approx(0.6) and first_prof[1, 1] == pytest.approx(0.4)  # itself, neighbour
    assert first_prof[2, 0] == pytest.approx(float(torch.tensor([1 / 6, 1 / 9]).mean()))  # uniform over n tokens
    shares = src.groupby(["target", "layer"])["share"].sum()
    assert shares.to_numpy() == pytest.approx(1.0)
    first1 = src[(src.target == "first") & (src.layer == 1)].set_index("source")["share"]
    assert first1["itself"] == pytest.approx(0.6) and first1["words"] == pytest.approx(0.4)
    assert attribution.special_profile([_synthetic(5, 0.5, special=False)])[0].empty


def test_estimate_error_metric():
    ex = _synthetic(6, 0.6)
    same = attribution.estimate_error([ex], [ex])
    assert same["median"] == 0 and same["top_agreement"] == 1.0
    e = attribution.estimate_error([ex], [_noisy(ex)])
    assert 0 < e["median"] < e["p95"] <= e["max"]


def test_error_by_length_is_estimate_error_on_each_length_apart():
    """Two lengths, the shorter estimated exactly: its error is 0, the longer one's is estimate_error on its
    sentences alone, and each length's seconds are the exact passes' mean there."""

    def timed(r: attribution.HTAResult, t: float) -> attribution.HTAResult:
        return attribution.HTAResult(r.text, r.tokens, r.S, r.method, seconds=t, special=r.special)

    short, long_a, long_b = (
        timed(_synthetic(4, 0.6), 1.0),
        timed(_synthetic(6, 0.6), 2.0),
        timed(_synthetic(6, 0.5), 4.0),
    )
    noisy = [_noisy(long_a), _noisy(long_b)]
    errors, seconds = attribution.error_by_length([long_a, short, long_b], [noisy[0], short, noisy[1]])
    assert list(errors) == ["4 tokens", "6 tokens"] and errors["4 tokens"]["median"] == 0
    assert errors["6 tokens"] == attribution.estimate_error([long_a, long_b], noisy)
    assert seconds == {"4 tokens": 1.0, "6 tokens": 3.0}


def test_estimate_error_signed_median_says_which_way_c_is_off():
    """An estimate whose blocks between different tokens all come out 21% too large (their norms 10%) moves
    c up on those entries and down on the own ones: the signed median, over mostly off-own entries, is
    positive; S scaled as a whole leaves c and the signed error at 0."""
    ex = _synthetic(6, 0.6)
    off = 1 + 0.21 * (1 - torch.eye(6, dtype=torch.float64))
    high = attribution.HTAResult(ex.text, ex.tokens, ex.S * off, "x", special=ex.special)
    assert attribution.estimate_error([ex], [high])["signed_median"] > 0
    scaled = attribution.HTAResult(ex.text, ex.tokens, ex.S * 3.0, "x", special=ex.special)
    assert attribution.estimate_error([ex], [scaled])["signed_median"] == pytest.approx(0.0, abs=1e-12)


def test_block_ranks_are_the_estimators_variance():
    """r = (sum s^2)^2 / sum s^4 from the singular values; one Gaussian probe's ||B v||^2 has relative variance
    2/r (checked by sampling), so a low-rank block is estimated worse than a full-rank one."""
    g = torch.Generator().manual_seed(0)
    d, n = 6, 3
    J = torch.randn(d, n, d, generator=g, dtype=torch.float64)
    J[:, 1] = torch.outer(
        torch.randn(d, generator=g, dtype=torch.float64), torch.randn(d, generator=g, dtype=torch.float64)
    )
    r = attribution.block_ranks(J)
    for j in range(n):
        s = torch.linalg.svdvals(J[:, j])
        assert float(r[j]) == pytest.approx(float(s.pow(2).sum() ** 2 / s.pow(4).sum()))
    assert float(r[1]) == pytest.approx(1.0) and 1 < float(r[0]) <= d
    v = torch.randn(200_000, d, generator=g, dtype=torch.float64)
    for j in (0, 1):
        est = (v @ J[:, j].T).pow(2).sum(-1)  # ||B v||^2 per probe
        assert float(est.var() / est.mean() ** 2) == pytest.approx(2 / float(r[j]), rel=0.05)


def test_corpus_cache_roundtrip(tiny_lm, tmp_path):
    texts = [SENT, "Cats sat."]
    first = attribution.hta_corpus(
        tiny_lm, texts, mode="estimate", probes=4, cache=True, cache_root=tmp_path, progress=False
    )
    again = attribution.hta_corpus(
        tiny_lm, texts, mode="estimate", probes=4, cache=True, cache_root=tmp_path, progress=False
    )
    assert len(list(tmp_path.rglob("*.safetensors"))) == 2  # one entry per sentence
    for a, b in zip(first, again):
        assert torch.equal(a.S, b.S) and a.tokens == b.tokens and a.special == b.special and a.method == b.method


def test_corpus_cache_is_per_sentence(tiny_lm, tmp_path, monkeypatch):
    """A sentence cached by one call (a chapter, or the distributed job) is read by any later call that
    contains it, in another list and at another position: exact entries do not depend on the probe seed."""
    texts = [SENT, "Cats sat.", "Dogs ran far away."]
    first = attribution.hta_corpus(tiny_lm, texts[:2], mode="exact", cache=True, cache_root=tmp_path, progress=False)
    from identifiability.hta import api

    calls = []
    real = api.hta
    monkeypatch.setattr(api, "hta", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    again = attribution.hta_corpus(
        tiny_lm, [texts[2], texts[1], texts[0]], mode="exact", cache=True, cache_root=tmp_path, seed=7, progress=False
    )
    assert calls == [texts[2]]  # only the new sentence was computed
    assert torch.equal(again[2].S, first[0].S) and torch.equal(again[1].S, first[1].S)
    est = attribution.hta_corpus(tiny_lm, texts[:1], mode="estimate", probes=4, cache=True, cache_root=tmp_path)
    assert calls[-1] == texts[0] and not torch.equal(est[0].S, first[0].S)  # estimates never read exact entries


def test_pos_tags_align_with_word_pieces(tiny_lm):
    texts = ["The cat sat.", "Hundreds of people haven't vacated their homes."]
    tags = word_piece_tags(tiny_lm.tokenizer, texts)
    r = attribution.hta(tiny_lm, texts[0])
    assert len(tags[0]) == r.n_tokens
    assert tags[0] == ["[CLS]", "DET", "NOUN", "VERB", "PUNCT", "[SEP]"]
    toks = tiny_lm.tokenizer.convert_ids_to_tokens(tiny_lm.tokenizer(texts[1])["input_ids"])
    got = dict(zip(toks, tags[1]))
    assert got["hundreds"] == "NOUN" and got["vacated"] == "VERB" and got["their"] == "PRON"


def test_memory_bound_is_stated():
    lm = random_model("bert", seed=0)
    small, big = attribution.peak_bytes(lm, 16, chunk=4), attribution.peak_bytes(lm, 16, chunk=64)
    assert 0 < small < big  # the chunk size bounds the working set


# ---------------------------------------------------------------- no Altair in the computation, charts build


HTA_DIR = Path(attribution.__file__).parent


def test_hta_package_does_not_import_altair():
    """The computation is importable without Altair: neither the source nor an import pulls it in."""
    files = sorted(HTA_DIR.glob("*.py"))
    assert {f.name for f in files} >= {"__init__.py", "api.py", "core.py", "folded.py", "generic.py", "naive.py"}
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n.split(".")[0] == "altair" for n in names), f"{f.name} imports altair"
    code = (
        "import sys, importlib, pkgutil, identifiability.hta as h; "
        "[importlib.import_module('identifiability.hta.' + m.name) for m in pkgutil.iter_modules(h.__path__)]; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'altair'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _synthetic_tables():
    """Small synthetic results and the data frames chapter 6 draws from them."""
    res = [_synthetic(6, 0.6), _synthetic(9, 0.5)]
    noisy = [_noisy(r, seed=k) for k, r in enumerate(res)]
    tags = [["X", "NOUN", "VERB"] * (r.n_tokens // 3) for r in res]
    tables = {"a": attribution.token_table(res, tags), "b": attribution.token_table(noisy, tags)}
    summaries = {k: attribution.layer_summary(t) for k, t in tables.items()}
    return res, noisy, tables, summaries


def test_charts_build_on_synthetic_results():
    """Every figure function of charts/context_mixing.py returns a chart whose spec serialises."""
    res, noisy, tables, summaries = _synthetic_tables()
    prof_s, src = attribution.special_profile(res)
    prof_s["token"], src["token"] = prof_s.target, src.target
    pos = attribution.pos_summary(tables["a"], min_count=1)
    charts = {
        "estimator_scatter": hta_charts.estimator_scatter(res, noisy, probes=4, seed=0, sample=50),
        "own_share_boxes": hta_charts.own_share_boxes(summaries),
        "top_is_self_lines": hta_charts.top_is_self_lines(summaries),
        "distance_figure": hta_charts.distance_figure(attribution.distance_profile(res, max_offset=2).round(5), 2),
        "special_context": hta_charts.special_context(prof_s, src),
        "far_share_lines": hta_charts.far_share_lines({"a": attribution.window_summary(res, 1, 2)}, 2),
        "pos_lines": hta_charts.pos_lines(pos, "a"),
        "contribution_explorer": hta_charts.contribution_explorer(res, labels=["one", "two"]),
    }
    for name, chart in charts.items():
        spec = chart.to_dict()
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/"), name
    pairs = attribution.estimate_pairs(res, noisy, sample=50, seed=0)
    assert len(pairs) == 50 and (pairs.exact > 0).all() and set(pairs.layer) == {1, 2}
    far = charts["far_share_lines"].to_dict()
    assert len(far["datasets"][next(iter(far["datasets"]))]) == 2 * 2  # two layers, measured and uniform
    hta_charts.far_share_lines({"a": attribution.window_summary(res, 1, 8)}, 8).to_dict()  # no far token: empty
    own = charts["own_share_boxes"].to_dict()
    assert {row["corpus"] for row in own["datasets"][next(iter(own["datasets"]))]} == {"a", "b"}


def test_cross_segment_share_is_uniform_under_uniform_mixing():
    """Equal squared norms everywhere make every contribution 1/d_s: the other segment's share is then
    exactly its share of the tokens; single sentences are skipped."""
    from identifiability.hta import HTAResult, cross_segment

    tokens = ["[CLS]", "a", "b", "c", "[SEP]", "d", "e", "[SEP]"]
    special = [t.startswith("[") for t in tokens]
    n = len(tokens)
    pair = HTAResult("a b c ||| d e", tokens, torch.ones(3, n, n), "folded", "exact", None, 0.0, special)
    single = HTAResult(
        "a b",
        ["[CLS]", "a", "b", "[SEP]"],
        torch.ones(3, 4, 4),
        "folded",
        "exact",
        None,
        0.0,
        [True, False, False, True],
    )
    out = cross_segment([pair, single])
    assert list(out.layer) == [1, 2] and (out.pairs == 1).all()
    # receivers a, b, c see the 3 tokens after the middle [SEP]; d, e see the 5 up to it
    expected = (3 * 3 / n + 2 * 5 / n) / 5
    assert out.share.tolist() == pytest.approx([expected] * 2) and out.uniform.tolist() == pytest.approx([expected] * 2)
    assert cross_segment([single]).empty
