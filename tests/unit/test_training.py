"""What fine-tuning and pre-training share (:mod:`identifiability.models.training`): the one check of a model folder
(new, resume, done, or a one-line refusal in each command's words that touches nothing), checkpoints that
restore weights, AdamW's state and the RNG exactly, the learning-rate schedule, one optimiser step, the Ctrl-C
line and the saved model folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from identifiability.base import stops
from identifiability.corpus.tasks import FinetuneError
from identifiability.models import finetune
from identifiability.models.training import (
    CHECKPOINT,
    PROVENANCE,
    Refusals,
    claim_folder,
    load_checkpoint,
    lr_at,
    optimizer,
    optimizer_step,
    rerun_line,
    save_folder,
    save_state,
)
from identifiability.pretrain import train as pretrain
from identifiability.pretrain.mlm import PretrainError

IDENTITY = {"kind": "test", "seed": 0, "sizes": (2, 3)}  # a tuple: compared as JSON reads it back (a list)
ANOTHER = {"kind": "test", "seed": 1, "sizes": [2, 3]}


class Refused(Exception):
    pass


WORDS = Refusals(
    Refused,
    lambda record: f"seed {record.get('identity', {}).get('seed')}",
    a_file="{out} is a file",
    other_model="{out} holds another model ({about})",
    other_run="{out} holds another run ({about})",
    not_empty="{out} holds other files (no {provenance})",
)


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def _stepped() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """A small model after one AdamW step: the optimiser has state tensors to save."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    opt = optimizer(model, lr=1e-2, weight_decay=0.01)
    optimizer_step(model, opt, model(torch.randn(5, 3)).pow(2).sum(), lr=1e-2, clip=1.0)
    return model, opt


def _checkpointed(out: Path, identity: dict) -> None:
    model, opt = _stepped()
    save_state(out / CHECKPOINT, model, opt, "step-1.safetensors", {"identity": identity, "step": 1})


# -- the folder check ----------------------------------------------------------------------------------------


def test_an_absent_or_empty_folder_is_new(tmp_path):
    assert claim_folder(tmp_path / "absent", IDENTITY, WORDS) == ("new", None)
    (tmp_path / "empty").mkdir()
    assert claim_folder(tmp_path / "empty", IDENTITY, WORDS) == ("new", None)


def test_a_folder_with_this_models_provenance_is_done(tmp_path):
    (tmp_path / PROVENANCE).write_text(json.dumps({"identity": IDENTITY, "accuracy": 0.9}))
    state, prov = claim_folder(tmp_path, IDENTITY, WORDS)
    assert state == "done" and prov == {"identity": {**IDENTITY, "sizes": [2, 3]}, "accuracy": 0.9}


def test_a_folder_with_this_runs_checkpoint_resumes_and_returns_its_record(tmp_path):
    _checkpointed(tmp_path, IDENTITY)
    state, meta = claim_folder(tmp_path, IDENTITY, WORDS)
    assert state == "resume" and meta is not None
    assert meta["step"] == 1 and meta["tensors"] == "step-1.safetensors"


def _refused(out: Path, identity: dict, words: Refusals = WORDS) -> str:
    before = _snapshot(out) if out.is_dir() else out.read_bytes()
    with pytest.raises(words.error) as e:
        claim_folder(out, identity, words)
    assert "\n" not in str(e.value)
    assert (_snapshot(out) if out.is_dir() else out.read_bytes()) == before  # nothing touched
    return str(e.value)


