"""The family's pre-training as Dask tasks on a LocalCluster: one task per member (a member named twice runs
once), each folder complete and loadable, a second run skips them all; and the command line end to end on a
real member with a few steps of synthetic blocks."""

from __future__ import annotations

import json

import pytest
import torch

from identifiability import cli
from identifiability.base import paths
from identifiability.models.load import load_model
from identifiability.pretrain import jobs
from identifiability.pretrain.family import Member
from identifiability.pretrain.train import Settings

SMALL = Settings(tokens=4 * 32, positions=8, batch_size=4, checkpoint_tokens=64)
A, B = Member(16, 2, layers=2), Member(16, 4, layers=2)


def _blocks(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(2000, 2030, (n, 6), generator=g)
    return torch.cat([torch.full((n, 1), 101), x, torch.full((n, 1), 102)], 1)


@pytest.fixture(autouse=True)
def data_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "data"))
    return tmp_path / "data"


def test_each_member_is_one_task_once_and_a_rerun_skips_them(tmp_path, capsys):
    blocks = (_blocks(16, 0), _blocks(4, 1))
    root = tmp_path / "models"
    results = jobs.pretrain_family([A, B, A], workers=2, settings=SMALL, blocks=blocks, root=root, progress=False)
    assert sorted(results) == sorted([A.name, B.name])
    for m in (A, B):
        r = results[m.name]
        assert isinstance(r, dict) and not r.get("already_there") and r["steps"] == 4, r
        folder = root / f"{m.name}-128tok"  # a run of other than the family's tokens: a folder of its own
        assert r["folder"] == str(folder) == str(jobs.folder_of(m, SMALL, root))
        prov = json.loads((folder / "provenance.json").read_text())
        assert prov["member"]["heads"] == m.heads and [h["step"] for h in prov["held_out"]] == [0, 2, 4]
        assert type(load_model(str(folder)).model).__name__ == "BertModel"
        assert (root / f"{m.name}-128tok-init" / "provenance.json").is_file()
    # the two head splits started from the same weights: their twins are identical
    twins = [load_model(str(root / f"{m.name}-128tok-init")).model.state_dict() for m in (A, B)]
    assert all(torch.equal(twins[0][k], twins[1][k]) for k in twins[0] if not k.startswith("pooler."))
    capsys.readouterr()
    again = jobs.pretrain_family([A, B], workers=2, settings=SMALL, blocks=blocks, root=root, progress=False)
    assert all(r["already_there"] for r in again.values())
    assert capsys.readouterr().out.count("already trained") == 2


def test_the_command_trains_a_real_member_into_its_pilot_folder(data_folder, monkeypatch, capsys):
    monkeypatch.setattr(jobs, "text_blocks", lambda s: (_blocks(64, 0), _blocks(8, 1), {"source": "synthetic"}))
    args = ["pretrain", "--members", "mlm-w64-dv32-seed0,mlm-w64-dv32-seed0", "--tokens", "512", "--workers", "1"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    folder = data_folder / "models" / "mlm-w64-dv32-seed0-512tok"
    assert out.count("held-out masked-token accuracy") == 1 and str(folder) in out
    prov = json.loads((folder / "provenance.json").read_text())
    assert prov["steps"] == 2 and prov["text"]["source"] == "synthetic"  # 512 tokens / (32 blocks x 8 tokens)
    assert prov["member"]["name"] == "mlm-w64-dv32-seed0" and prov["settings"]["positions"] == 256
    assert cli.main(args) == 0 and "already trained" in capsys.readouterr().out
