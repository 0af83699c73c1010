"""Token identity and angle/magnitude: probes, lookups, chance levels, splits, charts (tiny random models)."""

import ast
import math
from pathlib import Path

import pytest
import torch

from identifiability import identity as ident
from identifiability.charts import angle_magnitude as am_charts
from identifiability.charts import token_identity as charts
from identifiability.corpus.corpora import load_corpus, sample_sentences


@pytest.fixture(scope="module")
def texts(tiny_lm):
    return sample_sentences(load_corpus("lee"), 60, seed=0, tokenizer=tiny_lm.tokenizer, min_tokens=6, max_tokens=40)


@pytest.fixture(scope="module")
def hs(tiny_lm, texts):
    return ident.hidden_states(tiny_lm, texts, "lee", cache=False, progress=False)


@pytest.fixture(scope="module")
def splits(hs):
    return ident.make_splits(hs, seed=0)


FAST = dict(epochs=4, batch_size=256, mlp_hidden=32, patience=2)


def test_hidden_states_layout(tiny_lm, texts, hs):
    assert hs.hidden.shape[0] == tiny_lm.n_layers + 1 and hs.d == tiny_lm.d_model
    assert hs.n_sentences == len(texts)
    assert torch.equal(hs.hidden[0], hs.x)
    # positions restart at 0 in every sentence and are contiguous
    for s in range(3):
        pos = hs.position[hs.sentence == s]
        assert torch.equal(pos, torch.arange(pos.numel()))
    # special tokens are the ones the tokenizer says (first and last of each BERT sentence here)
    first = hs.position == 0
    assert bool(hs.special[first].all())


def test_hidden_states_match_padded_batches(tiny_lm, texts):
    """Batching (and its padding) must not change a sentence's hidden states."""
    a = ident.extract_hidden(tiny_lm, texts[:6], batch_size=6, progress=False)
    b = ident.extract_hidden(tiny_lm, texts[:6], batch_size=1, progress=False)
    assert torch.allclose(a.hidden, b.hidden, atol=1e-5)


def test_split_never_shares_a_sentence(hs):
    idx = ident.split_by_sentence(hs.n_sentences, seed=3)
    sets = [set(v.tolist()) for v in idx.values()]
    assert sum(len(s) for s in sets) == hs.n_sentences
    assert not (sets[0] & sets[1]) and not (sets[0] & sets[2]) and not (sets[1] & sets[2])
    sp = ident.make_splits(hs, seed=3)
    tok_sets = [set(sp[k].sentence.tolist()) for k in ("train", "val", "test")]
    assert not (tok_sets[0] & tok_sets[2]) and not (tok_sets[0] & tok_sets[1]) and not (tok_sets[1] & tok_sets[2])
    assert ident.split_by_sentence(hs.n_sentences, seed=3)["test"].tolist() == idx["test"].tolist()  # fixed seed
    assert not bool(sp["test"].key.numel() == 0)
    with pytest.raises(ValueError):
        ident.split_by_sentence(2)


def test_naive_identifies_everything_at_layer0(splits):
    naive = ident.fit_probes(splits["train"], splits["val"], ident.probe_config("naive"))
    rates, nb = ident.evaluate(naive, splits["test"], candidate_sets=("sentence", "all"))
    r0 = rates[rates.layer == 0]
    assert len(r0) == 4 and (r0.rate == 1.0).all()
    assert (rates.chance < 0.2).all()
    # the neighbour table's k=0 row is the rate itself, and shares over all k never exceed 1
    k0 = nb[(nb.offset == 0)].set_index(["layer", "lookup"]).share
    rs = rates[rates.candidates == "sentence"].set_index(["layer", "lookup"]).rate
    assert (k0 - rs.loc[k0.index]).abs().max() < 1e-12
    assert (nb.groupby(["layer", "lookup"]).share.sum() <= 1 + 1e-9).all()


