"""Chapter 7's studies on a tiny family of random-weight models (width 32 split into 4 heads of 8 and 2 of 16, a
second seed of the first, and their twins): the inputs pair across head widths, each model's threshold is
chapter 2's own, its paired difference chapter 3's own, the entropy of uniform attention is log d_s, and the
evidence the family gathers has the shapes the verdicts read."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from identifiability.corpus.corpora import concatenated_inputs, load_corpus
from identifiability.models.load import random_model, twin_of
from identifiability.pretrain import members as M
from identifiability.studies import effective_attention as S3
from identifiability.studies import head_width as S
from identifiability.studies import nonidentifiability as S2
from identifiability.verdicts import VERDICTS, Rules
from identifiability.verdicts import head_width as V
from identifiability.verdicts.nonidentifiability import C2_MARGIN

WIDTH, LAYERS = 32, 1
RATIOS = [0.5, 1.0, 1.25, 1.5, 2.0, 3.0]  # d_s / d_v: exact for d_v = 8 and 16; the first two below d_v + 2
GAIN = 0.1  # accuracy gain given to the "trained" members (random weights: only the bookkeeping is tested)


def _lm(heads: int, seed: int = 0):
    return random_model(
        "bert", seed=seed, hidden_size=WIDTH, num_attention_heads=heads, num_hidden_layers=LAYERS, intermediate_size=64
    )


@pytest.fixture(scope="module")
def sources(tiny_lm):
    return concatenated_inputs(load_corpus("lee"), [60] * 4, tiny_lm.tokenizer, seed=0)


@pytest.fixture(scope="module")
def family():
    """(name, loaded model, FamilyModel) for members dv8 (seeds 0, 1), dv16 and the twins of the seed-0 ones."""
    out = []
    for heads, seed in ((4, 0), (2, 0), (4, 1)):
        lm = _lm(heads, seed)
        name = f"mlm-w{WIDTH}-dv{WIDTH // heads}-seed{seed}"
        out.append((lm, M.family_model(lm, member=name, twin=False, seed=seed, accuracy_gain=GAIN)))
        if seed == 0:
            tw = twin_of(lm, seed=7)
            out.append((tw, M.family_model(tw, member=name, twin=True, seed=seed)))
    return out


@pytest.fixture(scope="module")
def offsets(family, sources):
    return [
        S.head_offset(lm, m, S.cut_inputs(sources, lm.tokenizer, S.ratio_lengths(lm.d_v, RATIOS), map(str, RATIOS)))
        for lm, m in family
    ]


def test_cut_inputs_have_their_exact_length_and_pair_across_head_widths(tiny_lm, sources):
    a = S.cut_inputs(sources, tiny_lm.tokenizer, S.ratio_lengths(8, RATIOS), [str(r) for r in RATIOS])
    b = S.cut_inputs(sources, tiny_lm.tokenizer, S.ratio_lengths(16, RATIOS), [str(r) for r in RATIOS])
    assert [len(tiny_lm.tokenizer(t)["input_ids"]) for t in a.texts] == a.lengths
    assert [len(tiny_lm.tokenizer(t)["input_ids"]) for t in b.texts] == b.lengths
    assert set(a.keys) == set(b.keys) and len(a.keys) == len(sources) * len(RATIOS)
    assert S.cut_to_tokens("A cat.", 40, tiny_lm.tokenizer) is None  # too short: left out, never padded


class _Words:
    """A tokenizer stub: one token per word plus [CLS] and [SEP], except that 'odd' decodes to two words (as a
    word piece that does not re-tokenise to itself)."""

    words = ["w0", "w1", "odd", "w3", "w4"]

    def __call__(self, text, add_special_tokens=True, verbose=False):
        ids = [self.words.index(w) if w in self.words else 99 for w in text.split()]
        return {"input_ids": [-1, *ids, -2] if add_special_tokens else ids}

    def decode(self, ids, **kw):
        return " ".join("o dd" if self.words[i] == "odd" else self.words[i] for i in ids)


def test_a_cut_that_re_tokenises_longer_is_moved_to_an_exact_one():
    tok = _Words()
    cut = S.cut_to_tokens("w0 odd w3 w4", 5, tok)  # the plain cut 'w0 odd w3' re-tokenises to 6
    assert cut == "w0 o dd" and len(tok(cut)["input_ids"]) == 5
    assert S.cut_to_tokens("odd odd odd", 4, tok, slack=0) is None  # no exact cut within the slack: left out


def test_family_model_reads_the_folders_provenance():
    """The record as pretrain.train writes provenance.json: the member, the last held-out score, the unigram's."""
    lm = _lm(4)
    member = {"name": "mlm-w32-dv8-seed1", "width": 32, "heads": 4, "seed": 1, "d_v": 8}
    record = {"kind": "pretrained-mlm", "member": member, "seed": 1, "trained_enough": True,
              "held_out": [{"accuracy": 0.06}, {"accuracy": 0.2}], "unigram": {"accuracy": 0.05}}  # fmt: skip
    m = M.family_model(lm, record)
    assert (m.name, m.member, m.d_v, m.width, m.heads, m.seed, m.twin) == (
        "mlm-w32-dv8-seed1", "mlm-w32-dv8-seed1", 8, 32, 4, 1, False
    )  # fmt: skip
    assert m.accuracy_gain == pytest.approx(0.15) and V.judged(m)
    t = M.family_model(lm, {"kind": "random-init twin", "member": member, "seed": 1})
    assert t.twin and t.name == "mlm-w32-dv8-seed1-init" and t.member == "mlm-w32-dv8-seed1"
    assert t.accuracy_gain is None and not V.judged(t)
    under = M.family_model(lm, {**record, "held_out": [{"accuracy": 0.08}], "trained_enough": False})
    assert under.accuracy_gain == pytest.approx(0.03) and not V.judged(under)


