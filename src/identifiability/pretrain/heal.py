"""Healing a re-split model (:mod:`identifiability.models.resplit`) back to the original's function by
distillation, resumable bit for bit.

The member starts as the original re-split into heads of another width (every weight kept) and is trained to
reproduce the original's hidden states at every depth (the embeddings' output and each layer's): the loss is
the mean over depths of the squared error at that depth divided by the original's variance there (in the
batch), so that every depth counts alike whatever the scale of its states. Blocks of the pre-training text
(:func:`identifiability.pretrain.text.token_blocks`), AdamW with warm-up then linear decay
(:func:`identifiability.models.training.lr_at`), the settings of issue 55 by default.

Two ways to heal (:attr:`HealSettings.mode`):

- ``global``: the member runs as one model, every depth matched at once, gradients through the whole stack;
- ``layerwise``: each layer is trained on the original's input to it (the member's own output at each depth
  is recorded for the loss and replaced by the original's before the next layer reads it), so that a layer
  is never trained on what the layers below it still get wrong. One forward pass trains every layer.

Dropout is off while healing: the target is a deterministic function, and noise in the member's states would
only be fitted against. The steps are functions of (seed, step) alone (the block order,
:func:`identifiability.pretrain.mlm.batch_indices`), so a checkpoint (weights, AdamW's state, step; safetensors
and JSON, :func:`identifiability.models.training.save_state`) resumes to the weights a run never stopped gives.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from ..base.fileio import read_json
from ..models.adapters import Adapter
from ..models.resplit import ResplitError, check_resplit, heads_and_width, resplit
from ..models.training import (
    CHECKPOINT,
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
    writes,
)
from .fidelity import Fidelity, Reference, fidelity
from .mlm import batch_indices
from .train import interrupted

MODES = ("global", "layerwise")
BAR = 0.95  # a member is healed when every depth's cosine and the pairs' Spearman reach this (issue 55, item 3)


@dataclass(frozen=True)
class HealSettings:
    """One healing run.

    Attributes:
        width: the member's head width d_v'.
        tokens: input tokens to train on (steps = ceil(tokens / (batch_size * block length))).
        batch_size: blocks per AdamW step.
        lr: peak learning rate, reached after ``warmup_steps`` and decayed linearly to 0 at the last step.
        weight_decay: AdamW's decoupled weight decay on matrices.
        clip: gradient norm clipping.
        seed: the block order's seed.
        mode: ``global`` or ``layerwise`` (module docstring).
        checkpoint_tokens: a checkpoint (and a fidelity point) about every this many tokens, and at the end.
    """

    width: int
    tokens: int = 400_000
    batch_size: int = 16
    lr: float = 1e-4
    warmup_steps: int = 50
    weight_decay: float = 0.01
    clip: float = 1.0
    seed: int = 0
    mode: str = "global"
    checkpoint_tokens: int = 50_000

    def check(self) -> None:
        for name in ("tokens", "batch_size", "checkpoint_tokens"):
            if getattr(self, name) < 1:
                raise ResplitError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.mode not in MODES:
            raise ResplitError(f"--mode must be one of {', '.join(MODES)}, got {self.mode!r}")

    def steps(self, length: int) -> int:
        return -(-self.tokens // (self.batch_size * length))

    def every(self, length: int) -> int:
        return max(1, round(self.checkpoint_tokens / (self.batch_size * length)))


def identity_of(base_key: str, settings: HealSettings) -> dict:
    """What makes a run this run: the original's content key and the settings (the text is checked on resume)."""
    return json.loads(json.dumps({"kind": "resplit-healed", "base": base_key, "settings": asdict(settings)}))


def text_key(train: torch.Tensor) -> str:
    """SHA-256 of the training blocks' ids (int64): a resumed run must see the same text."""
    return hashlib.sha256(str(tuple(train.shape)).encode() + train.to(torch.int64).numpy().tobytes()).hexdigest()


REFUSALS = Refusals(
    ResplitError,
    lambda record: record.get("kind", "of unknown kind"),
    a_file="{out} is a file, not a folder: remove it or heal into another folder",
    other_model="{out} already holds another model ({about}, of another original or settings): remove that folder "
    "to replace it",
    other_run="{out} holds an interrupted healing of other settings: resume it with its own, or remove that folder",
    not_empty="{out} is not empty and holds no healing of this member (no {provenance}): remove it first",
)


def claim(out: Path, identity: dict) -> tuple[str, dict | None]:
    """Done, resume or new for the member's folder ``out``; a one-line :class:`ResplitError` otherwise."""
    return claim_folder(out, identity, REFUSALS)


# -- the loss -------------------------------------------------------------------------------------------------


def depth_loss(mine: list[torch.Tensor], target: list[torch.Tensor]) -> torch.Tensor:
    """Scalar: the mean over depths of mean((mine - target)^2) / var(target); each tensor (B, L, d)."""
    terms = [((m.float() - t) ** 2).mean() / t.var().clamp_min(1e-12) for m, t in zip(mine, target)]
    return torch.stack(terms).mean()


