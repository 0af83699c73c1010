"""Masked-LM pre-training of the family's members, on tiny members (width 16, 2 layers) and synthetic blocks of
8 tokens with the real tokenizer: identical starts across head splits, the head applied at masked positions
only, BERT's masks, a resumed run equal to an uninterrupted one bit for bit, the saved folders (model, twin,
checkpoints) loadable, and each stop one line before any work."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from identifiability import cli
from identifiability.base import stops
from identifiability.models import training
from identifiability.models.load import load_model
from identifiability.pretrain import jobs
from identifiability.pretrain.family import MEMBERS, Member
from identifiability.pretrain.mlm import (
    PretrainError,
    build_model,
    generator,
    load_tokenizer,
    mask_blocks,
    masked_logits,
    special_ids,
)
from identifiability.pretrain.train import CHECKPOINT, CHECKPOINTS, Settings, train_member

TINY = Member(16, 2, layers=2)
# 4 blocks of 8 tokens a step, a checkpoint every 2 steps, 6 steps
SMALL = Settings(tokens=6 * 32, positions=8, batch_size=4, checkpoint_tokens=64)


def _blocks(n: int, seed: int) -> torch.Tensor:
    """(n, 8) [CLS] + 6 tokens + [SEP]; the tokens skewed (token 2000, "to", is the most frequent) and the last
    one a copy of the first, something a model can learn and a unigram cannot."""
    g = torch.Generator().manual_seed(seed)
    x = torch.multinomial(torch.tensor([0.6**k for k in range(30)]), n * 6, replacement=True, generator=g).view(n, 6)
    x = x + 2000
    x[:, -1] = x[:, 0]
    return torch.cat([torch.full((n, 1), 101), x, torch.full((n, 1), 102)], 1)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


@pytest.fixture(scope="module")
def data() -> tuple[torch.Tensor, torch.Tensor]:
    return _blocks(24, 0), _blocks(8, 1)


@pytest.fixture(scope="module")
def whole(tokenizer, data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "whole"
    train_member(TINY, *data, out, SMALL, progress=False, tokenizer=tokenizer)
    return out


def _tensors(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


class Stop(Exception):
    pass


def _stop_after(k: int):
    def on_step(step: int, total: int) -> None:
        if step == k:
            raise Stop

    return on_step


# -- the model -----------------------------------------------------------------------------------------------


def test_members_of_one_seed_and_width_start_from_identical_weights_whatever_their_heads(tokenizer):
    two, four = build_model(TINY, tokenizer, 8), build_model(Member(16, 4, layers=2), tokenizer, 8)
    assert four.config.num_attention_heads == 4 and two.config.num_attention_heads == 2
    assert _same(two.state_dict(), four.state_dict())
    other_seed = build_model(Member(16, 2, seed=1, layers=2), tokenizer, 8)  # the control: the seed matters
    assert not _same(two.state_dict(), other_seed.state_dict())


def test_the_config_is_the_members_with_the_real_tokenizers_vocabulary(tokenizer):
    config = build_model(Member(64, 2), tokenizer).config
    assert (config.hidden_size, config.num_attention_heads, config.num_hidden_layers) == (64, 2, 4)
    assert (config.intermediate_size, config.max_position_embeddings, config.vocab_size) == (256, 256, 30522)
    assert config._attn_implementation == "sdpa"  # trained with the fused kernel; the chapters load it eager


def test_the_fused_attention_trained_with_computes_what_eager_attention_does(tokenizer, data):
    model = build_model(TINY, tokenizer, 8).eval()
    blocks = data[0][:4]
    inputs, masked = mask_blocks(blocks, generator(0, 1, 0), special_ids(tokenizer), 103, len(tokenizer))
    fused = masked_logits(model, inputs, torch.ones_like(blocks), masked)
    model.config._attn_implementation = "eager"
    eager = masked_logits(model, inputs, torch.ones_like(blocks), masked)
    assert torch.allclose(fused, eager, atol=1e-5)


def _attention_kernels(model, blocks: torch.Tensor) -> set[str]:
    """The names of the attention operators one training step of ``model`` runs."""
    from torch.profiler import profile

    with profile() as prof:
        masked_logits(model.train(), blocks, torch.ones_like(blocks), blocks > 0).sum().backward()
    return {e.name for e in prof.events() if "scaled_dot_product" in e.name}


def test_training_runs_the_fused_kernel_which_dropout_on_the_attention_would_disable(tokenizer, data):
    model = build_model(TINY, tokenizer, 8)
    assert model.config.attention_probs_dropout_prob == 0.0
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in _attention_kernels(model, data[0][:2])
    with_dropout = build_model(TINY, tokenizer, 8)  # the control: BERT's attention dropout of 0.1
    for module in with_dropout.modules():
        if type(module).__name__ == "BertSelfAttention":
            module.dropout.p = 0.1
    kernels = _attention_kernels(with_dropout, data[0][:2])
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" not in kernels
    assert "aten::_scaled_dot_product_attention_math" in kernels


def test_the_prediction_head_sees_only_the_masked_positions(tokenizer, data):
    model = build_model(TINY, tokenizer, 8).eval()
    blocks = data[0][:4]
    inputs, masked = mask_blocks(blocks, generator(0, 1, 0), special_ids(tokenizer), 103, len(tokenizer))
    attention = torch.ones_like(blocks)
    seen = []
    hook = model.cls.register_forward_hook(lambda mod, args, out: seen.append(args[0].shape))
    logits = masked_logits(model, inputs, attention, masked)
    hook.remove()
    assert seen == [torch.Size([int(masked.sum()), 16])]  # the head's input: the masked hidden states only
    full = model(input_ids=inputs, attention_mask=attention).logits  # (B, L, V): the same logits there
    assert logits.shape == (int(masked.sum()), len(tokenizer))
    assert torch.allclose(logits, full[masked], atol=1e-5)


def test_masks_are_berts_never_on_special_tokens_and_the_same_for_the_same_seed(tokenizer):
    blocks = _blocks(2000, 3)
    specials = special_ids(tokenizer)
    inputs, masked = mask_blocks(blocks, generator(0, 1, 7), specials, 103, len(tokenizer))
    again, masked_again = mask_blocks(blocks, generator(0, 1, 7), specials, 103, len(tokenizer))
    assert torch.equal(inputs, again) and torch.equal(masked, masked_again)
    assert not masked[:, 0].any() and not masked[:, -1].any()  # [CLS], [SEP]
    assert abs(masked.float().mean() / (6 / 8) - 0.15) < 0.01
    kept, became = blocks[masked], inputs[masked]
    assert abs((became == 103).float().mean() - 0.8) < 0.02
    assert abs((became == kept).float().mean() - 0.1) < 0.02  # (a random token equal to the old one: 1 in 30522)
    assert torch.equal(inputs[~masked], blocks[~masked])
    other, _ = mask_blocks(blocks, generator(0, 1, 8), specials, 103, len(tokenizer))  # another step
    assert not torch.equal(inputs, other)


# -- training, resuming, the saved folders --------------------------------------------------------------------


def test_a_resumed_run_equals_an_uninterrupted_one_bit_for_bit(tokenizer, data, whole, tmp_path):
    out = tmp_path / "resumed"
    with pytest.raises(Stop):  # after step 3; the last checkpoint is step 2's
        train_member(TINY, *data, out, SMALL, progress=False, on_step=_stop_after(3), tokenizer=tokenizer)
    assert json.loads((out / CHECKPOINT / "state.json").read_text())["step"] == 2
    train_member(TINY, *data, out, SMALL, progress=False, tokenizer=tokenizer)
    assert _same(_tensors(out), _tensors(whole))
    for step in ("step-000002", "step-000004", "step-000006"):
        assert _same(_tensors(out / CHECKPOINTS / step), _tensors(whole / CHECKPOINTS / step))
    mine, theirs = (json.loads((f / "provenance.json").read_text()) for f in (out, whole))
    assert mine["learning_curve"] == theirs["learning_curve"] and mine["held_out"] == theirs["held_out"]


def test_training_changes_the_weights_so_the_resume_test_can_fail(whole):
    assert not _same(_tensors(whole), _tensors(whole.with_name("whole-init")))
    assert not _same(_tensors(whole), _tensors(whole / CHECKPOINTS / "step-000004"))


def test_the_folders_load_as_encoders_and_the_twin_is_the_weights_before_step_0(tokenizer, whole):
    lm = load_model(str(whole))
    assert type(lm.model).__name__ == "BertModel" and lm.provenance["rebuild_rel_error"] < 1e-4
    saved = _tensors(whole)
    # every encoder weight is the saved one under "bert."; a masked LM has no pooler, which nothing studies
    encoder = {k: v for k, v in lm.model.state_dict().items() if not k.startswith("pooler.")}
    assert all(torch.equal(v, saved[f"bert.{k}"]) for k, v in encoder.items())
    twin = whole.with_name("whole-init")
    start = build_model(TINY, tokenizer, 8).state_dict()
    assert all(torch.equal(v, start[k]) for k, v in _tensors(twin).items())
    assert type(load_model(str(twin)).model).__name__ == "BertModel"
    assert type(load_model(str(whole / CHECKPOINTS / "step-000004")).model).__name__ == "BertModel"


def test_the_provenance_records_the_curve_held_out_scores_baselines_and_the_verdict(whole, data):
    prov = json.loads((whole / "provenance.json").read_text())
    assert prov["steps"] == 6 and prov["tokens_seen"] == 6 * 32 and prov["seed"] == 0
    assert prov["member"] == TINY.as_dict() and prov["settings"]["tokens"] == 6 * 32
    assert [r[0] for r in prov["learning_curve"]["rows"]] == [1, 2, 3, 4, 5, 6]
    assert [h["step"] for h in prov["held_out"]] == [0, 2, 4, 6]
    assert prov["twin"]["accuracy"] == prov["held_out"][0]["accuracy"] and prov["twin"]["folder"] == "whole-init"
    assert prov["unigram"]["token"] == 2000 and prov["unigram"]["token_text"] == "to"
    # the unigram's accuracy: the share of held-out masked targets that are "to"
    assert 0 < prov["unigram"]["accuracy"] < 1
    last = prov["held_out"][-1]
    assert prov["trained_enough"] == (last["accuracy"] >= prov["unigram"]["accuracy"] + prov["min_gain"])
    assert prov["text"]["train_blocks"] == 24 and prov["text"]["train_tokens"] == 24 * 8
    assert prov["minutes"] >= 0 and prov["device"] == "cpu"
    assert not (whole / CHECKPOINT).exists()  # the optimiser's state goes once the model is saved


# -- stops: one line, before any work -------------------------------------------------------------------------


def test_a_width_that_does_not_split_into_its_heads_is_one_line_and_writes_nothing(tokenizer, data, tmp_path):
    with pytest.raises(PretrainError, match="multiple of the heads") as e:
        train_member(Member(16, 3, layers=2), *data, tmp_path / "m", SMALL, progress=False, tokenizer=tokenizer)
    assert "\n" not in str(e.value) and list(tmp_path.iterdir()) == []
    with pytest.raises(PretrainError, match="multiple of the heads"):
        jobs.choose([Member(100, 3)])


def test_a_folder_that_holds_something_else_is_refused_and_left_as_it_is(tokenizer, data, whole, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    before = _snapshot(other)
    with pytest.raises(PretrainError, match="not empty"):
        train_member(TINY, *data, other, SMALL, progress=False, tokenizer=tokenizer)
    assert _snapshot(other) == before and not (tmp_path / "other-init").exists()
    before = _snapshot(whole)  # another member's finished folder
    with pytest.raises(PretrainError, match="another model"):
        train_member(Member(16, 4, layers=2), *data, whole, SMALL, progress=False, tokenizer=tokenizer)
    assert _snapshot(whole) == before


def test_a_finished_member_is_skipped_with_a_line(tokenizer, data, whole, capsys):
    before = _snapshot(whole)
    prov = train_member(TINY, *data, whole, SMALL, progress=False, tokenizer=tokenizer)
    assert prov["already_there"] and "already trained" in capsys.readouterr().out
    assert _snapshot(whole) == before


@pytest.mark.parametrize("broken", ["state.json", "tensors"])
def test_a_corrupt_checkpoint_is_refused_naming_it_never_restarted(tokenizer, data, tmp_path, broken):
    out = tmp_path / "m"
    with pytest.raises(Stop):
        train_member(TINY, *data, out, SMALL, progress=False, on_step=_stop_after(3), tokenizer=tokenizer)
    state = out / CHECKPOINT / "state.json"
    target = state if broken == "state.json" else out / CHECKPOINT / json.loads(state.read_text())["tensors"]
    target.write_bytes(target.read_bytes()[: len(target.read_bytes()) // 2])
    before = _snapshot(out)
    with pytest.raises(PretrainError, match="corrupt") as e:
        train_member(TINY, *data, out, SMALL, progress=False, tokenizer=tokenizer)
    assert str(target) in str(e.value) and "\n" not in str(e.value)
    assert _snapshot(out) == before


def test_a_full_disk_while_writing_a_checkpoint_leaves_the_previous_one_intact(
    tokenizer, data, whole, tmp_path, monkeypatch
):
    out = tmp_path / "m"
    real = training.save_file
    calls = []

    def disk_fills_at_the_third_checkpoint(tensors, path, metadata=None):
        calls.append(path)
        if len(calls) == 3:  # steps 0 and 2 written; step 4's half-written, then the disk is full
            Path(path).write_bytes(b"\0" * 1000)
            raise OSError(errno.ENOSPC, "No space left on device")
        real(tensors, path, metadata=metadata)

    monkeypatch.setattr(training, "save_file", disk_fills_at_the_third_checkpoint)
    with pytest.raises(PretrainError, match="disk is full.*step 2.* intact") as e:
        train_member(TINY, *data, out, SMALL, progress=False, tokenizer=tokenizer)
    assert "\n" not in str(e.value)
    assert json.loads((out / CHECKPOINT / "state.json").read_text())["step"] == 2
    assert [p.name for p in (out / CHECKPOINT).iterdir()] != [] and not list((out / CHECKPOINT).glob(".*tmp"))
    monkeypatch.setattr(training, "save_file", real)
    train_member(TINY, *data, out, SMALL, progress=False, tokenizer=tokenizer)  # resumes after step 2
    assert _same(_tensors(out), _tensors(whole))


def test_a_full_disk_in_safetensors_is_the_disk_full_line_and_leaves_no_empty_step_folder(
    tokenizer, data, tmp_path, monkeypatch
):
    """safetensors reports a full disk as its own error, not an OSError; the step's folder it was filling goes."""
    from safetensors import SafetensorError

    from identifiability.pretrain import train

    real = train.write_model_folder

    def full_at_step_4(folder, model, tok):
        if folder.name == "step-000004":
            folder.mkdir(parents=True)
            raise SafetensorError(
                'Error while serializing: IoError(Os { code: 28, message: "No space left on device" })'
            )
        real(folder, model, tok)

    monkeypatch.setattr(train, "write_model_folder", full_at_step_4)
    out = tmp_path / "m"
    with pytest.raises(PretrainError, match=r"^the disk is full: the checkpoint of step 4 .*\(step 2\) is intact") as e:
        train_member(TINY, *data, out, SMALL, progress=False, tokenizer=tokenizer)
    assert "\n" not in str(e.value)
    assert sorted(p.name for p in (out / CHECKPOINTS).iterdir()) == ["step-000002"]