def test_head_threshold_is_chapter_2s_on_the_same_model(family, sources):
    lm, m = family[0]
    got = S.head_threshold(lm, m, sources, C2_MARGIN)
    texts = S.cut_inputs(sources, lm.tokenizer, [lm.d_v + 1]).texts
    ch2 = S2.threshold(lm, texts, 1, 0, C2_MARGIN)
    survey = S2.null_space_survey(lm, S.cut_inputs(sources, lm.tokenizer, [lm.d_v + 2]).texts, 512)
    assert got.hw_unique_share == ch2.unique_share
    assert got.hw_alternatives_at_dv2 == survey.alternatives_at_dv2 is True  # generic random heads: d_v + 2
    assert len(got.margins) == len(texts) * LAYERS * lm.n_heads and (got.margins.d_s == lm.d_v + 1).all()
    assert got.hw_threshold_sentences == len(sources) and sorted(got.margins.sentence.unique()) == [0, 1, 2, 3]
    assert got.hw_unique_share == 1.0  # random weights: every [T,1] of full rank at d_v + 1


def test_paired_difference_is_chapter_3s_on_the_same_inputs(family, sources, offsets):
    lm, m = family[0]
    inputs = S.cut_inputs(sources, lm.tokenizer, S.ratio_lengths(lm.d_v, RATIOS), [str(r) for r in RATIOS])
    fig = S3.raw_vs_effective(lm, inputs.texts, seed=0, progress=False)
    o = offsets[0]
    far = o.inputs[o.inputs.d_s >= lm.d_v + 2]
    assert o.hw_beyond_random == pytest.approx(fig.c4_beyond_random, abs=1e-12)
    assert far["sub"].mean() == pytest.approx(fig.c4.beyond.estimate, abs=1e-12)
    assert far["val"].mean() == pytest.approx(fig.c4.beyond_random_weights.estimate, abs=1e-12)
    assert o.c21.sub == fig.c4.beyond and o.c21.sub_by_heads == fig.c4.beyond_by_heads
    assert o.c21.val_by_heads.n == lm.n_heads * LAYERS and o.c21.sub.n == len(far)
    assert o.c21.val_by_heads.estimate == pytest.approx(o.c21.val.estimate)  # all heads: the same mean
    assert list(o.inputs.columns) >= ["text", "d_s", "sub", "val"] and len(o.inputs) == len(inputs.texts)


def test_entropy_of_uniform_attention_is_log_d_s_and_of_one_hot_rows_zero():
    n = 12
    assert S.attention_entropy(torch.full((2, 3, n, n), 1 / n)) == pytest.approx(math.log(n))
    assert S.attention_entropy(torch.eye(n).expand(2, 3, n, n)) == pytest.approx(0.0, abs=1e-12)


def test_offset_records_the_models_entropy(offsets):
    for o in offsets:
        assert 0 < o.hw_entropy < math.log(o.inputs.d_s.max()) + 1e-9  # at most the uniform rows' entropy
        assert o.model.entropy == o.hw_entropy and o.c21.model.entropy == o.hw_entropy


def test_c20_evidence_compares_the_head_splits_on_the_common_range(offsets):
    e = S.c20_evidence(offsets, V.FAMILY_MIN_GAIN)
    c = e.comparison
    assert c.members == ("mlm-w32-dv8-seed0", "mlm-w32-dv16-seed0")
    assert c.ratio_range == (pytest.approx(1.25), pytest.approx(3.0))  # max (d_v + 2) / d_v, min longest / d_v
    assert c.lengths == 4 and c.seeds == ("mlm-w32-dv8-seed0", "mlm-w32-dv8-seed1")
    assert len(c.pairs) == 1 and len(c.twin_pairs) == 1 and c.twin_pairs[0].first.endswith("-init")
    by = {o.model.name: o for o in offsets}

    def in_range(name):
        x = by[name].inputs
        return x[(x.ratio >= 1.25) & (x.ratio <= 3.0)].set_index("key")["sub"]

    d8, d16 = (in_range(n) for n in c.members)
    assert c.pairs[0].difference.estimate == pytest.approx(d8.mean() - d16.mean())
    assert c.d["mlm-w32-dv8-seed0"].estimate == pytest.approx(d8.mean())
    s0, s1 = (in_range(n) for n in c.seeds)
    s = c.seed_difference
    assert s.estimate == pytest.approx(abs((s0 - s1).mean())) and 0 <= s.low <= s.estimate <= s.high
    assert c.pairs[0].difference.n == len(d8) and e.with_half_width is None


