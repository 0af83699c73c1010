"""Training in one place: what fine-tuning (:mod:`.finetune`) and pre-training (:mod:`.pretrain.train`) share.

- :func:`claim_folder`: the one check of a model folder before any work: it holds this very model (done),
  this run's checkpoint (resume), nothing (new), or anything else: a one-line refusal in the command's own
  words (:class:`Refusals`), and nothing is touched;
- :func:`save_state` and :func:`load_checkpoint`: a checkpoint (weights, AdamW's state tensors, the torch RNG
  state) as safetensors plus a JSON record, each file written atomically; :func:`disk_full` tells a full
  disk from any other failed write, safetensors' included, and :func:`writes` makes it the one line of both
  commands, with no folder of the failed write left behind;
- :func:`optimizer`, :func:`lr_at` and :func:`optimizer_step`: AdamW with weight decay on matrices only, a
  learning rate that is a function of the step alone (so a resumed run needs no scheduler state), one
  clipped step;
- :func:`write_model_folder` and :func:`save_folder`: a folder ``load_model`` reads, ``provenance.json`` last;
- :func:`rerun_line`: a Ctrl-C turned into the line that says what running the same command again does;
- :func:`only_run`: the lock that keeps a second run out of a folder another run is training into.

Nothing is pickled: tensors are safetensors, everything else JSON.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ..base.fileio import atomic_write, read_json, write_folder, write_json
from ..base.stops import Interrupted

PROVENANCE = "provenance.json"  # written last: its presence says the model folder is complete
CHECKPOINT = "checkpoint"  # the latest checkpoint of an unfinished run: tensors and state.json


# -- the model folder: done, resume, new, or refused ----------------------------------------------------------


@dataclass(frozen=True)
class Refusals:
    """How one command words the refusals of :func:`claim_folder`: each template is one line, formatted with
    ``out`` (the folder), ``about`` (``describe`` of the record found there) and ``provenance`` (the file
    name). The checks are the same for every command; the way out (``--out``, another folder) is its own.

    Attributes:
        error: the command's :class:`~identifiability.base.errors.UserError` subclass.
        describe: what the model or run whose record (provenance or checkpoint state) is in the folder is.
        a_file: the folder is a file.
        other_model: the folder holds a finished model of another identity.
        other_run: the folder holds an interrupted run of another identity.
        not_empty: the folder holds files and no model or run of this command.
    """

    error: type[Exception]
    describe: Callable[[dict], str]
    a_file: str
    other_model: str
    other_run: str
    not_empty: str

    def refuse(self, template: str, out: Path, record: dict | None = None) -> Exception:
        about = self.describe(record) if record is not None else ""
        return self.error(template.format(out=out, about=about, provenance=PROVENANCE))


def _read(path: Path, out: Path, refusals: Refusals) -> dict:
    """The JSON record ``path`` in the model folder ``out``; a corrupt one is one line whose advice, followed,
    works: removing ``out`` (removing the checkpoint alone would leave the kept checkpoints, another refusal)."""
    try:
        return read_json(path)
    except (OSError, ValueError) as e:
        raise refusals.error(
            f"{path} is corrupt ({type(e).__name__}): nothing was changed; remove {out} to start that run over"
        ) from None


def claim_folder(out: Path, identity: dict, refusals: Refusals) -> tuple[str, dict | None]:
    """What to do with the model folder ``out``, decided before any work.

    Returns:
        ("done", its provenance) when it already holds this very model; ("resume", the checkpoint's record)
        when it holds this run's checkpoint (:data:`CHECKPOINT`); ("new", None) when it is absent or empty.

    Raises:
        ``refusals.error``: one line, and nothing touched, when ``out`` is a file, holds another model or
        another run's checkpoint, holds other files, or holds a corrupt record or checkpoint.
    """
    identity = json.loads(json.dumps(identity))  # as read back from JSON (tuples become lists)
    if out.exists() and not out.is_dir():
        raise refusals.refuse(refusals.a_file, out)
    prov_file, state_file = out / PROVENANCE, out / CHECKPOINT / "state.json"
    if prov_file.is_file():
        prov = _read(prov_file, out, refusals)
        if prov.get("identity") == identity:
            return "done", prov
        raise refusals.refuse(refusals.other_model, out, prov)
    if state_file.is_file():
        meta = _read(state_file, out, refusals)
        if meta.get("identity") != identity:
            raise refusals.refuse(refusals.other_run, out, meta)
        tensors = out / CHECKPOINT / str(meta.get("tensors"))
        try:
            from safetensors import safe_open

            with safe_open(str(tensors), framework="pt") as f:
                f.keys()
        except Exception as e:  # safetensors raises its own types: a missing or truncated file is one line
            raise refusals.error(
                f"the checkpoint {tensors} is corrupt or missing ({type(e).__name__}): nothing was changed; remove "
                f"{out} to start over"
            ) from None
        return "resume", meta
    if out.is_dir() and any(out.iterdir()):
        raise refusals.refuse(refusals.not_empty, out)
    return "new", None


@contextmanager
def rerun_line(interrupted: Callable[[], Interrupted]) -> Iterator[None]:
    """A Ctrl-C inside becomes ``interrupted()``: the line that says what a rerun does, read from the folder
    as the interruption left it."""
    try:
        yield
    except Interrupted:
        raise
    except KeyboardInterrupt:
        raise interrupted() from None


@contextmanager
def only_run(out: Path, busy: Callable[[], Exception]) -> Iterator[None]:
    """Holds a lock on ``.<out>.lock`` beside ``out`` while a run trains into it: a second run into the same
    folder (another command, another worker) raises ``busy()`` (one line) instead of training a second time
    over the first's checkpoints. The system releases the lock when the process ends, however."""
    import fcntl

    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_name(f".{out.name}.lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise busy() from None
        yield


# -- checkpoints: safetensors + JSON only ----------------------------------------------------------------------


def disk_full(e: BaseException) -> bool:
    """Whether ``e`` is a write that failed for want of space (ENOSPC, or EDQUOT: a quota): an ``OSError``, or
    safetensors' own error, which carries the system's message only."""
    if isinstance(e, OSError):
        return e.errno in (errno.ENOSPC, errno.EDQUOT)
    return type(e).__name__ == "SafetensorError" and any(os.strerror(c) in str(e) for c in (errno.ENOSPC, errno.EDQUOT))


@contextmanager
def writes(
    what: str, out: Path, kept: Callable[[], str], error: Callable[[str], Exception], made: Sequence[Path] = ()
) -> Iterator[None]:
    """Writes of ``what`` (e.g. "the checkpoint of step 4") into the model folder ``out``: a full disk there
    (:func:`disk_full`) removes the folders of ``made`` that did not exist before (empty or partial: a rerun
    would take them for a finished write, or refuse a folder that holds something) and raises ``error`` with
    the one line that says what is intact (``kept()``, read once the write failed) and that the same command
    resumes. Any other failure passes unchanged."""
    new = [folder for folder in made if not folder.exists()]
    try:
        yield
    except Exception as e:  # safetensors raises its own error for a full disk, not an OSError
        if not disk_full(e):
            raise
        for folder in new:
            shutil.rmtree(folder, ignore_errors=True)
        raise error(
            f"the disk is full: {what} in {out} was not written; {kept()}: free some space and run the same command "
            "again to resume"
        ) from None


def save_state(folder: Path, model: torch.nn.Module, opt: torch.optim.Optimizer, name: str, meta: dict) -> None:
    """Weights, the optimiser's state tensors and the torch RNG state (CUDA's too, once CUDA is in use).

    The tensors go to ``name`` (a safetensors file), then ``state.json`` (``meta`` and the file's name) is
    written, last, so a crash or a full disk while saving leaves the previous checkpoint in force; then the
    older tensor files are removed. Both files are written atomically
    (:func:`~identifiability.base.fileio.atomic_write`).
    """
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {f"model.{k}": v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    for idx, state in opt.state_dict()["state"].items():
        for key, value in state.items():
            if not isinstance(value, torch.Tensor):  # AdamW keeps tensors only; anything else would be lost
                raise TypeError(f"optimizer state {key!r} is not a tensor; the checkpoint cannot hold it")
            tensors[f"optim.{idx}.{key}"] = value.detach().clone().contiguous()
    tensors["rng.torch"] = torch.get_rng_state()  # (n,) uint8: dropout's generator
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # dropout on the GPU draws from its own
        tensors["rng.cuda"] = torch.cuda.get_rng_state()
    atomic_write(folder / name, lambda p: save_file(tensors, str(p)))
    write_json(folder / "state.json", {**meta, "tensors": name})
    for old in folder.glob("*.safetensors"):
        if old.name != name:
            old.unlink()


def load_checkpoint(folder: Path, model: torch.nn.Module, opt: torch.optim.Optimizer) -> dict:
    """Restore what :func:`save_state` wrote into ``model``, ``opt`` and the torch RNG (and CUDA's); returns the
    checkpoint's JSON record (what the caller saved in it, and ``tensors``)."""
    meta = read_json(folder / "state.json")
    tensors = load_file(str(folder / meta["tensors"]))
    model.load_state_dict({k[len("model.") :]: v for k, v in tensors.items() if k.startswith("model.")})
    state: dict[int, dict] = {}
    for k, v in tensors.items():
        if k.startswith("optim."):
            _, idx, key = k.split(".", 2)
            state.setdefault(int(idx), {})[key] = v
    opt.load_state_dict({"state": state, "param_groups": opt.state_dict()["param_groups"]})
    torch.set_rng_state(tensors["rng.torch"])
    if "rng.cuda" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state(tensors["rng.cuda"])
    return meta


# -- the optimiser and its schedule ------------------------------------------------------------------------------


def optimizer(model: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW with decoupled weight decay on matrices only (not on biases and LayerNorm gains)."""
    params = list(model.named_parameters())
    return torch.optim.AdamW(
        [
            {"params": [p for _, p in params if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for _, p in params if p.ndim < 2], "weight_decay": 0.0},
        ],
        lr=lr,
    )


def lr_at(step: int, total: int, peak: float, warmup: float) -> float:
    """The learning rate of ``step`` (0-based) of ``total``: linear warm-up to ``peak`` over the first
    ``warmup`` share of the steps (at least one), then linear decay to 0. A function of the step alone, so a
    resumed run needs no scheduler state."""
    warm = max(1, round(warmup * total))
    if step < warm:
        return peak * (step + 1) / warm
    return peak * max(0.0, (total - step) / max(1, total - warm))


def optimizer_step(
    model: torch.nn.Module, opt: torch.optim.Optimizer, loss: torch.Tensor, lr: float, clip: float
) -> None:
    """Backpropagate ``loss`` (a scalar), clip the gradients' total norm to ``clip``, take one step at ``lr``
    and drop the gradients."""
    for group in opt.param_groups:
        group["lr"] = lr
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    opt.zero_grad(set_to_none=True)


# -- the saved model -------------------------------------------------------------------------------------------


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Without the load report and progress bars while active: a head missing from the base checkpoint is
    expected here, and a table of it in every run would hide the training's own output."""
    from transformers.utils import logging as hf_logging

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def write_model_folder(folder: Path, model, tokenizer) -> None:
    """Config, safetensors weights and tokenizer: a folder ``load_model`` reads (no optimiser state), each file
    written atomically (:func:`~identifiability.base.fileio.write_folder`)."""

    def save(staged: Path) -> None:
        with quiet_transformers():
            model.save_pretrained(str(staged), safe_serialization=True)
        tokenizer.save_pretrained(str(staged))

    write_folder(folder, save)


def save_folder(out: Path, model, tokenizer, provenance: dict) -> None:
    """A model folder the chapters load (:func:`write_model_folder`), then ``provenance.json``, last: its
    presence says the folder is complete."""
    write_model_folder(out, model, tokenizer)
    write_json(out / PROVENANCE, provenance)