def test_lookups_match_brute_force(splits):
    d = splits["test"]
    g = torch.Generator().manual_seed(0)
    q = torch.randn(d.n, d.targets.shape[1], generator=g)
    layout = ident.SentenceLayout(d.sentence, d.position)
    for lookup in ident.LOOKUPS:
        fast = ident.nearest_in_sentence(q, d.targets, layout, lookup)
        fast_all = ident.nearest_in_set(q, d.targets, d.key, lookup, chunk=7)
        for i in range(0, d.n, 5):
            same = (d.sentence == d.sentence[i]).nonzero().flatten()
            if lookup == "l2":
                j = same[(d.targets[same] - q[i]).norm(dim=-1).argmin()]
                jall = (d.targets - q[i]).norm(dim=-1).argmin()
            else:
                j = same[torch.nn.functional.cosine_similarity(d.targets[same], q[i][None]).argmax()]
                jall = torch.nn.functional.cosine_similarity(d.targets, q[i][None]).argmax()
            assert int(fast[i]) == int(j)
            assert int(d.key[fast_all[i]]) == int(d.key[jall])


def test_chance_levels():
    sent = torch.tensor([0, 0, 1, 1, 1, 1])
    pos = torch.tensor([0, 1, 0, 1, 2, 3])
    lay = ident.SentenceLayout(sent, pos)
    assert math.isclose(ident.chance_in_sentence(lay), (2 * 0.5 + 4 * 0.25) / 6)
    keys = torch.tensor([5, 6, 5, 7, 8, 9])  # key 5 twice: both tokens share an input embedding
    assert math.isclose(ident.chance_in_set(keys), (2 / 6 + 1 / 6 + 2 / 6 + 3 / 6) / 6)
    oc = ident.offset_chance(lay, pos, [-1, 1, 3])
    assert math.isclose(oc[1], (0.5 + 3 * 0.25) / 6)
    assert math.isclose(oc[3], 0.25 / 6)
    assert math.isclose(oc[-1], oc[1])


def test_random_guess_matches_chance(splits):
    """A map that ignores its input scores at the computed chance level (averaged over seeds)."""
    d = splits["test"]
    layout = ident.SentenceLayout(d.sentence, d.position)
    rates = []
    for s in range(30):
        q = torch.randn(d.n, d.targets.shape[1], generator=torch.Generator().manual_seed(s))
        hits = ident.nearest_in_sentence(q, d.targets, layout, "cos") == torch.arange(d.n)
        rates.append(float(hits.double().mean()))
    ch = ident.chance_in_sentence(layout)
    assert abs(sum(rates) / len(rates) - ch) < 0.25 * ch


def test_probe_learns_and_random_labels_stay_at_chance(hs):
    """Layer 1 of a random model: a trained linear map identifies far above chance; the same map trained on
    shuffled targets does not beat chance on held-out sentences."""
    sp = ident.make_splits(hs, seed=1)
    cfg = ident.probe_config("linear", epochs=15, batch_size=128, patience=15)
    real = ident.train_probes(sp["train"], sp["val"], [1, 1], ["l2", "cos"], cfg, progress=False)
    perm = torch.randperm(sp["train"].n, generator=torch.Generator().manual_seed(0))
    fake = ident.train_probes(
        sp["train"], sp["val"], [1, 1], ["l2", "cos"], cfg, targets=sp["train"].targets[perm], progress=False
    )
    r_real, _ = ident.evaluate(real, sp["test"], candidate_sets=("sentence",))
    r_fake, _ = ident.evaluate(fake, sp["test"], candidate_sets=("sentence",))
    chance = float(r_real.chance.iloc[0])
    n = sp["test"].n
    sd = math.sqrt(chance * (1 - chance) / n)
    assert r_real.rate.min() > 0.8
    assert r_fake.rate.max() < chance + 4 * sd + 0.02, (r_fake.rate.tolist(), chance)