def test_c20_evidence_leaves_an_undertrained_member_out(offsets):
    low = [o if o.model.d_v != 16 or o.model.twin else
           S.HeadOffset(**{**o.__dict__, "model": S.FamilyModel(**{**o.model.__dict__, "accuracy_gain": 0.0})})
           for o in offsets]  # fmt: skip
    c = S.c20_evidence(low, V.FAMILY_MIN_GAIN).comparison
    assert c.members == ("mlm-w32-dv8-seed0",) and c.pairs == ()
    assert c.ratio_range == (pytest.approx(1.25), pytest.approx(3.0))


def test_the_verdicts_read_the_family_evidence(family, sources, offsets):
    thresholds = [S.head_threshold(lm, m, sources, C2_MARGIN) for lm, m in family]
    v19 = V.c19(S.c19_evidence(thresholds), Rules("r"))
    v20 = V.c20(S.c20_evidence(offsets, V.FAMILY_MIN_GAIN), Rules("r"))
    v21 = V.c21(S.c21_evidence(offsets), Rules("r"))
    assert v19.verdict == "holds"  # random heads are generic: every model at d_v + 2
    assert {v20.verdict, v21.verdict} <= set(VERDICTS)
    assert len(v21.parts) == 5 and np.isfinite(v21.estimate)


def test_charts_draw_every_model_with_the_twins_dashed(family, sources, offsets):
    import re

    from identifiability.charts import head_width as charts

    from .test_chart_layout import dash_symbols, svg_of

    curves = S.offset_curves(offsets)
    assert set(curves.model) == {o.model.name for o in offsets}
    assert curves.groupby("model").size().tolist() == [len(RATIOS)] * len(offsets)  # one row per length
    first = offsets[0].inputs
    assert curves[curves.model == offsets[0].model.name].set_index("d_s")["sub"].to_dict() == pytest.approx(
        first.groupby("d_s")["sub"].mean().to_dict()
    )
    svg = svg_of(charts.offset_chart(curves, (1.25, 3.0)))
    dashes = [re.search(r'stroke-dasharray="([^"]*)"', s).group(1) for s in dash_symbols(svg, "model")]
    assert len(dashes) == 2 and dashes[0] != dashes[1]  # pre-trained solid, twins dashed, in the legend too
    table = S.threshold_table([S.head_threshold(lm, m, sources, C2_MARGIN) for lm, m in family[:2]])
    assert list(table.twin) == [False, True] and (table.unique_share == 1.0).all()
    spec = charts.threshold_chart(table, (0.95, 0.5)).to_dict()
    assert len(spec["layer"]) == 2


def test_sink_peaks_in_units_of_the_uniform_share():
    import torch

    from identifiability.studies.head_width import sink_peaks

    uniform = torch.full((2, 2, 4, 4), 0.25)
    assert sink_peaks([uniform]) == pytest.approx((1.0, 1.0))
    on_cls = torch.zeros(1, 1, 5, 5)
    on_cls[..., 0] = 1.0
    assert sink_peaks([on_cls, uniform]) == pytest.approx((np.median([5.0, 1.0]), np.median([0.0, 1.0])))


def test_checkpoints_in_training_order_with_the_twin_first(tmp_path):
    from identifiability.base.fileio import write_json
    from identifiability.pretrain.members import checkpoints

    member = tmp_path / "mlm-w128-dv32-seed0"
    for step in (2, 1):
        (member / "checkpoints" / f"step-{step:06d}").mkdir(parents=True)
        (member / "checkpoints" / f"step-{step:06d}" / "config.json").write_text("{}")
    (member / "checkpoints" / "step-000003").mkdir()  # no weights yet: left out
    held = [{"step": s, "tokens_seen": 100 * s} for s in (0, 1, 2, 3)]
    write_json(member / "provenance.json", {"kind": "pretrained-mlm", "held_out": held})
    assert [t for t, _ in checkpoints(member)] == [100, 200]
    (tmp_path / "mlm-w128-dv32-seed0-init").mkdir()
    (tmp_path / "mlm-w128-dv32-seed0-init" / "config.json").write_text("{}")
    got = checkpoints(member)
    assert got[0] == (0, tmp_path / "mlm-w128-dv32-seed0-init") and len(got) == 3
    assert checkpoints(tmp_path / "mlm-w128-dv32-seed0-init") == []  # a twin has no checkpoints


def test_the_training_curve_reads_inputs_past_the_threshold_from_the_first_texts():
    inp = S.CutInputs(["a", "b", "c", "d"], [0, 0, 5, 6], [33, 34, 40, 40], ["0:x", "0:y", "5:y", "6:y"])
    got = S.beyond_inputs(inp, d_v=32)
    assert got.texts == ["b", "c"] and got.keys == ["0:y", "5:y"] and got.lengths == [34, 40]