def layer_outputs(model: torch.nn.Module, adapter: Adapter) -> list[torch.nn.Module]:
    """The modules whose outputs are the hidden states: x (the embeddings' output), then each layer's last
    LayerNorm (post-LN: a layer's output is its FFN LayerNorm's)."""
    n = int(model.config.num_hidden_layers)
    return [adapter.x_module(model), *adapter.layer_modules(model, adapter.ln_ffn, n)]


@contextmanager
def teacher_forced(
    model: torch.nn.Module, adapter: Adapter, target: list[torch.Tensor], mine: list[torch.Tensor]
) -> Iterator[None]:
    """While active, each hidden state ``model`` computes is appended to ``mine`` and replaced by ``target``'s
    (detached) before the next layer reads it: every layer then runs on the original's input to it."""

    def hook(depth: int):
        def replace(_module, _inputs, output):
            mine.append(output)
            return target[depth].to(output.dtype)

        return replace

    handles = [m.register_forward_hook(hook(i)) for i, m in enumerate(layer_outputs(model, adapter))]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def step_loss(
    member: torch.nn.Module, original: torch.nn.Module, adapter: Adapter, ids: torch.Tensor, mode: str
) -> torch.Tensor:
    """The loss of one batch ``ids`` (B, L) of unpadded token ids."""
    with torch.no_grad():
        target = [h.detach() for h in original(input_ids=ids, output_hidden_states=True).hidden_states]
    if mode == "global":
        mine = list(member(input_ids=ids, output_hidden_states=True).hidden_states)
    else:
        mine = []
        with teacher_forced(member, adapter, target, mine):
            member(input_ids=ids)
    return depth_loss(mine, target)


# -- the run --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Original:
    """The model healed toward: a base model (eval mode, never trained), its tokenizer and registry row, a
    name for messages and its content key (the member's identity)."""

    model: torch.nn.Module
    tokenizer: object
    adapter: Adapter
    name: str
    key: str


def heal(
    original: Original,
    settings: HealSettings,
    train: torch.Tensor,
    out: str | Path,
    reference: Reference | None = None,
    device: str = "cpu",
    progress: bool = True,
    on_step: Callable[[int, int], None] | None = None,
) -> dict:
    """Heal ``original`` re-split at ``settings.width`` on ``train`` blocks (n, L) of unpadded token ids into
    the model folder ``out``; returns its provenance.

    Args:
        reference: the original's held-out states (:class:`~identifiability.pretrain.fidelity.Reference`):
            the member's fidelity is measured at step 0 and at every checkpoint (not counted in its seconds).
        out: a folder with this run's checkpoint resumes; one that already holds this member is returned as it
            is (``already_there``); anything else is refused with one line before any work.
        on_step: called as ``on_step(step, total)`` after every step and its checkpoint; an exception from it
            stops the run as an interruption would.
    """
    settings.check()
    check_resplit(original.model.config, original.adapter, settings.width, original.name)
    out = Path(out)
    name = f"{original.name} at d_v = {settings.width}"
    busy = lambda: ResplitError(  # noqa: E731
        f"another run is healing {name} into {out} now: let it finish, or stop it and run the same command again"
    )
    with only_run(out, busy):
        return _heal(original, settings, train, out, reference, device, progress, on_step, name)


def _heal(
    original: Original,
    settings: HealSettings,
    train: torch.Tensor,
    out: Path,
    reference: Reference | None,
    device: str,
    progress: bool,
    on_step: Callable[[int, int], None] | None,
    name: str,
) -> dict:
    """:func:`heal` once its lock is held."""
    identity = identity_of(original.key, settings)
    state, prov = claim(out, identity)
    if state == "done":
        tqdm.write(f"{name}: already healed in {out}, skipped")
        return {**prov, "folder": str(out), "already_there": True}  # type: ignore[dict-item]
    if train.ndim != 2 or len(train) < settings.batch_size:
        raise ResplitError(
            f"healing needs at least one batch of {settings.batch_size} blocks, got {tuple(train.shape)}"
        )
    total = settings.steps(train.shape[1])
    key = text_key(train)
    if state == "resume" and prov.get("data") != key:  # type: ignore[union-attr]
        raise ResplitError(f"{out} holds an interrupted healing on other text: remove it to start over")
    with rerun_line(lambda: interrupted(out, name, total)):
        member = resplit(original.model, original.adapter, settings.width, original.name).to(device)
        opt = optimizer(member, settings.lr, settings.weight_decay)
        if state == "resume":
            meta = _resume(out, member, opt)
            tqdm.write(f"{name}: resuming after step {meta['step']} of {total}")
        else:
            first = _point(member, original, reference, 0, 0, 0.0)
            meta = {"identity": identity, "data": key, "step": 0, "tokens_seen": 0, "seconds": 0.0}
            meta |= {"curve": [], "fidelity": [first] if first else []}
            _save_checkpoint(out, member, opt, meta)
        meta = _steps(member, original, settings, opt, train, meta, out, reference, device, progress, on_step, name)
        prov = provenance(original, settings, meta, member, device, len(train))
        member.eval()
        with writes(f"{name}'s model", out, lambda: "its last checkpoint is intact", ResplitError):
            save_folder(out, member, original.tokenizer, prov)
        shutil.rmtree(out / CHECKPOINT, ignore_errors=True)
        return {**prov, "folder": str(out)}