def test_batched_training_equals_separate(splits):
    """Training probes side by side gives each exactly what training it alone gives (early stopping too)."""
    cfg = ident.probe_config("mlp", epochs=4, batch_size=64, mlp_hidden=16, patience=1)
    both = ident.train_probes(splits["train"], splits["val"], [0, 2], ["l2", "cos"], cfg, progress=False)
    alone = ident.train_probes(splits["train"], splits["val"], [2], ["cos"], cfg, progress=False)
    out_both = ident.apply_probes(both.probe, splits["test"].inputs, [0, 2])
    out_alone = ident.apply_probes(alone.probe, splits["test"].inputs, [2])
    assert torch.allclose(out_both[1], out_alone[0], atol=1e-5)
    assert both.history["best_epoch"][1] == alone.history["best_epoch"][0]
    assert both.history["stop_epoch"][1] == alone.history["stop_epoch"][0]


def test_a_linear_map_starts_at_least_squares_and_the_l2_probe_keeps_it(splits):
    """The least-squares affine map is the L2 loss's minimum on the training tokens: the probe starts there
    (epoch 0), and the L2 probe's training error cannot fall below it."""
    cfg = ident.probe_config("linear", epochs=4, batch_size=128, patience=2)
    tp = ident.train_probes(splits["train"], splits["val"], [2], ["l2"], cfg, progress=False)
    train = splits["train"]
    e = torch.cat([train.inputs[2], torch.ones(train.n, 1)], 1).double()
    ls = e @ torch.linalg.lstsq(e, train.targets.double(), driver="gelsd").solution
    fitted = ident.apply_probes(tp.probe, train.inputs, [2])[0].double()
    err_ls = float(((ls - train.targets) ** 2).sum(-1).mean())
    err = float(((fitted - train.targets) ** 2).sum(-1).mean())
    assert err >= err_ls * (1 - 1e-4)
    start = ident.ProbeConfig(kind="linear", epochs=0)
    at0 = ident.train_probes(train, splits["val"], [2], ["l2"], start, progress=False)
    out0 = ident.apply_probes(at0.probe, train.inputs, [2])[0].double()
    assert torch.allclose(out0, ls, atol=1e-3 * float(ls.abs().max()))


def test_early_stopping_counts_only_improvements_of_min_delta(splits):
    """With min_delta = 1 no validation loss can improve on half of itself: every probe keeps its initial
    weights (best epoch 0) and stops after `patience` epochs, which counts as stopping early."""
    cfg = ident.ProbeConfig(kind="mlp", hidden=8, epochs=10, batch_size=128, patience=2, min_delta=1.0)
    tp = ident.train_probes(splits["train"], splits["val"], [0, 1], ["l2", "cos"], cfg, progress=False)
    assert tp.history["best_epoch"] == [0, 0] and tp.history["stop_epoch"] == [2, 2]
    assert tp.stopped_early(0) and tp.stopped_early(1)
    capped = ident.train_probes(
        splits["train"], splits["val"], [1], ["cos"], ident.ProbeConfig(kind="mlp", hidden=8, epochs=2), progress=False
    )
    assert capped.history["stop_epoch"] == [2] and not capped.stopped_early(0)


def test_the_validation_rate_per_epoch_is_the_kept_weights_rate(splits):
    cfg = ident.probe_config("linear", epochs=6, batch_size=128, patience=2)
    tp = ident.train_probes(splits["train"], splits["val"], [1, 2], ["cos", "cos"], cfg, progress=False)
    h = tp.history
    assert len(h["val_rate"]) == len(h["val_loss"]) == h["epochs"] + 1  # epoch 0: the initial weights
    rates, _ = ident.evaluate(tp, splits["val"], ("cos",), offsets=())
    for p in range(2):
        assert rates.rate.iloc[p] == pytest.approx(h["val_rate"][h["best_epoch"][p]][p])
    curves = ident.rate_curves({"linear": tp})
    assert len(curves) == sum(s + 1 for s in h["stop_epoch"])  # each curve ends where its probe stopped
    assert ident.levels_off([0.2, 0.9, 0.995, 0.99, 0.992]) == 2 and ident.levels_off([0.5, 0.9]) == 1


