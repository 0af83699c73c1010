"""Fine-tuned models and the random-initialisation control, on a tiny random model: an interrupted run
resumes to the very weights of an uninterrupted one, the folder loads like any model and passes the
rebuild check, the pair data keeps its article split, and bad requests are one line that changes nothing."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from identifiability import cli
from identifiability.base import paths, stops
from identifiability.corpus.corpora import (
    PAIR_SEP,
    is_held_out,
    lee_pair_examples,
    load_corpus,
    sample_sentences,
    split_pair,
)
from identifiability.corpus.tasks import FinetuneError, lee_pairs_data
from identifiability.models.finetune import Settings, finetune, init_random, save_checkpoint
from identifiability.models.load import load_model, random_model
from identifiability.models.trace import tokenize, trace_batch

from .test_stops import finish, start, stop_lines, wait_for

# 2 steps per epoch: tiny enough for seconds; dropout, AdamW's state and the data order all matter.
SMALL = Settings(epochs=2, batch_size=8, max_length=32, limit=16, held_out_limit=16)


@pytest.fixture(autouse=True)
def data_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "data"))
    return tmp_path / "data"


@pytest.fixture(scope="module")
def base(tiny_model_folder) -> Path:
    return tiny_model_folder(0, "tiny")


@pytest.fixture(scope="module")
def pairs():
    return lee_pairs_data()


@pytest.fixture(scope="module")
def uninterrupted(base, pairs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "whole"
    finetune("lee-pairs", out, str(base), SMALL, progress=False, data=pairs)
    return out


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


class Interrupted(Exception):
    pass


def test_an_interrupted_run_resumes_to_the_same_weights_bit_for_bit(base, pairs, uninterrupted, tmp_path):
    out = tmp_path / "resumed"

    def kill_in_epoch_2(epoch: int, step: int) -> None:
        if epoch == 1 and step == 3:  # after the first of epoch 2's two steps
            raise Interrupted

    with pytest.raises(Interrupted):
        finetune("lee-pairs", out, str(base), SMALL, progress=False, on_step=kill_in_epoch_2, data=pairs)
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["epochs_done"] == 1 and state["steps"] == 2 and not (out / "provenance.json").exists()
    assert [p.name for p in (out / "checkpoint").iterdir() if p.suffix == ".safetensors"] == ["epoch1.safetensors"]

    prov = finetune("lee-pairs", out, str(base), SMALL, progress=False, data=pairs)
    assert prov["steps"] == 4 and not (out / "checkpoint").exists()
    a, b = _weights(uninterrupted), _weights(out)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((uninterrupted / "provenance.json").read_text())["held_out"] == prov["held_out"]


# The command line, in a process of its own, with SMALL's settings and a hook that stops in epoch ``hold``
# (0-based; -1: never) at its first step: it writes the marker, then waits for the test's SIGINT.
_HELD_COMMAND_LINE = """
import dataclasses, runpy, sys, time
from pathlib import Path
import identifiability.models.finetune as ft

marker, hold, real = Path(sys.argv[1]), int(sys.argv[2]), ft.finetune

def wait_for_the_signal(epoch, step):
    if epoch == hold:
        marker.with_suffix(".tmp").write_text(str(step))
        marker.with_suffix(".tmp").replace(marker)
        while True:
            time.sleep(0.05)

def small(task, out, base, settings, **kw):
    s = dataclasses.replace(settings, batch_size=8, max_length=32, limit=16, held_out_limit=16)
    return real(task, out, base, s, on_step=wait_for_the_signal, **kw)

