"""Healing a re-split model by distillation (issue 55), on a tiny BERT (hidden 64, 4 heads of 16, 2 layers)
re-split at d_v = 32 and synthetic blocks of 10 tokens: the loss falls in both modes, a Ctrl-C and a rerun give
the weights of a run never stopped bit for bit, the member is a model folder ``load_model`` reads, the fidelity
of a model to itself is 1 and 1, and every stop is one line that leaves what was healed in place."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from identifiability.models import training
from identifiability.models.load import load_model, random_model
from identifiability.models.resplit import ResplitError
from identifiability.models.training import CHECKPOINT
from identifiability.pretrain.fidelity import Reference, fidelity, heldout_sentences, sentence_pairs
from identifiability.pretrain.heal import HealSettings, Original, depth_loss, heal, step_loss
from identifiability.pretrain.sources import Document, TextError

# 4 blocks of 10 tokens a step, a checkpoint every 2 steps, 6 steps
SMALL = HealSettings(width=32, tokens=6 * 40, batch_size=4, lr=3e-3, warmup_steps=2, checkpoint_tokens=80)
PAIRS = (("the cat sat", "a dog ran"), ("the cat sat on it", "the cat sat"), ("to be or not", "a dog ran home"))


def _blocks(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(2000, 3000, (n, 8), generator=g)
    return torch.cat([torch.full((n, 1), 101), x, torch.full((n, 1), 102)], 1)


@pytest.fixture(scope="module")
def original() -> Original:
    """The tiny BERT with its Q, K, V and O maps scaled up: at the initialiser's scale every attention is nearly
    uniform and small beside the residual, and re-splitting it changes next to nothing."""
    lm = random_model("bert", seed=5)
    with torch.no_grad():
        for layer in lm.model.encoder.layer:
            layer.attention.self.query.weight.mul_(12)
            layer.attention.self.key.weight.mul_(12)
            layer.attention.self.value.weight.mul_(8)
            layer.attention.output.dense.weight.mul_(8)
    return Original(lm.model, lm.tokenizer, lm.adapter, "tiny", "tiny-sharp-seed5")


@pytest.fixture(scope="module")
def reference(original) -> Reference:
    return Reference.of(original.model, original.tokenizer, _blocks(6, 9), PAIRS)


@pytest.fixture(scope="module")
def whole(original, reference, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("healed") / "m"
    heal(original, SMALL, _blocks(16, 0), out, reference, progress=False)
    return out


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def test_a_model_is_faithful_to_itself(original, reference):
    fid = fidelity(original.model, original.tokenizer, reference)
    assert len(fid.cosine) == 3  # the embeddings and 2 layers
    assert fid.worst == pytest.approx(1.0, abs=1e-6) and fid.spearman == pytest.approx(1.0)


def test_a_resplit_model_is_less_faithful(original, reference):
    from identifiability.models.resplit import resplit

    fid = fidelity(resplit(original.model, original.adapter, 8), original.tokenizer, reference)
    assert fid.cosine[0] == pytest.approx(1.0, abs=1e-6)  # the embeddings have no attention
    assert fid.last < 0.999


@pytest.mark.parametrize("mode", ["global", "layerwise"])
def test_both_modes_lower_the_loss(original, mode):
    from identifiability.models.resplit import resplit

    member = resplit(original.model, original.adapter, 32)
    opt = torch.optim.Adam(member.parameters(), lr=3e-3)
    ids = _blocks(8, 1)
    losses = []
    for _ in range(8):
        loss = step_loss(member, original.model, original.adapter, ids, mode)
        losses.append(loss.item())
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert losses[-1] < 0.7 * losses[0]


def test_the_loss_is_zero_on_the_original_and_scaled_by_the_variance():
    t = [torch.randn(2, 3, 4), 10 * torch.randn(2, 3, 4)]
    assert depth_loss(t, t) == 0
    shifted = [t[0] + 1.0, t[1] + 10.0]  # the same error relative to each depth's spread
    terms = [((m - x) ** 2).mean() / x.var() for m, x in zip(shifted, t)]
    assert depth_loss(shifted, t) == pytest.approx(float(sum(terms) / 2))


def test_the_member_is_a_model_folder_load_model_reads(whole, original, reference):
    prov = json.loads((whole / "provenance.json").read_text())
    assert prov["kind"] == "resplit-healed" and prov["heads"] == 2 and prov["width"] == 32
    assert [p["step"] for p in prov["fidelity"]] == [0, 2, 4, 6]
    assert not (whole / CHECKPOINT).exists()
    lm = load_model(str(whole))
    assert lm.model.config.num_attention_heads == 2
    fid = fidelity(lm.model, lm.tokenizer, reference)
    assert fid.as_dict()["cosine"] == pytest.approx(prov["fidelity"][-1]["cosine"], abs=1e-5)


def test_a_ctrl_c_and_a_rerun_give_the_same_weights(original, reference, whole, tmp_path):
    out = tmp_path / "m"

    def stop_after_step_3(step, total):
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as e:
        heal(original, SMALL, _blocks(16, 0), out, reference, progress=False, on_step=stop_after_step_3)
    assert "resume" in str(e.value) and "after step 2 of 6" in str(e.value)
    heal(original, SMALL, _blocks(16, 0), out, reference, progress=False)
    mine, theirs = _weights(out), _weights(whole)
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    again = heal(original, SMALL, _blocks(16, 0), out, reference, progress=False)
    assert again["already_there"]


def test_a_folder_that_holds_another_model_is_one_line_and_untouched(original, whole):
    before = _weights(whole)
    with pytest.raises(ResplitError, match="already holds another model") as e:
        heal(original, HealSettings(width=16, tokens=40, batch_size=4), _blocks(16, 0), whole, progress=False)
    assert "\n" not in str(e.value)
    assert all(torch.equal(before[k], v) for k, v in _weights(whole).items())


def test_a_truncated_checkpoint_is_one_line_and_untouched(original, tmp_path):
    out = tmp_path / "m"
    with pytest.raises(KeyboardInterrupt):
        heal(
            original,
            SMALL,
            _blocks(16, 0),
            out,
            progress=False,
            on_step=lambda s, t: (_ for _ in ()).throw(KeyboardInterrupt),
        )
    tensors = next((out / CHECKPOINT).glob("*.safetensors"))
    tensors.write_bytes(tensors.read_bytes()[:100])
    with pytest.raises(ResplitError, match="corrupt or missing") as e:
        heal(original, SMALL, _blocks(16, 0), out, progress=False)
    assert "\n" not in str(e.value)
    assert len(tensors.read_bytes()) == 100


def test_a_full_disk_at_a_checkpoint_keeps_the_previous_one(original, whole, tmp_path, monkeypatch):
    out = tmp_path / "m"
    real, calls = training.save_file, []

    def full_at_the_third(tensors, path, metadata=None):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(tensors, path, metadata=metadata)

    monkeypatch.setattr(training, "save_file", full_at_the_third)
    with pytest.raises(ResplitError, match="disk is full.*step 2.* intact") as e:
        heal(original, SMALL, _blocks(16, 0), out, progress=False)
    assert "\n" not in str(e.value)
    assert json.loads((out / CHECKPOINT / "state.json").read_text())["step"] == 2
    monkeypatch.setattr(training, "save_file", real)
    heal(original, SMALL, _blocks(16, 0), out, progress=False)
    mine, theirs = _weights(out), _weights(whole)
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)


def test_a_second_run_into_the_same_folder_is_one_line(original, tmp_path):
    out = tmp_path / "m"
    inner = []

    def second_run(step, total):
        if not inner:
            with pytest.raises(ResplitError, match="another run is healing") as e:
                heal(original, SMALL, _blocks(16, 0), out, progress=False)
            inner.append(str(e.value))

    heal(original, SMALL, _blocks(16, 0), out, progress=False, on_step=second_run)
    assert inner and "\n" not in inner[0]


def test_bad_settings_are_one_line(original, tmp_path):
    with pytest.raises(ResplitError, match="--mode must be one of global, layerwise"):
        heal(original, HealSettings(width=32, mode="both"), _blocks(16, 0), tmp_path / "m", progress=False)
    with pytest.raises(ResplitError, match="does not divide"):
        heal(original, HealSettings(width=24, tokens=40, batch_size=4), _blocks(16, 0), tmp_path / "n", progress=False)


def test_held_out_sentences_and_pairs():
    docs = [
        Document("s", str(i), "One two three four five. Six seven eight nine ten eleven! Short.") for i in range(50)
    ]
    docs[49] = Document("s", "held", "Alpha beta gamma delta epsilon. Zeta eta theta iota kappa lambda! Tiny.")
    assert heldout_sentences(docs) == ["Alpha beta gamma delta epsilon.", "Zeta eta theta iota kappa lambda!"]
    pairs = sentence_pairs([f"sentence {i}" for i in range(10)], n=45, seed=0)
    assert len(set(pairs)) == 45 and all(a < b for a, b in pairs)  # every pair of the 10, each once
    assert sentence_pairs([f"s{i}" for i in range(10)], n=5, seed=1) == sentence_pairs(
        [f"s{i}" for i in range(10)], 5, 1
    )
    with pytest.raises(TextError, match="need at least 11 distinct sentences; the text holds 10"):
        sentence_pairs([f"sentence {i}" for i in range(10)], n=46)
