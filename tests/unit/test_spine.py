"""The spine: model loading, the adapter registry and its rebuild check, extraction, corpora."""

import pytest
import torch

from identifiability.corpus import corpora
from identifiability.models import adapters, trace
from identifiability.models.load import ModelNotAvailable, load_model, random_model


def test_every_architecture_passes_rebuild_check(tiny_any):
    assert tiny_any.provenance["rebuild_rel_error"] <= 1e-5


def test_rebuild_check_catches_a_wrong_adapter():
    # Point W_O at the query projection instead: one d x d module per layer, the right shapes, the wrong
    # numbers; the check must fail on the rebuilt output, not on a module count or a shape.
    import dataclasses

    lm = random_model("bert", seed=0)
    lm.adapter = dataclasses.replace(
        lm.adapter, family="broken", attn_out=r"encoder\.layer\.\d+\.attention\.self\.query"
    )
    with pytest.raises(RuntimeError, match="failed the rebuild check"):
        trace.rebuild_check(lm)


def test_layer_patterns_match_one_module_per_layer(tiny_any):
    a, m = tiny_any.adapter, tiny_any.model
    for field in ("query", "key", "value", "attn_out", "ln_attn", "ffn_in", "ffn_act", "ffn_out", "ln_ffn"):
        assert len(a.layer_modules(m, getattr(a, field), tiny_any.n_layers)) == tiny_any.n_layers


def test_the_old_glob_pattern_matched_two_modules_per_layer(tiny_lm):
    import fnmatch

    names = [n for n, _ in tiny_lm.model.named_modules()]
    glob = [n for n in names if fnmatch.fnmatchcase(n, "encoder.layer.*.output.dense")]
    assert "encoder.layer.0.attention.output.dense" in glob and len(glob) == 2 * tiny_lm.n_layers
    regex = tiny_lm.adapter.find(tiny_lm.model, tiny_lm.adapter.ffn_out)
    assert len(regex) == tiny_lm.n_layers


def test_a_pattern_matching_too_many_modules_is_named(tiny_lm):
    with pytest.raises(LookupError, match="matches 4 modules for 2 layers"):
        tiny_lm.adapter.layer_modules(tiny_lm.model, r"encoder\.layer\.\d+\.(attention\.)?output\.dense", 2)


def test_trace_shapes_and_padding(tiny_lm, sentences):
    trs = trace.trace_sentences(tiny_lm, sentences, progress=False)
    L, H = tiny_lm.n_layers, tiny_lm.n_heads
    for tr, text in zip(trs, sentences):
        S = tr.n_tokens
        assert tr.text == text and tr.tokens[0] == "[CLS]" and tr.tokens[-1] == "[SEP]"
        assert tr.attentions.shape == (L, H, S, S)
        assert tr.values.shape == (L, H, S, tiny_lm.d_v)
        assert tr.hidden.shape == (L + 1, S, tiny_lm.d_model)
        torch.testing.assert_close(tr.attentions.sum(-1), torch.ones(L, H, S))
        # Batched with padding == alone without padding.
        alone = trace.trace_batch(tiny_lm, [text])[0]
        torch.testing.assert_close(alone.hidden, tr.hidden, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(alone.attentions, tr.attentions, atol=1e-6, rtol=1e-4)


def test_head_transforms_rebuild_layer_output(tiny_any, sentences):
    # sum_h A_h T_h + b_O is the attention block's output, as the model itself computes it.
    tr = trace.trace_batch(tiny_any, sentences[:1])[0]
    T = trace.head_transforms(tr, trace.out_proj_weights(tiny_any))  # (L, H, S, d)
    rebuilt = (tr.attentions @ T).sum(1) + tiny_any.adapter.out_proj_bias(tiny_any.model, tiny_any.n_layers)[:, None]
    f = trace.forward(tiny_any, trace.tokenize(tiny_any, sentences[:1]), attn_out=True)
    own = torch.stack(f.attn_out)[:, 0]  # (L, S, d)
    torch.testing.assert_close(rebuilt, own, atol=1e-5, rtol=1e-4)
    wrong = T.sum(1)  # each token attending only to itself: same values, another output
    assert (wrong - own).abs().max() > 100 * (rebuilt - own).abs().max()


def test_unsupported_architecture_names_supported_ones():
    with pytest.raises(adapters.UnsupportedArchitecture, match="supported: .*bert.*gpt2"):
        adapters.adapter_for("t5")


def test_unknown_model_offline_says_what_to_do(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotAvailable, match="embedded default"):
        load_model("no-such-org/no-such-model-xyz")


def test_local_path_roundtrip(tmp_path, tiny_lm, sentences):
    tiny_lm.model.save_pretrained(tmp_path, safe_serialization=True)
    tiny_lm.tokenizer.save_pretrained(tmp_path)
    lm = load_model(str(tmp_path))
    assert lm.provenance["sha256"] and lm.n_layers == tiny_lm.n_layers
    a = trace.trace_batch(lm, sentences[:1])[0]
    b = trace.trace_batch(tiny_lm, sentences[:1])[0]
    torch.testing.assert_close(a.hidden, b.hidden)


def test_local_path_without_safetensors_is_refused(tmp_path, tiny_lm):
    tiny_lm.model.config.save_pretrained(tmp_path)
    tiny_lm.tokenizer.save_pretrained(tmp_path)
    (tmp_path / "pytorch_model.bin").write_bytes(b"not loaded: pickles are never opened")
    with pytest.raises(ModelNotAvailable, match="safetensors"):
        load_model(str(tmp_path))


def test_long_sentence_is_truncated_with_warning(tiny_lm):
    long = " ".join(["word"] * 300)
    with pytest.warns(UserWarning, match="truncated"):
        tr = trace.trace_batch(tiny_lm, [long], max_tokens=64)[0]
    assert tr.n_tokens == 64


def test_corpora_embedded_and_errors(tmp_path):
    lee = corpora.load_corpus("lee")
    assert 2500 < len(lee) < 2800 and lee.sentences[0].startswith("Hundreds of people")
    pol = corpora.load_corpus("polarity")
    assert len(pol) == 200 and set(pol.labels) == {"pos", "neg"}
    with pytest.raises(corpora.CorpusError, match="unknown corpus"):
        corpora.load_corpus("no_such_corpus")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(corpora.CorpusError, match="no sentences"):
        corpora.load_corpus(str(empty))
    f = tmp_path / "mine.txt"
    f.write_text("One sentence.\nAnother one here.\n")
    assert corpora.load_corpus(str(f)).sentences == ["One sentence.", "Another one here."]


def test_sampling_is_deterministic():
    lee = corpora.load_corpus("lee")
    a = corpora.sample_sentences(lee, 5, seed=3)
    assert a == corpora.sample_sentences(lee, 5, seed=3)
    assert a != corpora.sample_sentences(lee, 5, seed=4)


def test_split_sentences_keeps_abbreviations():
    assert corpora.split_sentences("Mr. Smith went to Washington. He said no.") == [
        "Mr. Smith went to Washington.",
        "He said no.",
    ]
