"""Chapter 7 (head width): without a model of the family every prediction is "not run", naming make family
(or, where the checkout ships a recorded family run, its verdicts are shown); on a pilot family pre-trained
here for one step (two members of width 128 and their twins, the real training code; run ahead in the
background lane) it measures every model and records the family's tables, and judges no undertrained member."""

from __future__ import annotations

from pathlib import Path

import torch

from identifiability.base.fileio import read_json
from identifiability.chapters.contract import by_name
from identifiability.chapters.execution import run_notebook
from identifiability.pretrain.family import Member
from identifiability.pretrain.mlm import load_tokenizer
from identifiability.pretrain.train import Settings, train_member
from identifiability.recorded import family as record_family
from identifiability.verdicts.claims import load_claims, robustness_names

from .background import call, chapter

STEM = by_name("head_width").stem
PREDICTIONS = ("C19", "C20", "C21")


def test_without_a_family_every_prediction_is_not_run_naming_make_family(background):
    r = background.chapter("head_width")["results"]
    if record_family.find() is not None:  # a recorded family run ships with the checkout: shown from it
        assert all(r["claims"][c]["verdict"] for c in PREDICTIONS)
        return
    claims = {c["id"]: c for c in load_claims()}
    for c in PREDICTIONS:
        v = r["claims"][c]
        assert v["verdict"] == "not run in this build" and "`make family`" in v["reason"]
        assert [name for name, _ in v["robustness"]] == robustness_names(claims[c])
    assert r["hw_models"] == [] and r["hw_curves"] == []


def pilot_family(folder: str) -> None:
    """Pre-train the pilot family (two members of width 128 and their twins, one step of the real training
    code) into ``folder``/models and run the chapter on it, its results in ``folder``/r: a background job
    (tests/book/background.py)."""
    tok = load_tokenizer()
    g = torch.Generator().manual_seed(0)
    blocks = torch.randint(1000, 20000, (40, 64), generator=g)
    blocks[:, 0], blocks[:, -1] = tok.cls_token_id, tok.sep_token_id
    one_step = Settings(tokens=32 * 64, positions=256, checkpoint_tokens=32 * 64)
    folders = []
    for member in (Member(128, 4), Member(128, 8)):
        out = Path(folder) / "models" / member.name
        train_member(member, blocks[:32], blocks[32:], out, one_step, progress=False, tokenizer=tok)
        folders += [str(out), f"{out}-init"]
    params = {"members": ",".join(folders), "n_sources": 3, "ratios": "1,1.25,2", "results_dir": f"{folder}/r"}
    run_notebook(by_name("head_width").source, Path(folder) / "nb", params, progress=False)


PILOT = call(pilot_family)
BACKGROUND = (chapter("head_width"), PILOT)


def test_the_chapter_measures_a_pilot_family_and_judges_no_undertrained_member(background):
    r = read_json(background.result(PILOT) / "r" / f"{STEM}.json")["results"]
    assert sorted(m["name"] for m in r["hw_models"]) == sorted(
        ["mlm-w128-dv32-seed0", "mlm-w128-dv32-seed0-init", "mlm-w128-dv16-seed0", "mlm-w128-dv16-seed0-init"]
    )
    assert len(r["hw_thresholds"]) == 4 and {row["d_v"] for row in r["hw_thresholds"]} == {16, 32}
    assert len(r["hw_curves"]) == 4 * 3  # every model at every ratio
    assert [row["tokens_seen"] for row in r["hw_learning"] if row["member"] == "mlm-w128-dv32-seed0"] == [0, 2048]
    for c in PREDICTIONS:  # one step of training: every member undertrained, none judged
        v = r["claims"][c]
        assert v["verdict"] == "not testable on this model" and "undertrained" in v["reason"], (c, v["reason"])