def test_a_second_run_of_a_member_into_the_same_folder_is_refused_while_the_first_trains(
    tokenizer, data, whole, tmp_path
):
    import fcntl

    out = tmp_path / "m"
    seen = []

    def second_run(step: int, total: int) -> None:
        if step == 1:
            with pytest.raises(PretrainError, match=r"^another run is training .* into .*m now: let it finish") as e:
                train_member(TINY, *data, out, SMALL, progress=False, tokenizer=tokenizer)
            seen.append(str(e.value))

    train_member(TINY, *data, out, SMALL, progress=False, on_step=second_run, tokenizer=tokenizer)
    assert len(seen) == 1 and "\n" not in seen[0]
    assert _same(_tensors(out), _tensors(whole))  # the first run, untouched by the second
    with open(tmp_path / ".m.lock") as lock:  # released at the end: the next run may take it
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_a_member_named_twice_runs_once_and_names_are_checked():
    assert jobs.choose("mlm-w128-dv32-seed0,mlm-w64-dv32-seed0,mlm-w128-dv32-seed0") == [MEMBERS[0], MEMBERS[3]]
    assert jobs.choose([TINY, TINY]) == [TINY]
    assert jobs.choose("all") == list(MEMBERS)
    with pytest.raises(PretrainError, match="no family member 'mlm-w1'"):
        jobs.choose("mlm-w1")
    with pytest.raises(PretrainError, match="both called"):
        jobs.choose([TINY, Member(16, 2, layers=3)])