def _resume(out: Path, model: torch.nn.Module, opt: torch.optim.Optimizer) -> dict:
    try:
        return load_checkpoint(out / CHECKPOINT, model, opt)
    except Exception as e:
        raise ResplitError(
            f"the checkpoint in {out / CHECKPOINT} is corrupt ({type(e).__name__}): nothing was changed; remove "
            f"{out} to start over"
        ) from None


def _save_checkpoint(out: Path, model: torch.nn.Module, opt: torch.optim.Optimizer, meta: dict) -> None:
    step = meta["step"]

    def before() -> str:
        state = out / CHECKPOINT / "state.json"
        previous = f"step {read_json(state)['step']}" if state.is_file() else "none yet"
        return f"the previous one ({previous}) is intact"

    with writes(f"the checkpoint of step {step}", out, before, ResplitError, made=[out / CHECKPOINT]):
        save_state(out / CHECKPOINT, model, opt, f"step-{step:06d}.safetensors", meta)


def _point(
    member: torch.nn.Module, original: Original, reference: Reference | None, step: int, seen: int, seconds: float
) -> dict | None:
    """A fidelity point of the curve (None without a reference)."""
    if reference is None:
        return None
    fid: Fidelity = fidelity(member, original.tokenizer, reference)
    return {"step": step, "tokens_seen": seen, "seconds": round(seconds, 3), **fid.as_dict()}


def _steps(
    member: torch.nn.Module,
    original: Original,
    s: HealSettings,
    opt: torch.optim.Optimizer,
    train: torch.Tensor,
    meta: dict,
    out: Path,
    reference: Reference | None,
    device: str,
    progress: bool,
    on_step: Callable[[int, int], None] | None,
    name: str,
) -> dict:
    """The steps after ``meta``'s, a checkpoint (and a fidelity point) every ``s.every`` steps and at the
    last; returns the last checkpoint's record. ``seconds`` counts the steps alone."""
    length = train.shape[1]
    total, every = s.steps(length), s.every(length)
    warmup = min(1.0, s.warmup_steps / total)
    member.eval()  # no dropout (module docstring); gradients flow all the same
    start, seen, seconds = meta["step"], meta["tokens_seen"], meta["seconds"]
    curve, points = list(meta["curve"]), list(meta["fidelity"])
    bar = tqdm(total=total, initial=start, desc=name, unit="step", disable=not progress)
    for step in range(start, total):
        t0 = time.perf_counter()
        ids = train[batch_indices(step, len(train), s.batch_size, s.seed)].to(device)
        loss = step_loss(member, original.model, original.adapter, ids, s.mode)
        optimizer_step(member, opt, loss, lr_at(step, total, s.lr, warmup), s.clip)
        seconds += time.perf_counter() - t0
        seen += ids.numel()
        curve.append([step + 1, seen, loss.item()])
        bar.update()
        bar.set_postfix(loss=f"{loss.item():.4f}")
        if (step + 1) % every == 0 or step + 1 == total:
            point = _point(member, original, reference, step + 1, seen, seconds)
            points += [point] if point else []
            meta = {**meta, "step": step + 1, "tokens_seen": seen, "seconds": seconds, "curve": curve}
            meta["fidelity"] = points
            _save_checkpoint(out, member, opt, meta)
        if on_step is not None:
            on_step(step + 1, total)
    bar.close()
    return meta


def provenance(
    original: Original, s: HealSettings, meta: dict, member: torch.nn.Module, device: str, blocks: int
) -> dict:
    """What the member's folder is: the original, the width, the settings, the loss and fidelity curves and
    whether the last fidelity point reaches the bar (:data:`BAR`)."""
    import transformers

    heads, width = heads_and_width(member)
    last = meta["fidelity"][-1] if meta["fidelity"] else None
    healed = None if last is None else bool(min(last["cosine"]) >= BAR and last["spearman"] >= BAR)
    return {
        "identity": meta["identity"],
        "kind": "resplit-healed",
        "base": {"name": original.name, "content_key": original.key},
        "heads": heads,
        "width": width,
        "settings": asdict(s),
        "text": {"train_blocks": blocks, "data_key": meta["data"]},
        "tokens_seen": meta["tokens_seen"],
        "steps": meta["step"],
        "minutes": round(meta["seconds"] / 60, 2),
        "device": device if not device.startswith("cuda") else torch.cuda.get_device_name(),
        "loss_curve": {"columns": ["step", "tokens", "loss"], "rows": meta["curve"]},
        "fidelity": meta["fidelity"],
        "bar": BAR,
        "healed": healed,
        "software": {"torch": torch.__version__, "transformers": transformers.__version__},
    }