def test_each_refusal_is_one_line_in_the_commands_words_and_touches_nothing(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("mine")
    assert _refused(a_file, IDENTITY) == f"{a_file} is a file"
    model = tmp_path / "model"
    model.mkdir()
    (model / PROVENANCE).write_text(json.dumps({"identity": ANOTHER}))
    assert _refused(model, IDENTITY) == f"{model} holds another model (seed 1)"
    run = tmp_path / "run"
    _checkpointed(run, ANOTHER)
    assert _refused(run, IDENTITY) == f"{run} holds another run (seed 1)"
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert _refused(other, IDENTITY) == f"{other} holds other files (no provenance.json)"


def test_a_corrupt_record_or_checkpoint_is_refused_naming_it(tmp_path):
    prov = tmp_path / "prov" / PROVENANCE
    prov.parent.mkdir()
    prov.write_text('{"identity": ')
    assert _refused(prov.parent, IDENTITY).startswith(f"{prov} is corrupt (JSONDecodeError)")
    for broken in ("state.json", "tensors"):
        out = tmp_path / broken
        _checkpointed(out, IDENTITY)
        target = out / CHECKPOINT / ("state.json" if broken == "state.json" else "step-1.safetensors")
        target.write_bytes(target.read_bytes()[: len(target.read_bytes()) // 2])
        assert "corrupt" in _refused(out, IDENTITY) and str(target) in _refused(out, IDENTITY)


def test_the_corrupt_checkpoints_advice_works_when_followed(tmp_path):
    """The line names the folder to remove; removing it (with the kept checkpoints beside the latest) lets the
    same run start over, where removing the checkpoint alone would be refused again."""
    import re
    import shutil

    for broken in ("state.json", "step-1.safetensors"):
        out = tmp_path / broken
        _checkpointed(out, IDENTITY)
        (out / "checkpoints" / "step-000001").mkdir(parents=True)  # pretrain keeps each step's weights there
        (out / "checkpoints" / "step-000001" / "config.json").write_text("{}")
        (out / CHECKPOINT / broken).write_bytes(b"{")
        line = _refused(out, IDENTITY)
        named = re.search(r"remove (\S+) to start", line)
        assert named, line
        shutil.rmtree(named.group(1))
        assert claim_folder(out, IDENTITY, WORDS) == ("new", None)


@pytest.mark.parametrize(
    ("words", "error", "lines"),
    [
        (
            finetune.REFUSALS,
            FinetuneError,
            [
                "{out} is a file, not a folder: pass another --out",
                "{out} already holds another model (fine-tuned for lee-pairs from tiny, seed 1): pass another "
                "--out, or remove that folder to replace it",
                "{out} holds an interrupted run of another fine-tune (fine-tuned for lee-pairs from tiny, seed 1): "
                "resume it with its own settings, pass another --out, or remove that folder",
                "{out} is not empty and holds no model made by this command (no provenance.json): pass another --out",
            ],
        ),
        (
            pretrain.REFUSALS,
            PretrainError,
            [
                "{out} is a file, not a folder: remove it or train into another folder",
                "{out} already holds another model (fine-tuned, of another member or settings): remove that folder "
                "to replace it",
                "{out} holds an interrupted run of other settings: resume it with its own, or remove that folder",
                "{out} is not empty and holds no run of this member (no provenance.json): remove it first",
            ],
        ),
    ],
    ids=["finetune", "pretrain"],
)
def test_the_two_commands_keep_their_own_lines(tmp_path, words, error, lines):
    record = {"identity": {"kind": "fine-tuned", "task": "lee-pairs", "seed": 1}, "kind": "fine-tuned"}
    record["base"] = {"name": "tiny"}
    a_file, model, run, other = (tmp_path / name for name in ("a-file", "model", "run", "other"))
    a_file.write_text("mine")
    model.mkdir()
    (model / PROVENANCE).write_text(json.dumps(record))
    _checkpointed(run, record["identity"])
    state = run / CHECKPOINT / "state.json"
    state.write_text(json.dumps({**json.loads(state.read_text()), "base": record["base"]}))
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert words.error is error
    got = [_refused(folder, IDENTITY, words) for folder in (a_file, model, run, other)]
    assert got == [line.format(out=folder) for line, folder in zip(lines, (a_file, model, run, other))]


# -- checkpoints ---------------------------------------------------------------------------------------------


def test_a_checkpoint_restores_the_weights_the_optimiser_and_the_rng_exactly(tmp_path):
    model, opt = _stepped()
    torch.manual_seed(7)
    save_state(tmp_path, model, opt, "a.safetensors", {"step": 1})
    after_save = torch.rand(3)  # what dropout would draw next
    fresh, fresh_opt = _stepped()  # other weights and moments: a second step's
    optimizer_step(fresh, fresh_opt, fresh(torch.ones(2, 3)).sum(), lr=1e-2, clip=1.0)
    torch.manual_seed(8)
    meta = load_checkpoint(tmp_path, fresh, fresh_opt)
    assert meta == {"step": 1, "tensors": "a.safetensors"}
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values()))
    mine, theirs = opt.state_dict()["state"], fresh_opt.state_dict()["state"]
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[i][k], theirs[i][k]) for i in mine for k in mine[i])
    assert torch.equal(torch.rand(3), after_save)