def test_members_start_longest_first():
    """LPT: the member with the most heads at the largest width first, the narrow one last; a list sorted the
    other way round comes out the same, and equal members (two seeds) keep their order."""
    order = [m.name for m in jobs.longest_first(MEMBERS)]
    assert order == [
        "mlm-w128-dv16-seed0",
        "mlm-w128-dv32-seed0",
        "mlm-w128-dv32-seed1",
        "mlm-w128-dv64-seed0",
        "mlm-w64-dv32-seed0",
    ]
    assert jobs.longest_first(list(reversed(MEMBERS)))[0].name == "mlm-w128-dv16-seed0"


def test_a_pilot_gets_a_folder_of_its_own(tmp_path):
    assert jobs.folder_of(MEMBERS[0], Settings(), tmp_path) == tmp_path / "mlm-w128-dv32-seed0"
    assert jobs.folder_of(MEMBERS[0], Settings(tokens=200_000), tmp_path) == tmp_path / "mlm-w128-dv32-seed0-200000tok"


def test_the_command_refuses_an_unknown_member_or_device_in_one_line(capsys):
    assert cli.main(["pretrain", "--members", "mlm-w7"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no family member 'mlm-w7'" in err
    assert cli.main(["pretrain", "--tokens", "0"]) == 2
    assert "--tokens must be at least 1" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert cli.main(["pretrain", "--device", "cuda"]) == 2
        assert "--device cuda is not available here: torch sees 0 CUDA devices" in capsys.readouterr().err


def _no_text(monkeypatch) -> None:
    monkeypatch.setattr(jobs, "text_blocks", lambda *a, **k: pytest.fail("the text was read"))


def test_a_device_that_is_none_is_one_line_before_the_text_is_read(monkeypatch, capsys):
    _no_text(monkeypatch)
    assert cli.main(["pretrain", "--device", "gpu"]) == 2
    err = capsys.readouterr().err
    assert err == "error: --device gpu is not a device: use cpu, cuda, cuda:N or mps; e.g. --device cpu\n", err


@pytest.mark.parametrize("code,fix", [(errno.EROFS, "make it writable"), (errno.ENOSPC, "free space there")])
def test_a_data_folder_that_takes_no_file_is_one_line_before_the_text_is_read(code, fix, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("IDENTIFIABILITY_DATA", str(tmp_path / "data"))
    _no_text(monkeypatch)
    real = os.open

    def open_(path, flags, *args, **kwargs):  # simulated: the tests may run as root
        if flags & os.O_CREAT and Path(os.fsdecode(path)).is_relative_to(tmp_path / "data"):
            raise OSError(code, os.strerror(code), os.fsdecode(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    assert cli.main(["pretrain", "--members", MEMBERS[0].name]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"the models folder {tmp_path / 'data' / 'models'} cannot be written" in err
    assert f"({os.strerror(code)}): {fix}, or set IDENTIFIABILITY_DATA" in err


def test_a_disk_without_room_for_the_checkpoints_is_one_line_before_the_text_is_read(tmp_path, monkeypatch):
    import shutil

    _no_text(monkeypatch)
    need = jobs.space_needed(MEMBERS[0], Settings(), tmp_path / "none")
    assert 100e6 < need < 1e9  # weights of about 19 MB, kept at each of 7 checkpoints and more
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=need - 1))
    with pytest.raises(PretrainError, match=r"has 0\.33 GB free, less than the about 0\.33 GB .* of 1 member") as e:
        jobs.pretrain_family(MEMBERS[0].name, root=tmp_path / "models", client=object())
    assert "\n" not in str(e.value) and not (tmp_path / "models").exists()


def test_ctrl_c_says_which_step_a_rerun_resumes_after(tokenizer, data, tmp_path):
    def ctrl_c(step: int, total: int) -> None:
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as e:  # not caught by pytest as its own Ctrl-C: the test fails instead
        train_member(TINY, *data, tmp_path / "m", SMALL, progress=False, on_step=ctrl_c, tokenizer=tokenizer)
    assert isinstance(e.value, stops.Interrupted)
    assert e.value.line == f"interrupted; run the same command again to resume {TINY.name} after step 2 of 6"


def test_ctrl_c_of_the_command_says_where_each_member_resumes(tokenizer, data, tmp_path):
    """The command's Ctrl-C comes on the client while the workers train: its one line reads the members'
    folders, once the cluster is closed, for the checkpoint each rerun resumes from."""
    other = Member(16, 2, layers=2, seed=1)
    root = tmp_path / "models"

    def ctrl_c(step: int, total: int) -> None:
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # TINY's checkpoint of step 2 is there; `other` has none
        train_member(TINY, *data, jobs.folder_of(TINY, SMALL, root), SMALL, progress=False, on_step=ctrl_c,
                     tokenizer=tokenizer)  # fmt: skip

    class Client:  # the cluster, stopped by a Ctrl-C as the command sends it the text
        cluster = None

        def scatter(self, *a, **k):
            raise KeyboardInterrupt

    with pytest.raises(stops.Interrupted) as e:
        jobs.pretrain_family([TINY, other], settings=SMALL, blocks=data, root=root, client=Client())
    assert e.value.line == (
        f"interrupted; run the same command again to resume {TINY.name} from its checkpoint of step 2, "
        f"{other.name} from the start"
    )


def test_an_interrupted_run_on_other_text_is_not_resumed(tokenizer, data, tmp_path):
    out = tmp_path / "m"
    with pytest.raises(Stop):
        train_member(TINY, *data, out, SMALL, progress=False, on_step=_stop_after(1), tokenizer=tokenizer)
    before = _snapshot(out)
    with pytest.raises(PretrainError, match="other text"):
        train_member(TINY, _blocks(24, 5), data[1], out, SMALL, progress=False, tokenizer=tokenizer)
    assert _snapshot(out) == before
