"""The family's models as the chapters read them: the members' folders found in data/models/ (or named), each
loaded with its role in the family (member or untrained twin, seed, trained enough or not, from the folder's
``provenance.json`` as :mod:`identifiability.pretrain.train` writes it), and the learning curves the
provenance holds. The registry of members is :mod:`identifiability.pretrain.family`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..base.fileio import read_json
from ..evidence.head_width import FamilyModel
from ..models.loaded_model import LoadedModel
from .family import MEMBERS


def family_model(
    lm: LoadedModel,
    record: dict | None = None,
    *,
    member: str | None = None,
    twin: bool | None = None,
    seed: int | None = None,
    trained_enough: bool | None = None,
    accuracy_gain: float | None = None,
) -> FamilyModel:
    """``lm`` as a model of the family. ``record``: its folder's ``provenance.json`` as ``pretrain.train``
    writes it (``kind``: "pretrained-mlm" or "random-init twin"; ``member``: the member's name, width, heads,
    seed; ``held_out``: the held-out scores per checkpoint, the last one final; ``unigram``: the baseline's;
    ``trained_enough``). What neither the arguments nor the record give is read from ``lm``'s config (width,
    heads) and provenance; a model whose name ends in ``-init`` is a twin of the member without it."""
    p = {**lm.provenance, **(record or {})}
    info = p["member"] if isinstance(p.get("member"), dict) else {}
    if twin is None:
        twin = "twin" in str(p.get("kind", "")) or str(p.get("name", "")).endswith("-init")
    if member is None:
        member = info.get("name") or str(p.get("name") or lm.name).removesuffix("-init")
    held, unigram = p.get("held_out"), p.get("unigram")
    if accuracy_gain is None and not twin and held and isinstance(unigram, dict):
        accuracy_gain = float(held[-1]["accuracy"]) - float(unigram["accuracy"])
    return FamilyModel(
        name=member + "-init" if twin else member,
        member=member,
        d_v=lm.d_v,
        width=lm.d_model,
        heads=lm.n_heads,
        seed=int(info.get("seed", p.get("seed", 0)) if seed is None else seed),
        trained_enough=bool(p.get("trained_enough", False) if trained_enough is None else trained_enough),
        twin=twin,
        accuracy_gain=accuracy_gain,
    )


def family_folders(members: str = "") -> list[str]:
    """The models the chapter measures: ``members`` (comma-separated folders or ids), or else every member of
    :data:`identifiability.pretrain.family.MEMBERS` whose finished folder is in data/models/, each followed by
    its twin (``<name>-init``) where that is there too. Empty when neither: the chapter is not run."""
    if members.strip():
        return [m.strip() for m in members.split(",") if m.strip()]
    from ..base.paths import data_root

    root = data_root() / "models"
    found = []
    for m in MEMBERS:
        for name in (m.name, f"{m.name}-init"):
            if (root / name / "provenance.json").is_file():  # written last: the folder is complete
                found.append(str(root / name))
    return found


def family_models(members: str = "", device: str = "cpu") -> list[tuple[LoadedModel, FamilyModel]]:
    """Each model of :func:`family_folders`, loaded, with its role in the family (:func:`family_model`, from
    its folder's provenance.json where it has one)."""
    from ..models.load import load_model

    out = []
    for name in family_folders(members):
        prov = Path(name) / "provenance.json"
        lm = load_model(name, device=device)
        out.append((lm, family_model(lm, read_json(prov) if prov.is_file() else None)))
    return out


def learning_table(members: str = "") -> pd.DataFrame:
    """Held-out masked-token accuracy of each pre-trained member of :func:`family_folders` at each checkpoint,
    from its provenance.json (step 0 is its untrained twin). Columns: member, d_v, step, tokens_seen, loss,
    accuracy, unigram (the unigram baseline's accuracy on the same masked tokens), trained_enough."""
    rows = []
    for name in family_folders(members):
        path = Path(name) / "provenance.json"
        p = read_json(path) if path.is_file() else {}
        if p.get("kind") != "pretrained-mlm":
            continue
        for h in p["held_out"]:
            rows.append(
                dict(
                    member=p["member"]["name"], d_v=p["member"]["d_v"], step=h["step"], tokens_seen=h["tokens_seen"],
                    loss=h["loss"], accuracy=h["accuracy"], unigram=p["unigram"]["accuracy"],
                    trained_enough=p["trained_enough"],
                )
            )  # fmt: skip
    return pd.DataFrame(rows)


def family_learning(members: str = "", recorded: dict | None = None) -> pd.DataFrame:
    """:func:`learning_table` of the family in data/models/ (or ``members``), or else a recorded run's."""
    table = learning_table(members)
    return table if len(table) or not recorded else pd.DataFrame(recorded.get("hw_learning", []))


def checkpoints(folder: str | Path) -> list[tuple[int, Path]]:
    """(tokens seen, folder) of each saved checkpoint of the pre-trained member in ``folder`` (its
    ``checkpoints/step-N/``, tokens from its provenance.json's held-out scores, whose steps are the
    checkpoints'), in training order, its untrained twin (0 tokens, ``<name>-init``) first where it is there.
    Empty for a folder that is not a pre-trained member's."""
    folder = Path(folder)
    path = folder / "provenance.json"
    p = read_json(path) if path.is_file() else {}
    if p.get("kind") != "pretrained-mlm" or not (folder / "checkpoints").is_dir():
        return []
    tokens = {int(h["step"]): int(h["tokens_seen"]) for h in p.get("held_out", [])}
    twin = folder.with_name(folder.name + "-init")
    out = [(0, twin)] if (twin / "config.json").is_file() else []
    for ck in sorted((folder / "checkpoints").glob("step-*")):
        step = int(ck.name.split("-")[1])
        if step in tokens and (ck / "config.json").is_file():
            out.append((tokens[step], ck))
    return out