def test_training_is_deterministic(splits):
    cfg = ident.probe_config("linear", epochs=2, batch_size=128)
    a = ident.train_probes(splits["train"], splits["val"], [1], ["cos"], cfg, progress=False)
    b = ident.train_probes(splits["train"], splits["val"], [1], ["cos"], cfg, progress=False)
    assert torch.equal(a.probe.w, b.probe.w)


def test_rescaling_and_unit_variant(hs, splits):
    naive = {"naive": ident.fit_probes(splits["train"], splits["val"], ident.probe_config("naive"))}
    plain = ident.evaluate(naive["naive"], splits["test"], offsets=())[0]
    scaled = ident.rescaled_rates(naive, splits["test"], max_factor=10.0)
    cos_plain = plain[plain.lookup == "cos"].rate.to_numpy()
    cos_scaled = scaled[scaled.lookup == "cos"].rate.to_numpy()
    assert (cos_plain == cos_scaled).all()  # the cosine lookup of the identity map only sees the angle
    # ... while the L2 lookup sees the length: x_0 scaled by 3 lands nearest to the longer x_1
    cand = torch.tensor([[1.0, 0.0], [3.0, 0.5]])
    lay = ident.SentenceLayout(torch.tensor([0, 0]), torch.tensor([0, 1]))
    q = cand * torch.tensor([[3.0], [1.0]])
    assert ident.nearest_in_sentence(q, cand, lay, "l2").tolist() == [1, 1]
    assert ident.nearest_in_sentence(q, cand, lay, "cos").tolist() == [0, 1]
    unit = ident.make_splits(hs, seed=0, variant="unit")
    nu = ident.fit_probes(unit["train"], unit["val"], ident.probe_config("naive"))
    ru = ident.evaluate(nu, unit["test"], offsets=())[0]
    # on unit vectors the two lookups rank identically, and equal the raw cosine lookup
    assert (ru[ru.lookup == "l2"].rate.to_numpy() == ru[ru.lookup == "cos"].rate.to_numpy()).all()
    assert (ru[ru.lookup == "cos"].rate.to_numpy() == cos_plain).all()
    norm = ident.make_splits(hs, seed=0, variant="norm")
    assert norm["train"].inputs.shape[-1] == 1
    assert torch.allclose(norm["train"].inputs[..., 0], norm["train"].raw.norm(dim=-1))


def test_norms_and_angles(splits):
    a = ident.angle_summary(splits["test"])
    assert a.loc[0, "median"] < 1e-2 and a.loc[0, "q95"] < 0.1  # e^0 = x: zero angle
    assert a.loc[0, "closest_share"] == 1.0
    # one row per hidden state, and at every layer e_i^l points closer to its own x_i than, on average, to
    # the other tokens' x_j of its sentence (a random model keeps identity, as the naive rate shows)
    assert len(a) == splits["test"].raw.shape[0]
    assert (a.other_mean > a["median"]).all(), a[["layer", "median", "other_mean"]]
    n = ident.norm_summary(splits["test"])
    x_norm = splits["test"].targets.norm(dim=-1)
    assert math.isclose(n.loc[0, "median"], float(x_norm.median()), rel_tol=1e-3)
    h = ident.norm_histograms(splits["test"], bins=10)
    assert h.groupby("layer").share.sum().between(0.999, 1.001).all()