def test_a_new_checkpoint_replaces_the_older_tensors_and_is_named_in_state_json(tmp_path):
    model, opt = _stepped()
    save_state(tmp_path, model, opt, "step-1.safetensors", {"step": 1})
    save_state(tmp_path, model, opt, "step-2.safetensors", {"step": 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json", "step-2.safetensors"]
    assert json.loads((tmp_path / "state.json").read_text()) == {"step": 2, "tensors": "step-2.safetensors"}


def _disk_full(kind: str) -> Exception:
    """A full disk as each writer reports it: an OSError, or safetensors' own error with the system's message."""
    import errno
    import os

    from safetensors import SafetensorError

    if kind == "OSError":
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return SafetensorError(
        f'Error while serializing: IoError(Os {{ code: 28, message: "{os.strerror(errno.ENOSPC)}" }})'
    )


@pytest.mark.parametrize("kind", ["OSError", "SafetensorError"])
def test_a_full_disk_at_a_fine_tunes_checkpoint_is_one_line_and_leaves_no_empty_checkpoint_folder(
    kind, tmp_path, monkeypatch
):
    """The first checkpoint's folder the disk left empty goes (a rerun would refuse a folder that holds it, and
    the advice would not work); a later one leaves the previous checkpoint in force."""
    from identifiability.models import training

    out = tmp_path / "model"
    out.mkdir()
    model, opt = _stepped()
    real = training.save_file

    def full(tensors, path, metadata=None):
        raise _disk_full(kind)

    monkeypatch.setattr(training, "save_file", full)
    with pytest.raises(FinetuneError) as e:
        finetune.save_checkpoint(out / CHECKPOINT, model, opt, 1, {"identity": IDENTITY})
    assert str(e.value) == (
        f"the disk is full: the checkpoint of epoch 1 in {out} was not written; the previous checkpoint (none yet) "
        "is intact: free some space and run the same command again to resume"
    )
    assert list(out.iterdir()) == [] and claim_folder(out, IDENTITY, WORDS) == ("new", None)
    monkeypatch.setattr(training, "save_file", real)
    finetune.save_checkpoint(out / CHECKPOINT, model, opt, 1, {"identity": IDENTITY})
    monkeypatch.setattr(training, "save_file", full)
    with pytest.raises(FinetuneError, match=r"checkpoint of epoch 2 .*\(epoch 1\) is intact: free some space"):
        finetune.save_checkpoint(out / CHECKPOINT, model, opt, 2, {"identity": IDENTITY})
    assert claim_folder(out, IDENTITY, WORDS)[0] == "resume"
    assert sorted(p.name for p in (out / CHECKPOINT).iterdir()) == ["epoch1.safetensors", "state.json"]


# -- the optimiser and its schedule ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "total", "warmup", "lr"),
    [
        (0, 10, 0.3, 1 / 3),  # warm-up over 3 steps
        (1, 10, 0.3, 2 / 3),
        (2, 10, 0.3, 1.0),  # the peak
        (3, 10, 0.3, 1.0),  # decay: (10 - 3) / (10 - 3)
        (6, 10, 0.3, 4 / 7),
        (9, 10, 0.3, 1 / 7),  # the last step
        (10, 10, 0.3, 0.0),
        (0, 10, 0.0, 1.0),  # at least one warm-up step
        (5, 10, 0.0, 5 / 9),
        (0, 1, 0.1, 1.0),  # a single step
    ],
)
def test_the_learning_rate_warms_up_linearly_then_decays_to_zero(step, total, warmup, lr):
    assert lr_at(step, total, 2e-3, warmup) == pytest.approx(2e-3 * lr, rel=1e-12)


def test_weight_decay_is_on_matrices_only_and_a_step_uses_its_rate_and_drops_the_gradients():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    opt = optimizer(model, lr=1e-3, weight_decay=0.05)
    decayed, plain = opt.param_groups
    assert decayed["weight_decay"] == 0.05 and [p.shape for p in decayed["params"]] == [(4, 3)]
    assert plain["weight_decay"] == 0.0 and len(plain["params"]) == 3  # the bias, LayerNorm's gain and bias
    before = model[0].weight.detach().clone()
    optimizer_step(model, opt, model(torch.randn(5, 3)).sum(), lr=0.25, clip=1.0)
    assert [g["lr"] for g in opt.param_groups] == [0.25, 0.25]
    assert not torch.equal(before, model[0].weight) and all(p.grad is None for p in model.parameters())


# -- Ctrl-C and the saved folder -------------------------------------------------------------------------------


def test_ctrl_c_becomes_the_rerun_line_and_other_stops_pass_through():
    with pytest.raises(stops.Interrupted, match="^run it again$"):
        with rerun_line(lambda: stops.Interrupted("run it again")):
            raise KeyboardInterrupt
    with pytest.raises(stops.Interrupted, match="^its own line$"):  # a line said inside is kept
        with rerun_line(lambda: stops.Interrupted("run it again")):
            raise stops.Interrupted("its own line")
    with pytest.raises(ValueError):
        with rerun_line(lambda: stops.Interrupted("run it again")):
            raise ValueError("not a Ctrl-C")


def test_a_saved_folder_loads_and_its_provenance_is_written(tmp_path):
    from identifiability.models.load import load_model, random_model

    lm = random_model("bert", seed=0)
    save_folder(tmp_path / "m", lm.model, lm.tokenizer, {"identity": IDENTITY, "kind": "test"})
    assert json.loads((tmp_path / "m" / PROVENANCE).read_text())["kind"] == "test"
    assert claim_folder(tmp_path / "m", IDENTITY, WORDS)[0] == "done"
    loaded = load_model(str(tmp_path / "m")).model.state_dict()
    assert all(torch.equal(v, loaded[k]) for k, v in lm.model.state_dict().items() if k in loaded)
    assert not list(tmp_path.glob(".*"))  # the staging folder is gone