ft.finetune = small
sys.argv = ["identifiability", *sys.argv[3:]]
runpy.run_module("identifiability.cli", run_name="__main__", alter_sys=True)
"""


def test_ctrl_c_after_epoch_1_is_one_line_exit_130_and_the_rerun_resumes_to_the_same_weights(base, tmp_path):
    script, out, marker = tmp_path / "held.py", tmp_path / "cli-run", tmp_path / "marker"
    script.write_text(_HELD_COMMAND_LINE)
    args = ["finetune", "--task", "lee-pairs", "--base", str(base), "--out", str(out)]
    proc = start([sys.executable, str(script), str(marker), "1", *args], tmp_path / "logs")
    assert wait_for(marker, proc, tmp_path / "logs") == "3"  # epoch 2's first step: epoch 1 is checkpointed
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends
    code, stderr = finish(proc, tmp_path / "logs")
    line = "interrupted; run the same command again to resume after epoch 1 of 2"
    assert code == 130 and stop_lines(stderr) == [line] and stderr.splitlines()[-1] == line, stderr
    assert json.loads((out / "checkpoint" / "state.json").read_text())["epochs_done"] == 1
    assert not (out / "provenance.json").exists()

    rerun = start([sys.executable, str(script), str(marker), "-1", *args], tmp_path / "logs2")
    code, stderr = finish(rerun, tmp_path / "logs2")
    assert code == 0, stderr
    assert "resuming after epoch 1 of 2" in (tmp_path / "logs2" / "stdout").read_text()
    # the reference runs the same command line uninterrupted, in a process of its own: this process's torch
    # may use another number of threads (set by earlier tests), and float sums then differ in the last bits
    whole = tmp_path / "cli-whole"
    ref = start([sys.executable, str(script), str(marker), "-1", *args[:-1], str(whole)], tmp_path / "logs3")
    code, stderr = finish(ref, tmp_path / "logs3")
    assert code == 0, stderr
    a, b = _weights(whole), _weights(out)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_stopped_in_the_first_epoch_a_fine_tune_says_it_will_restart_from_the_beginning(
    base, pairs, uninterrupted, tmp_path
):
    out = tmp_path / "first"

    def ctrl_c_in_epoch_1(epoch: int, step: int) -> None:
        raise KeyboardInterrupt  # what the signal raises, after the first step

    with pytest.raises(
        stops.Interrupted, match="in the first epoch, which has no checkpoint yet; .* restart from the beg"
    ):
        finetune("lee-pairs", out, str(base), SMALL, progress=False, on_step=ctrl_c_in_epoch_1, data=pairs)
    assert not (out / "checkpoint" / "state.json").exists() and not (out / "provenance.json").exists()
    # and a rerun does: it trains both epochs, to the weights of a run never stopped
    prov = finetune("lee-pairs", out, str(base), SMALL, progress=False, data=pairs)
    a, b = _weights(uninterrupted), _weights(out)
    assert prov["steps"] == 4 and all(torch.equal(a[k], b[k]) for k in a)


def test_the_seed_matters_so_the_resume_test_can_fail(base, pairs, uninterrupted, tmp_path):
    other = tmp_path / "seed1"
    finetune("lee-pairs", other, str(base), Settings(**{**SMALL.__dict__, "seed": 1}), progress=False, data=pairs)
    a, b = _weights(uninterrupted), _weights(other)
    assert any(not torch.equal(a[k], b[k]) for k in a)


def test_the_saved_folder_loads_as_an_encoder_and_passes_the_rebuild_check(base, uninterrupted):
    lm = load_model(str(uninterrupted))
    assert lm.provenance["rebuild_rel_error"] < 1e-5
    saved = _weights(uninterrupted)
    prefix = lm.model.base_model_prefix + "."
    encoder = {k: v for k, v in lm.model.state_dict().items()}
    trained = {k.removeprefix(prefix): v for k, v in saved.items() if k.startswith(prefix)}
    assert set(trained) <= set(encoder) and all(torch.equal(encoder[k], v) for k, v in trained.items())
    start = _weights(base)
    assert any(not torch.equal(start[k], trained[k]) for k in start if k in trained)  # training changed it
    prov = json.loads((uninterrupted / "provenance.json").read_text())
    assert prov["task"] == "lee-pairs" and prov["seed"] == 0 and prov["steps"] == 4 and prov["epochs"] == 2
    assert prov["base"]["content_key"] == load_model(str(base)).content_key
    assert len(prov["data"]["hash"]) == 64 and prov["data"]["train_examples"] == 16
    r = prov["held_out"]
    assert r["n"] == 16 and r["ci95"][0] <= r["accuracy"] <= r["ci95"][1] and 0 <= r["majority_rate"] <= 1


def test_a_finished_folder_is_returned_as_it_is(base, pairs, uninterrupted):
    before = _snapshot(uninterrupted)
    prov = finetune("lee-pairs", uninterrupted, str(base), SMALL, progress=False, data=pairs)
    assert prov["already_there"] and _snapshot(uninterrupted) == before


def test_random_initialisation_is_the_same_architecture_with_fresh_seeded_weights(base, tmp_path):
    a = init_random(str(base), seed=3, out=tmp_path / "r3")
    again = init_random(str(base), seed=3, out=tmp_path / "r3b")
    other = init_random(str(base), seed=4, out=tmp_path / "r4")
    la, lb, lo = (load_model(p["folder"]) for p in (a, again, other))
    assert la.content_key == lb.content_key != lo.content_key
    assert la.config.to_diff_dict().keys() >= {"hidden_size", "num_hidden_layers"}
    assert (la.n_layers, la.n_heads, la.d_model) == (2, 4, 64)
    start = _weights(base)
    fresh = _weights(Path(a["folder"]))
    assert start.keys() == fresh.keys() and any(not torch.equal(start[k], fresh[k]) for k in start)
    assert a["kind"] == "random-init" and a["like"]["content_key"] == load_model(str(base)).content_key


def test_model_files_and_checkpoints_are_readable_as_the_umask_allows(base, tmp_path):
    """safetensors writes its files 0600 whatever the umask; a model folder is meant to be shared like any
    other file (under umask 022: 0644)."""
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    old = os.umask(0o022)
    try:
        init_random(str(base), seed=0, out=tmp_path / "models" / "random")
        save_checkpoint(tmp_path / "checkpoint", model, opt, 1, {})
    finally:
        os.umask(old)
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in tmp_path.rglob("*") if p.is_file()}
    assert {"model.safetensors", "config.json", "provenance.json", "epoch1.safetensors"} <= modes.keys()
    assert set(modes.values()) == {"0o644"}, modes
    assert not list((tmp_path / "models").glob(".*"))  # the staging folder is gone


# -- the pair data -----------------------------------------------------------------------------------


def test_the_pair_sets_keep_the_article_split_and_positives_are_consecutive():
    lee = load_corpus("lee")
    position = {(doc, s): i for i, (doc, s) in enumerate(zip(lee.documents, lee.sentences))}
    articles, sentences = defaultdict(set), defaultdict(set)
    for held in (False, True):
        ex = lee_pair_examples(held)
        assert sum(e.label for e in ex) * 2 == len(ex)  # balanced
        for e in ex:
            articles[held] |= {e.article_a, e.article_b}
            sentences[held] |= {e.a, e.b}
            assert is_held_out(e.article_a) == is_held_out(e.article_b) == held
            if e.label:
                assert e.article_a == e.article_b
                assert position[(e.article_b, e.b)] == position[(e.article_a, e.a)] + 1
            else:
                assert e.article_a != e.article_b
    assert articles[False] and articles[True] and not articles[False] & articles[True]
    # the corpus repeats some stories in several articles: no sentence may lie on both sides either
    assert not sentences[False] & sentences[True]
    assert len(articles[False]) + len(articles[True]) == 300


def test_the_fine_tune_trains_on_one_split_and_the_corpus_is_the_other(pairs):
    corpus = load_corpus("lee_pairs")
    assert corpus.sentences == [e.text for e in pairs.held_out]
    assert not {e.text for e in pairs.train} & set(corpus.sentences)
    assert all(is_held_out(d) for d in corpus.documents) and set(corpus.labels) == {"next", "other"}
    assert all(is_held_out(d) for d in load_corpus("lee_heldout").documents)


def test_pairs_are_tokenised_as_pairs_with_segment_ids(tiny_lm):
    corpus = load_corpus("lee_pairs")
    texts = sample_sentences(corpus, 4, seed=0, tokenizer=tiny_lm.tokenizer, max_tokens=64)
    assert len(texts) == 4 and all(PAIR_SEP in t for t in texts)
    enc = tokenize(tiny_lm, [*texts, "One sentence alone."])
    sep = tiny_lm.tokenizer.sep_token_id
    for row, types, mask, text in zip(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"], texts):
        n = int(mask.sum())
        assert int((row[:n] == sep).sum()) == 2 and types[:n].tolist().count(1) > 0
        a, b = split_pair(text)
        first_sep = row.tolist().index(sep)
        assert set(types[: first_sep + 1].tolist()) == {0} and set(types[first_sep + 1 : n].tolist()) == {1}
    assert set(enc["token_type_ids"][-1].tolist()) == {0}
    tr = trace_batch(tiny_lm, texts[:1])[0]
    assert tr.token_type_ids is not None and tr.token_type_ids.max() == 1 and tr.tokens.count("[SEP]") == 2
    # the segment embedding is part of x: the same ids with all-zero segments give another x
    ids = tr.input_ids.reshape(1, -1)
    from identifiability.models.trace import forward

    x0 = forward(tiny_lm, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}).x[0]
    assert not torch.allclose(x0, tr.x)


# -- bad input ----------------------------------------------------------------------------------------


def _one_line_error(capsys, argv) -> str:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    return err


def test_an_unknown_task_or_zero_epochs_is_one_line_and_writes_nothing(capsys, tmp_path, base):
    out = tmp_path / "never"
    assert "unknown task 'sentimnt'" in _one_line_error(capsys, ["finetune", "--task", "sentimnt", "--out", str(out)])
    err = _one_line_error(capsys, ["finetune", "--task", "lee-pairs", "--epochs", "0", "--out", str(out)])
    assert "--epochs must be at least 1" in err
    assert not out.exists()
    with pytest.raises(FinetuneError, match="unknown task"):
        finetune("nope", out, str(base))


def test_a_folder_that_holds_another_model_is_refused_and_left_as_it_is(capsys, tmp_path, base, uninterrupted):
    random_folder = Path(init_random(str(base), seed=0, out=tmp_path / "random")["folder"])
    foreign = tmp_path / "foreign"
    random_model("bert", seed=5).model.save_pretrained(foreign, safe_serialization=True)
    cases = {
        random_folder: "already holds another model (random initialisation",
        uninterrupted: "already holds another model (fine-tuned for lee-pairs",  # other settings and base
        foreign: "holds no model made by this command",
    }
    for folder, message in cases.items():
        before = _snapshot(folder)
        err = _one_line_error(capsys, ["finetune", "--task", "lee-pairs", "--base", str(base), "--out", str(folder)])
        assert message in err and _snapshot(folder) == before
    before = _snapshot(uninterrupted)
    err = _one_line_error(capsys, ["init-random", "--like", str(base), "--out", str(uninterrupted)])
    assert "fine-tuned for lee-pairs" in err and _snapshot(uninterrupted) == before


def test_an_interrupted_run_of_other_settings_is_not_resumed(base, pairs, tmp_path):
    out = tmp_path / "half"

    def stop(epoch: int, step: int) -> None:
        if epoch == 1:
            raise Interrupted

    with pytest.raises(Interrupted):
        finetune("lee-pairs", out, str(base), SMALL, progress=False, on_step=stop, data=pairs)
    before = _snapshot(out)
    other = Settings(**{**SMALL.__dict__, "seed": 7})
    with pytest.raises(FinetuneError, match="interrupted run of another fine-tune") as e:
        finetune("lee-pairs", out, str(base), other, progress=False, data=pairs)
    assert "\n" not in str(e.value) and _snapshot(out) == before


def test_a_hub_id_without_network_or_cache_is_one_line_and_writes_nothing(capsys, tmp_path, monkeypatch):
    """``make compare BASE=<hub id>`` fine-tunes a hub model from its cached or downloaded snapshot; offline
    and uncached (the tests run with HF_HUB_OFFLINE=1) it stops with one line that names the way out."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "never"
    err = _one_line_error(
        capsys, ["finetune", "--task", "lee-pairs", "--base", "nobody/no-such-model", "--out", str(out)]
    )
    assert "cannot start from 'nobody/no-such-model'" in err and "save the model to a folder" in err
    assert not out.exists()