def test_every_entry_point_on_every_architecture(tiny_any, texts):
    """Extraction, splits, training, evaluation, generalisation, ablations, summaries and charts run on
    every registered family (causal GPT-2 included)."""
    hs = ident.hidden_states(tiny_any, texts[:30], "lee", cache=False, progress=False)
    assert hs.hidden.shape[-1] == hs.x.shape[-1] == tiny_any.d_model
    sp = ident.make_splits(hs, seed=0)
    probes = ident.train_all(sp, epochs=2, batch_size=256, mlp_hidden=16, progress=False)
    rates, nb = ident.evaluate_all(probes, sp)
    assert set(rates.mapping) == set(ident.MAPPINGS) and set(rates.split) == {"train", "test"}
    naive0 = rates[(rates.mapping == "naive") & (rates.layer == 0)]
    assert (naive0.rate == 1.0).all()
    gen = ident.generalisation(probes["linear"], sp["test"])
    assert len(gen) == len(probes["linear"].layers) * (tiny_any.n_layers + 1) * 2
    resc = ident.rescaled_rates(probes, sp["test"], 4.0)
    assert resc.rate.between(0, 1).all()
    for variant in ("unit", "norm"):
        v = ident.make_splits(hs, seed=0, variant=variant)
        tp = ident.train_all(v, kinds=("mlp",), epochs=1, mlp_hidden=8, progress=False)
        assert ident.evaluate(tp["mlp"], v["test"])[0].rate.between(0, 1).all()
    assert len(ident.angle_summary(sp["test"])) == tiny_any.n_layers + 1
    ident.norm_summary(sp["test"]), ident.norm_histograms(sp["test"])
    summary = ident.training_summary(probes)
    assert len(summary) == 2 * 2 * (tiny_any.n_layers + 1)
    assert ident.nested(rates[rates.split == "test"], ["mapping", "loss", "lookup", "candidates"], "rate")
    for chart in (
        charts.rate_chart(rates, "t", 0.93),
        charts.overlay_chart(rates[rates.split == "test"].assign(series="a"), "t"),
        charts.generalisation_chart(gen, "t"),
        charts.neighbour_chart(nb, "t"),
    ):
        assert chart.to_dict()


def test_cached_probes_round_trip(splits, tmp_path, monkeypatch):
    monkeypatch.setenv("IDENTIFIABILITY_DATA", str(tmp_path))
    cfg = ident.probe_config("linear", epochs=2, batch_size=256)
    key = {"model": "tiny", "test": 1}
    a = ident.fit_probes(splits["train"], splits["val"], cfg, cache_key=key, progress=False)
    b = ident.fit_probes(splits["train"], splits["val"], cfg, cache_key=key, progress=False)
    assert b.history.get("cached") and not a.history.get("cached")
    assert list((tmp_path / "cache").rglob("*.safetensors"))  # under the data folder it was told
    assert torch.equal(a.probe.w, b.probe.w) and a.history["best_epoch"] == b.history["best_epoch"]


def test_predict_agrees_with_evaluate(splits):
    cfg = ident.probe_config("mlp", epochs=2, batch_size=256, mlp_hidden=16)
    tp = ident.fit_probes(splits["train"], splits["val"], cfg, progress=False)
    rates, _ = ident.evaluate(tp, splits["test"], candidate_sets=("sentence", "all"), offsets=())
    d = splits["test"]
    for cands in ("sentence", "all"):
        rows = ident.predict(tp, d, layer=2, loss="cos", lookup="l2", candidates=cands)
        r = rates[(rates.layer == 2) & (rates.loss == "cos") & (rates.lookup == "l2") & (rates.candidates == cands)]
        assert abs(float((d.key[rows] == d.key).double().mean()) - float(r.rate.iloc[0])) < 1e-12


def test_identity_does_not_import_altair():
    """The computations stay free of Altair: every chart lives in identifiability.charts (token_identity and
    angle_magnitude)."""
    root = Path(ident.__file__).parent
    files = sorted(root.glob("*.py"))
    assert {f.stem for f in files} >= {"__init__", "hidden", "data", "probes", "lookup", "evaluation", "geometry"}
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module or ""]
            else:
                continue
            assert not any(
                m == "altair" or m.startswith("altair.") or m.endswith("charts") or ".charts." in m for m in mods
            ), (f.name, mods)


