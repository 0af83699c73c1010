"""Masked-language-model pre-training of one family member, resumable bit for bit.

A member becomes a ``BertForMaskedLM`` (:mod:`.mlm`: the model, BERT's masks, the held-out scores) whose
weights before step 0 are its random-initialisation twin, saved as its own folder ``<out>-init``. AdamW with
linear warm-up and decay, the learning rate a function of the step alone.

Every draw is a function of the seed and a counter, never of what ran before: an epoch's block order comes
from (seed, epoch), a step's masks from (seed, step), the held-out masks from one fixed seed. A checkpoint
(``<out>/checkpoint``: weights, AdamW's state tensors, the torch RNG state for dropout, the step; safetensors
and JSON, :func:`identifiability.models.training.save_state`) therefore resumes to the same weights, bit for bit at
a fixed thread count, as a run never stopped. Each checkpoint also keeps the weights alone under
``<out>/checkpoints/step-NNNNNN`` (a folder ``load_model`` reads) and the held-out loss and accuracy.

The finished folder holds the config, ``model.safetensors`` (the encoder under ``bert.``, the head under
``cls.``), the tokenizer and ``provenance.json``, last. The Dask jobs and the command line are in
:mod:`.jobs`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from ..base.fileio import read_json
from ..base.stops import Interrupted
from ..models.training import (
    CHECKPOINT,
    PROVENANCE,
    Refusals,
    claim_folder,
    load_checkpoint,
    lr_at,
    only_run,
    optimizer,
    optimizer_step,
    rerun_line,
    save_folder,
    save_state,
    write_model_folder,
    writes,
)
from .family import MIN_GAIN, POSITIONS, TOKENS, Member
from .mlm import (
    MASK,
    HeldOut,
    PretrainError,
    batch_indices,
    build_model,
    check_member,
    evaluate,
    generator,
    load_tokenizer,
    mask_blocks,
    masked_logits,
    special_ids,
    unigram_baseline,
)

CHECKPOINTS = "checkpoints"  # step-NNNNNN: the weights alone at every checkpoint, kept


@dataclass(frozen=True)
class Settings:
    """What every member shares (the member itself holds its architecture and seed).

    Attributes:
        tokens: input tokens to train on (steps = ceil(tokens / (batch_size * block length))).
        positions: trained positions (the config's ``max_position_embeddings``); blocks may be shorter.
        batch_size: blocks per AdamW step.
        lr: peak learning rate (linear warm-up over ``warmup`` of the steps, then linear decay to 0).
        weight_decay: AdamW's decoupled weight decay on matrices (not on biases and LayerNorm gains).
        mask_rate: share of the ordinary tokens predicted.
        clip: gradient norm clipping.
        checkpoint_tokens: a checkpoint about every this many tokens, and at the last step.
    """

    tokens: int = TOKENS
    positions: int = POSITIONS
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup: float = 0.05
    mask_rate: float = 0.15
    clip: float = 1.0
    checkpoint_tokens: int = 1_000_000

    def check(self) -> None:
        for name in ("tokens", "positions", "batch_size", "checkpoint_tokens"):
            if getattr(self, name) < 1:
                raise PretrainError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")

    def steps(self, length: int) -> int:
        return -(-self.tokens // (self.batch_size * length))

    def every(self, length: int) -> int:
        """Steps between checkpoints."""
        return max(1, round(self.checkpoint_tokens / (self.batch_size * length)))


# -- folders ------------------------------------------------------------------------------------------------


def twin_folder(out: Path) -> Path:
    return out.with_name(f"{out.name}-init")


def identity_of(member: Member, settings: Settings) -> dict:
    """What makes a run this run: its member and settings (the text is checked on resume, :func:`data_key`)."""
    return json.loads(json.dumps({"kind": "pretrained-mlm", "member": member.as_dict(), "settings": asdict(settings)}))


def data_key(train: torch.Tensor, heldout: torch.Tensor) -> str:
    """SHA-256 of the train and held-out blocks' ids (int64): a resumed run must see the same text."""
    h = hashlib.sha256()
    for t in (train, heldout):
        h.update(str(tuple(t.shape)).encode() + t.to(torch.int64).contiguous().numpy().tobytes())
    return h.hexdigest()


REFUSALS = Refusals(  # the folder check's refusals, in this command's words (no --out: its folders are named)
    PretrainError,
    lambda record: record.get("kind", "of unknown kind"),
    a_file="{out} is a file, not a folder: remove it or train into another folder",
    other_model="{out} already holds another model ({about}, of another member or settings): remove that folder to "
    "replace it",
    other_run="{out} holds an interrupted run of other settings: resume it with its own, or remove that folder",
    not_empty="{out} is not empty and holds no run of this member (no {provenance}): remove it first",
)


def claim(out: Path, identity: dict) -> tuple[str, dict | None]:
    """What to do with the member's folder ``out`` (:func:`identifiability.models.training.claim_folder`): done,
    resume or new, or a one-line :class:`PretrainError`, before any work and with nothing touched."""
    return claim_folder(out, identity, REFUSALS)


def resumes_from(out: Path) -> int | None:
    """The step whose checkpoint a rerun resumes the run in ``out`` from (None: from the start)."""
    state = out / CHECKPOINT / "state.json"
    return int(read_json(state)["step"]) if state.is_file() else None


def interrupted(out: Path, name: str, total: int) -> Interrupted:
    """What running the same command again does after a Ctrl-C."""
    state = out / CHECKPOINT / "state.json"
    if (out / PROVENANCE).is_file():
        return Interrupted(f"interrupted; {name} is saved in {out}")
    if state.is_file():
        step = read_json(state)["step"]
        return Interrupted(f"interrupted; run the same command again to resume {name} after step {step} of {total}")
    return Interrupted(f"interrupted before {name}'s first checkpoint; run the same command again to start it over")


def _save_checkpoint(out: Path, model, opt, tokenizer, meta: dict, keep: bool) -> None:
    """The step's weights under ``checkpoints/`` (``keep``), then the latest checkpoint. A full disk is one
    line: the files are written beside their targets and renamed, so the previous checkpoint stays in force."""
    step = meta["step"]
    kept = out / CHECKPOINTS / f"step-{step:06d}"

    def before() -> str:
        state = out / CHECKPOINT / "state.json"
        previous = f"step {read_json(state)['step']}" if state.is_file() else "none yet"
        return f"the previous one ({previous}) is intact"

    # a folder the full disk left empty or partial goes (a step's, the first checkpoint's): the rerun writes it again
    made = [out / CHECKPOINT, *([kept] if keep else [])]
    with writes(f"the checkpoint of step {step}", out, before, PretrainError, made=made):
        if keep:
            write_model_folder(kept, model, tokenizer)
        save_state(out / CHECKPOINT, model, opt, f"step-{step:06d}.safetensors", meta)


def _check_blocks(train: torch.Tensor, heldout: torch.Tensor, s: Settings) -> None:
    for what, t in (("train", train), ("held-out", heldout)):
        if t.ndim != 2 or t.dtype not in (torch.int64, torch.int32) or len(t) == 0:
            raise PretrainError(f"the {what} blocks must be a non-empty (n_blocks, length) tensor of token ids")
    if train.shape[1] > s.positions or heldout.shape[1] > s.positions:
        raise PretrainError(f"blocks of {train.shape[1]} tokens are longer than the {s.positions} trained positions")
    if len(train) < s.batch_size:
        raise PretrainError(f"{len(train)} train blocks are fewer than one batch of {s.batch_size}")


def _save_twin(twin: Path, model, tokenizer, identity: dict, member: Member) -> None:
    prov = {
        "identity": {"kind": "random-init twin", "of": identity},
        "kind": "random-init twin",
        "member": member.as_dict(),
        "seed": member.seed,
        "initialiser": f"BertForMaskedLM(config) under torch.manual_seed({member.seed}): the weights before step 0",
        "software": {"torch": torch.__version__},
    }
    save_folder(twin, model, tokenizer, prov)


def train_member(
    member: Member,
    train: torch.Tensor,
    heldout: torch.Tensor,
    out: str | Path,
    settings: Settings | None = None,
    device: str = "cpu",
    progress: bool = True,
    on_step: Callable[[int, int], None] | None = None,
    text: dict | None = None,
    tokenizer=None,
) -> dict:
    """Pre-train ``member`` on ``train`` blocks (n, L) of token ids, each [CLS] ... [SEP]; returns the
    provenance it saved in ``out``.

    Args:
        heldout: (m, L) blocks scored at each checkpoint, with fixed masks.
        out: the model folder; its twin goes to ``<out>-init``. A folder with this run's checkpoint resumes;
            one that already holds this model is returned as it is (with ``already_there``); anything else is
            refused with one line, before any work.
        on_step: called as ``on_step(step, total)`` after every step and its checkpoint (1-based); an
            exception from it stops the run as an interruption would.
        text: what the blocks are (sources, counts), copied into the provenance.
    """
    settings = settings or Settings()
    settings.check()
    check_member(member)
    out = Path(out)
    with _only_run(out, member.name):
        return _train_member(member, train, heldout, out, settings, device, progress, on_step, text, tokenizer)


def _only_run(out: Path, name: str):
    """The folder's lock (:func:`identifiability.models.training.only_run`) in this command's words."""
    return only_run(
        out,
        lambda: PretrainError(
            f"another run is training {name} into {out} now: let it finish (a rerun then finds it done), or "
            "stop it and run the same command again to resume"
        ),
    )


def _train_member(
    member: Member,
    train: torch.Tensor,
    heldout: torch.Tensor,
    out: Path,
    settings: Settings,
    device: str,
    progress: bool,
    on_step: Callable[[int, int], None] | None,
    text: dict | None,
    tokenizer,
) -> dict:
    """:func:`train_member` once its lock is held."""
    identity = identity_of(member, settings)
    state, prov = claim(out, identity)
    if state == "done":
        tqdm.write(f"{member.name}: already trained in {out}, skipped")
        return {**prov, "folder": str(out), "already_there": True}  # type: ignore[dict-item]
    twin = twin_folder(out)
    twin_state, _ = claim(twin, {"kind": "random-init twin", "of": identity})
    _check_blocks(train, heldout, settings)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise PretrainError(f"--device {device}: no CUDA device here; pass --device cpu")
    length = train.shape[1]
    total = settings.steps(length)
    key = data_key(train, heldout)
    if state == "resume" and prov.get("data") != key:  # type: ignore[union-attr]
        raise PretrainError(f"{out} holds an interrupted run on other text: remove it to start over")
    tokenizer = tokenizer or load_tokenizer()
    held = HeldOut.draw(heldout, tokenizer, settings.mask_rate)

    with rerun_line(lambda: interrupted(out, member.name, total)):
        model = build_model(member, tokenizer, settings.positions)
        if twin_state == "new":
            _save_twin(twin, model, tokenizer, identity, member)
        model.to(device)
        opt = optimizer(model, settings.lr, settings.weight_decay)
        if state == "resume":
            meta = _resume(out, model, opt)
            tqdm.write(f"{member.name}: resuming after step {meta['step']} of {total}")
        else:
            first = {"step": 0, "tokens_seen": 0, **evaluate(model, held, tokenizer.pad_token_id, device)}
            meta = {"identity": identity, "data": key, "step": 0, "tokens_seen": 0, "seconds": 0.0, "curve": []}
            meta |= {"held_out": [first], "unigram": unigram_baseline(train, held, tokenizer)}
            _save_checkpoint(out, model, opt, tokenizer, meta, keep=False)
        meta = _train_steps(member, settings, model, opt, tokenizer, train, held, meta, out, device, progress, on_step)
        pad = tokenizer.pad_token_id
        counts = {"train_blocks": len(train), "train_tokens": int((train != pad).sum())}
        counts |= {"heldout_blocks": len(heldout), "heldout_tokens": int((heldout != pad).sum())}
        prov = provenance(member, settings, meta, {**(text or {}), **counts, "block_length": length}, device, twin)
        model.eval()
        save_folder(out, model, tokenizer, prov)
        shutil.rmtree(out / CHECKPOINT, ignore_errors=True)
        return {**prov, "folder": str(out)}


def _resume(out: Path, model, opt: torch.optim.Optimizer) -> dict:
    """Load ``out``'s checkpoint into ``model``, ``opt`` and the RNG; returns its record. A checkpoint that
    cannot be read is one line, and nothing is changed."""
    try:
        return load_checkpoint(out / CHECKPOINT, model, opt)
    except Exception as e:
        raise PretrainError(
            f"the checkpoint in {out / CHECKPOINT} is corrupt ({type(e).__name__}): nothing was changed; "
            f"remove {out} to start over"
        ) from None


def _train_steps(
    member: Member,
    s: Settings,
    model,
    opt: torch.optim.Optimizer,
    tokenizer,
    train: torch.Tensor,
    held: HeldOut,
    meta: dict,
    out: Path,
    device: str,
    progress: bool,
    on_step: Callable[[int, int], None] | None,
) -> dict:
    """Train the steps after ``meta``'s (all of them from a new run's first checkpoint), scoring the held-out
    blocks and checkpointing every ``s.every`` steps and at the last; returns the last checkpoint's record.

    Args:
        train: (n, L) blocks; step k's batch and masks are functions of (``member.seed``, k) alone.
    """
    length = train.shape[1]
    total, every = s.steps(length), s.every(length)
    pad, mask_id, vocab, specials = (
        tokenizer.pad_token_id,
        tokenizer.mask_token_id,
        len(tokenizer),
        special_ids(tokenizer),
    )
    model.train()
    start, seen, t0 = meta["step"], meta["tokens_seen"], time.time() - meta["seconds"]
    curve, held_out = list(meta["curve"]), list(meta["held_out"])
    bar = tqdm(total=total, initial=start, desc=member.name, unit="step", disable=not progress)
    for step in range(start, total):
        blocks = train[batch_indices(step, len(train), s.batch_size, member.seed)]
        inputs, masked = mask_blocks(blocks, generator(member.seed, MASK, step), specials, mask_id, vocab, s.mask_rate)
        attention = (blocks != pad).long()
        logits = masked_logits(model, inputs.to(device), attention.to(device), masked.to(device))
        loss = F.cross_entropy(logits.float(), blocks[masked].to(device))
        optimizer_step(model, opt, loss, lr_at(step, total, s.lr, s.warmup), s.clip)
        seen += int(attention.sum())
        curve.append([step + 1, seen, loss.item()])
        bar.update()
        bar.set_postfix(loss=f"{np.mean([c[2] for c in curve[-20:]]):.3f}")
        if (step + 1) % every == 0 or step + 1 == total:
            held_out.append({"step": step + 1, "tokens_seen": seen, **evaluate(model, held, pad, device)})
            model.train()
            meta = {**meta, "step": step + 1, "tokens_seen": seen, "seconds": time.time() - t0}
            meta |= {"curve": curve, "held_out": held_out}
            _save_checkpoint(out, model, opt, tokenizer, meta, keep=True)
        if on_step is not None:
            on_step(step + 1, total)
    bar.close()
    return meta


def provenance(member: Member, s: Settings, meta: dict, text: dict, device: str, twin: Path) -> dict:
    """What the folder is, from the last checkpoint's record: text, member, settings, learning curve, held-out
    scores at each checkpoint beside the unigram baseline and the twin (the scores at step 0)."""
    import transformers

    last, unigram = meta["held_out"][-1], meta["unigram"]
    return {
        "identity": meta["identity"],
        "kind": "pretrained-mlm",
        "member": member.as_dict(),
        "seed": member.seed,
        "settings": asdict(s),
        "text": {**text, "data_key": meta["data"]},
        "tokens_seen": meta["tokens_seen"],
        "steps": meta["step"],
        "minutes": round(meta["seconds"] / 60, 2),
        "device": device if not device.startswith("cuda") else torch.cuda.get_device_name(),
        "learning_curve": {"columns": ["step", "tokens", "train_loss"], "rows": meta["curve"]},
        "held_out": meta["held_out"],
        "unigram": unigram,
        "twin": {"folder": twin.name, **meta["held_out"][0]},
        "min_gain": MIN_GAIN,
        "trained_enough": last["accuracy"] >= unigram["accuracy"] + MIN_GAIN,
        "software": {"torch": torch.__version__, "transformers": transformers.__version__},
    }
