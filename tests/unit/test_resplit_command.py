"""``identifiability resplit`` (issue 55, item 7): every bad input is one line, exit 2, before the text or any
weight is read, on a tiny BERT saved as a model folder (hidden 64, 4 heads of 16)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from identifiability import cli
from identifiability.models.keys import model_ref
from identifiability.pretrain import resplits, text
from identifiability.pretrain.heal import HealSettings, identity_of


@pytest.fixture(autouse=True)
def _no_work(monkeypatch, tmp_path):
    """The data folder of the test's own, and the text and the weights out of reach: a refusal must come first."""
    monkeypatch.setenv("IDENTIFIABILITY_DATA", str(tmp_path / "data"))

    def refuse(*args, **kwargs):
        raise AssertionError("the text or the weights were read before the refusal")

    monkeypatch.setattr(text, "token_blocks", refuse)
    monkeypatch.setattr("identifiability.models.load.load_model", refuse)


def _run(capsys, *args: str) -> str:
    capsys.readouterr()  # what making the model folder printed
    assert cli.main(["resplit", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err


@pytest.mark.parametrize("widths", ["24", "16,24", "0"])
def test_a_width_that_does_not_divide_the_hidden_size(widths, tiny_model_folder, capsys):
    err = _run(capsys, "--model", str(tiny_model_folder()), "--widths", widths)
    assert "does not divide" in err and "hidden size 64" in err


def test_a_width_that_is_no_number(tiny_model_folder, capsys):
    err = _run(capsys, "--model", str(tiny_model_folder()), "--widths", "16,wide")
    assert "whole numbers" in err and "'wide'" in err


def test_bad_settings(tiny_model_folder, capsys):
    assert "--mode must be one of" in _run(capsys, "--model", str(tiny_model_folder()), "--mode", "both")
    assert "--tokens must be at least 1" in _run(capsys, "--model", str(tiny_model_folder()), "--tokens", "0")


def test_a_pre_ln_decoder(tmp_path, capsys):
    from identifiability.models.load import random_model

    folder = tmp_path / "tiny-gpt2"
    lm = random_model("gpt2", seed=0)
    lm.model.save_pretrained(folder, safe_serialization=True)
    lm.tokenizer.save_pretrained(folder)
    assert "pre-LN or decoder" in _run(capsys, "--model", str(folder), "--widths", "16")


def _member_folder(model: Path, width: int) -> tuple[Path, dict]:
    s = HealSettings(width=width)
    ref = model_ref(str(model))
    return resplits.folder_of(ref.key, s), identity_of(ref.content_key, s)


def test_a_folder_that_holds_another_model(tiny_model_folder, capsys):
    model = tiny_model_folder()
    out, _ = _member_folder(model, 16)
    out.mkdir(parents=True)
    (out / "provenance.json").write_text(json.dumps({"identity": {"kind": "fine-tuned"}, "kind": "fine-tuned"}))
    err = _run(capsys, "--model", str(model), "--widths", "32,16")
    assert f"{out} already holds another model (fine-tuned" in err


def test_a_truncated_checkpoint(tiny_model_folder, capsys):
    model = tiny_model_folder()
    out, identity = _member_folder(model, 32)
    (out / "checkpoint").mkdir(parents=True)
    (out / "checkpoint" / "step-000004.safetensors").write_bytes(b"\x10\x00\x00")
    state = {"identity": identity, "step": 4, "tensors": "step-000004.safetensors"}
    (out / "checkpoint" / "state.json").write_text(json.dumps(state))
    err = _run(capsys, "--model", str(model), "--widths", "32")
    assert "is corrupt or missing" in err and f"remove {out}" in err
    assert (out / "checkpoint" / "step-000004.safetensors").read_bytes() == b"\x10\x00\x00"


@pytest.mark.parametrize("code,fix", [(errno.EROFS, "make it writable"), (errno.ENOSPC, "free space there")])
def test_a_data_folder_that_takes_no_file(code, fix, tiny_model_folder, tmp_path, monkeypatch, capsys):
    model = tiny_model_folder()
    real = os.open

    def open_(path, flags, *args, **kwargs):  # simulated: the tests may run as root
        if flags & os.O_CREAT and Path(os.fsdecode(path)).is_relative_to(tmp_path / "data"):
            raise OSError(code, os.strerror(code), os.fsdecode(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    err = _run(capsys, "--model", str(model), "--widths", "16")
    assert f"the models folder {tmp_path / 'data' / 'models'} cannot be written" in err and fix in err


def test_a_width_named_twice_runs_once():
    assert resplits.parse_widths("16, 128,16") == [16, 128]
    assert resplits.parse_widths([64]) == [64]


def test_a_pilot_never_takes_the_members_folder(tmp_path):
    base = resplits.folder_of("m", HealSettings(width=16), tmp_path)
    assert base.name == "m-dv16-seed0"
    assert resplits.folder_of("m", HealSettings(width=16, tokens=1000), tmp_path).name == "m-dv16-seed0-1000tok"
    assert resplits.folder_of("m", HealSettings(width=16, mode="layerwise"), tmp_path).name == "m-dv16-seed0-layerwise"