def _without(base: Path, out: Path, drop: str) -> Path:
    """A copy of ``base`` whose weights lack every tensor whose name contains ``drop``."""
    from safetensors.torch import save_file

    out.mkdir(parents=True)
    for f in base.iterdir():
        if f.is_file() and f.name != "model.safetensors":
            (out / f.name).write_bytes(f.read_bytes())
    save_file({k: v.contiguous() for k, v in _weights(base).items() if drop not in k}, str(out / "model.safetensors"))
    return out


def test_a_base_without_a_pooler_fine_tunes_and_one_without_an_encoder_weight_is_refused(base, pairs, tmp_path):
    """A masked-language model's checkpoint has no pooler (the family's members): it is new, like the head. A
    missing encoder weight would train from noise: one line, nothing written."""
    assert any("pooler" in k for k in _weights(base))  # else the first half tests nothing
    no_pooler = _without(base, tmp_path / "no-pooler", "pooler")
    got = finetune("lee-pairs", tmp_path / "ft", str(no_pooler), SMALL, progress=False, data=pairs)
    assert got["kind"] == "fine-tuned" and any("pooler" in k for k in _weights(tmp_path / "ft"))
    no_layer = _without(base, tmp_path / "no-layer", "layer.0.attention.self.query.weight")
    with pytest.raises(FinetuneError, match="lacks 1 encoder weights .*query.weight"):
        finetune("lee-pairs", tmp_path / "ft2", str(no_layer), SMALL, progress=False, data=pairs)
    assert not (tmp_path / "ft2" / "model.safetensors").exists()