def test_every_chart_renders(hs, splits):
    """Each chart function of charts/token_identity.py and charts/angle_magnitude.py (chapters 4 and 5) builds a
    chart whose Vega-Lite spec serialises."""
    probes = ident.train_all(splits, epochs=1, batch_size=256, mlp_hidden=16, progress=False)
    rates, nb = ident.evaluate_all(probes, splits)
    test = rates[rates.split == "test"]
    gen = ident.generalisation(probes["linear"], splits["test"])
    abl = ident.ablation_study(hs, splits, probes, epochs=1, mlp_hidden=8, progress=False)
    made = {
        "rate_chart": charts.rate_chart(rates, "t", paper_value=0.93, paper_label="paper"),
        "overlay_chart": charts.overlay_chart(test.assign(series="a"), "t"),
        "generalisation_chart": charts.generalisation_chart(gen, "t"),
        "neighbour_chart": charts.neighbour_chart(nb, "t"),
        "combo_chart": am_charts.combo_chart(test[test.candidates == "sentence"], "t"),
        "ablation_chart": am_charts.ablation_chart(abl, "t"),
        "norm_chart": am_charts.norm_chart(
            ident.norm_summary(splits["test"]), ident.norm_histograms(splits["test"]), "t"
        ),
        "angle_chart": am_charts.angle_chart(ident.angle_summary(splits["test"]), "t"),
        "epochs_chart": charts.epochs_chart(ident.rate_curves(probes), "t"),
    }
    public = {n for m in (charts, am_charts) for n, v in vars(m).items() if callable(v) and n.endswith("_chart")}
    assert public == set(made)
    for name, chart in made.items():
        spec = chart.to_dict()
        assert spec and "$schema" in spec, name


def test_the_rate_chart_draws_the_untrained_twin_beside_the_chosen_probe(hs, splits):
    """The twin's curve is the same probe (the chart's menus filter it too), on test sentences only, in the
    twin's colour; without a twin nothing of it is drawn."""
    import json

    probes = ident.train_all(splits, epochs=1, batch_size=256, mlp_hidden=16, progress=False)
    rates, _ = ident.evaluate_all(probes, splits)
    twin = rates.assign(rate=rates.rate * 0.5)
    spec = json.dumps(charts.rate_chart(rates, "t", twin=twin).to_dict())
    plain = json.dumps(charts.rate_chart(rates, "t").to_dict())
    assert charts.TWIN_COLOUR in spec and charts.TWIN_COLOUR not in plain and "untrained twin" in spec
    layers = charts.rate_chart(rates, "t", twin=twin).to_dict()["layer"]
    drawn = [x for x in layers if x.get("mark", {}).get("color") == charts.TWIN_COLOUR]
    assert len(drawn) == 1 and drawn[0]["transform"][0]["filter"], "the twin's curve ignores the menus"
    data = charts.rate_chart(rates, "t", twin=twin).to_dict()["datasets"]
    halves = [rows for rows in data.values() if rows and "split" not in rows[0] and "candidates" in rows[0]]
    assert halves and len(halves[0]) == int((rates.split == "test").sum())


def test_unseen_shares_keeps_only_word_types_the_training_split_lacks(splits):
    train, test = splits["train"], splits["test"]
    ids = torch.unique(test.sentence)
    per_token = [test.token_id[test.sentence == s].numpy() for s in ids]  # each token's own id as its value
    groups, n = ident.unseen_shares(train, test, per_token)
    seen = set(train.token_id.tolist())
    unseen_ids = [t for t in test.token_id.tolist() if t not in seen]
    assert n == len(unseen_ids) > 0
    assert sorted(int(v) for g in groups for v in g) == sorted(unseen_ids)
    assert all(len(g) for g in groups)
    # a training split holding every test type leaves nothing unseen
    assert ident.unseen_shares(test, test, per_token) == ([], 0)
