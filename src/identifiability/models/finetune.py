"""Fine-tuned models built here, and the random-initialisation control.

    identifiability finetune --task sentiment|lee-pairs [--epochs 2 --seed 0 --base M --out data/models/<name>]
    identifiability init-random [--like M] [--seed 0] [--out data/models/<name>]

``finetune`` starts from the embedded all-MiniLM-L6-v2 (or ``--base``: a local model folder, or a hub id
whose snapshot is cached or can be downloaded), puts a classification head on its pooled output and trains
everything with AdamW on the task's training split (:mod:`identifiability.corpus.tasks`); it reports held-out
accuracy with a bootstrap interval beside the majority-class rate. ``init-random`` builds the same
architecture with the model class's own initialiser: the null model that tells which findings come from
training and which from the architecture.

A model folder holds ``model.safetensors``, ``config.json``, the tokenizer files and ``provenance.json``
(what was trained from what, on which data, with which settings, and how well it does); ``load_model``
loads its encoder like any other folder. Training writes a checkpoint after every epoch to
``<out>/checkpoint`` and an interrupted run resumes from it with the same result, bit for bit, as a run
that was never interrupted: each epoch's data order comes from a generator seeded by seed + epoch, and
the checkpoint holds the weights, the optimiser's state tensors and the torch RNG state (dropout). A run
stopped in its first epoch has no checkpoint yet and starts again from the beginning; Ctrl-C says which of
the two a rerun does (:func:`interrupted`). Nothing is pickled: weights and states are safetensors,
everything else JSON.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm import tqdm

from ..base.fileio import read_json
from ..base.paths import data_root, safe_key
from ..base.stats import bootstrap_ci
from ..base.stops import Interrupted
from ..corpus.corpora import encode
from ..corpus.tasks import TASKS, Example, FinetuneError, TaskData, load_task
from .fingerprint import folder_key
from .keys import ModelRef, model_ref, read_config
from .training import (
    CHECKPOINT,
    PROVENANCE,
    Refusals,
    claim_folder,
    load_checkpoint,
    lr_at,
    optimizer,
    optimizer_step,
    quiet_transformers,
    rerun_line,
    save_folder,
    save_state,
    writes,
)

if TYPE_CHECKING:  # transformers loads when a model does, not with the command line's parsers
    from transformers import PretrainedConfig

SUBSET_SEED = 0  # the draw of a training subset (``limit``): the same data whatever the training seed


@dataclass(frozen=True)
class Settings:
    """How a model is fine-tuned. The defaults are sized for a CPU.

    Attributes:
        epochs: passes over the training split.
        seed: the head's initialisation, dropout and (with the epoch) each epoch's data order.
        batch_size: examples per AdamW step.
        max_length: tokens per input, special tokens included (a pair loses tokens from its longer side).
        lr: peak learning rate (linear warm-up over ``warmup`` of the steps, then linear decay to 0).
        weight_decay: AdamW's decoupled weight decay on matrices (not on biases and LayerNorm gains).
        limit: train on a fixed random subset of this many examples (None: all of them).
        held_out_limit: evaluate on the first this many held-out examples (None: all of them).
    """

    epochs: int = 2
    seed: int = 0
    batch_size: int = 32
    max_length: int = 64
    lr: float = 5e-5
    weight_decay: float = 0.01
    warmup: float = 0.1
    limit: int | None = None
    held_out_limit: int | None = None

    def check(self) -> None:
        for name in ("epochs", "batch_size", "max_length"):
            if getattr(self, name) < 1:
                raise FinetuneError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.max_length < 8:
            raise FinetuneError(f"--max-length must be at least 8 tokens, got {self.max_length}")
        for name in ("limit", "held_out_limit"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise FinetuneError(f"{name} must be at least 1 (or None for all), got {getattr(self, name)}")


# -- the starting model and the output folder ----------------------------------------------------------


def _base(name: str | None | ModelRef) -> tuple[str, Path, str, PretrainedConfig]:
    """(display name, folder, content key, config) of the model to start from: the embedded one or a local
    folder. A config transformers rejects is one line here, before anything is written (the content key
    caches its files' hashes)."""
    ref = model_ref(name)
    folder = ref.folder or _hub_folder(ref.source)
    # Everything comes from the folder; saying so keeps transformers from probing the hub (a first fine-tune
    # in a fresh environment has sat idle for a long while before its first step, cause not confirmed).
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    config = read_config(ref.name, str(folder))
    return ref.display, folder, folder_key(folder), config


def _hub_folder(repo_id: str) -> Path:
    """The local snapshot of a Hugging Face hub model (safetensors weights, config, tokenizer files):
    the cached one, else downloaded where the network allows. The chapters load the same snapshot under
    the same id, so a fine-tune's base content key is the reference's."""
    from .keys import snapshot_folder

    cached = snapshot_folder(repo_id)
    if cached is not None and any(cached.glob("*.safetensors")):
        return cached
    try:
        from huggingface_hub import snapshot_download

        return Path(
            snapshot_download(repo_id, allow_patterns=["*.json", "*.txt", "*.safetensors", "*.model", "tokenizer*"])
        )
    except Exception as e:  # offline, unknown id, no safetensors: one line, as every FinetuneError
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise FinetuneError(
            f"cannot start from {repo_id!r}: not a local folder, and the hub gave no copy ({first}); save the "
            "model to a folder (save_pretrained) and pass the folder"
        ) from None


def _describe(prov: dict) -> str:
    ident = prov.get("identity", {})
    if ident.get("kind") == "fine-tuned":
        return f"fine-tuned for {ident.get('task')} from {prov.get('base', {}).get('name')}, seed {ident.get('seed')}"
    if ident.get("kind") == "random-init":
        return f"random initialisation like {prov.get('like', {}).get('name')}, seed {ident.get('seed')}"
    return "a model of unknown kind"


REFUSALS = Refusals(  # the folder check's refusals, in this command's words (--out)
    FinetuneError,
    _describe,
    a_file="{out} is a file, not a folder: pass another --out",
    other_model="{out} already holds another model ({about}): pass another --out, or remove that folder to replace it",
    other_run="{out} holds an interrupted run of another fine-tune ({about}): resume it with its own settings, pass "
    "another --out, or remove that folder",
    not_empty="{out} is not empty and holds no model made by this command (no {provenance}): pass another --out",
)


# -- checkpoints: safetensors + JSON only ----------------------------------------------------------------


def save_checkpoint(
    folder: Path, model: torch.nn.Module, opt: torch.optim.Optimizer, epochs_done: int, meta: dict
) -> None:
    """Weights, the optimiser's state tensors and the torch RNG state after ``epochs_done`` epochs, in
    ``epoch<k>.safetensors`` (:func:`~identifiability.models.training.save_state`). A full disk is one line
    (:func:`~identifiability.models.training.writes`): the previous checkpoint stays in force, and a first
    checkpoint's folder the disk left empty goes (a rerun would refuse the folder that holds it)."""
    with writes(
        f"the checkpoint of epoch {epochs_done}", folder.parent, lambda: _kept(folder), FinetuneError, [folder]
    ):
        save_state(folder, model, opt, f"epoch{epochs_done}.safetensors", {**meta, "epochs_done": epochs_done})


def _kept(folder: Path) -> str:
    """What a failed write left intact in the checkpoint ``folder``: the epoch of its checkpoint, if any."""
    state = folder / "state.json"
    previous = f"epoch {read_json(state)['epochs_done']}" if state.is_file() else "none yet"
    return f"the previous checkpoint ({previous}) is intact"


# -- training ------------------------------------------------------------------------------------------


def interrupted(out: Path, epochs: int) -> Interrupted:
    """What running the same fine-tune again does after a Ctrl-C: resume after the epoch of ``out``'s
    checkpoint, or, stopped in the first epoch (no checkpoint yet), start over from the beginning."""
    state = out / CHECKPOINT / "state.json"
    if (out / PROVENANCE).is_file():  # stopped while removing the checkpoint: the model is saved
        return Interrupted(f"interrupted; the model is saved in {out}")
    if state.is_file():
        done = read_json(state)["epochs_done"]
        return Interrupted(f"interrupted; run the same command again to resume after epoch {done} of {epochs}")
    return Interrupted(
        "interrupted in the first epoch, which has no checkpoint yet; run the same command again to restart "
        "from the beginning"
    )


def _subset(rows: list[Example], limit: int | None) -> list[Example]:
    if limit is None or limit >= len(rows):
        return rows
    keep = sorted(random.Random(SUBSET_SEED).sample(range(len(rows)), limit))
    return [rows[i] for i in keep]


def epoch_order(n: int, seed: int, epoch: int) -> torch.Tensor:
    """(n,) the permutation of the training examples in ``epoch`` (0-based), from seed + epoch alone."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch))


def _batch(tokenizer, rows: Sequence[Example], max_length: int) -> dict:
    """Padded model inputs of ``rows`` (pairs get segment ids), each (B, n_pad), and labels (B,)."""
    enc = encode(
        tokenizer, [r.text for r in rows], padding=True, truncation=True, max_length=max_length, return_tensors="pt"
    )
    enc["labels"] = torch.tensor([r.label for r in rows])
    return dict(enc)


@torch.no_grad()
def predict(model: torch.nn.Module, tokenizer, rows: Sequence[Example], max_length: int, batch_size: int = 64):
    """(n,) predicted class of each row, in order (batches sorted by length to keep padding small).
    Leaves the model in eval mode."""
    model.eval()
    order = sorted(range(len(rows)), key=lambda i: len(rows[i].text))
    out = np.zeros(len(rows), dtype=int)
    for i in range(0, len(order), batch_size):
        idx = order[i : i + batch_size]
        enc = _batch(tokenizer, [rows[j] for j in idx], max_length)
        enc.pop("labels")
        out[idx] = model(**enc).logits.argmax(-1).numpy()
    return out


def held_out_report(pred: np.ndarray, rows: Sequence[Example], labels: Sequence[str]) -> dict:
    """Held-out accuracy with its 95% bootstrap interval (over examples), beside the majority-class rate:
    the held-out share of its most frequent class, what the best constant answer would score.

    Args:
        pred: (n,) predicted class of each row.
    """
    gold = np.array([r.label for r in rows])
    correct = (pred == gold).astype(float)
    majority = int(np.bincount(gold, minlength=len(labels)).argmax())
    lo, hi = bootstrap_ci(correct, seed=0)
    return {
        "accuracy": float(correct.mean()),
        "ci95": [lo, hi],
        "majority_class": labels[majority],
        "majority_rate": float((gold == majority).mean()),
        "n": len(rows),
    }


def _load_classifier(folder: Path, labels: Sequence[str], seed: int):
    """The model of ``folder`` with a new classification head on its pooled output, and its tokenizer.
    Only the head may be missing from the checkpoint, and the pooler ([CLS]'s dense + tanh), which a
    masked-language model's checkpoint does not have (the family of head widths; BERT's own came from next-
    sentence prediction): it is then new, seeded like the head, and trains with it. A missing encoder weight
    would train from noise, and is refused."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(seed)  # the new head's initial weights
    try:
        with quiet_transformers():
            model, info = AutoModelForSequenceClassification.from_pretrained(
                str(folder),
                num_labels=len(labels),
                id2label=dict(enumerate(labels)),
                label2id={name: i for i, name in enumerate(labels)},
                attn_implementation="eager",
                use_safetensors=True,
                trust_remote_code=False,
                output_loading_info=True,
            )
        tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    except (OSError, ValueError) as e:
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise FinetuneError(f"cannot build a classifier from {folder}: {first}") from None
    prefix = model.base_model_prefix + "."
    missing = sorted(k for k in info["missing_keys"] if k.startswith(prefix) and not k.startswith(prefix + "pooler."))
    if missing:
        raise FinetuneError(
            f"{folder} lacks {len(missing)} encoder weights (e.g. {missing[0]}): it is not a complete model"
        )
    return model, tokenizer


@dataclass(frozen=True)
class _Plan:
    """One fine-tune as asked, settled before any work: what it starts from, its examples, its folder.

    Attributes:
        base: the starting model's display name; ``base_folder`` its files, ``base_key`` their content key.
        data: the examples it trains and is scored on (the subsets ``limit`` and ``held_out_limit`` keep).
        identity: what makes the run this run (task, base, data, settings), as the folder check compares it.
    """

    task: str
    settings: Settings
    base: str
    base_folder: Path
    base_key: str
    data: TaskData
    identity: dict
    out: Path


def _plan(
    task: str, out: str | Path | None, base: str | None | ModelRef, settings: Settings | None, data: TaskData | None
) -> _Plan:
    """Check the request and settle the run's base, examples, identity and folder (see :func:`finetune`)."""
    if task not in TASKS:
        raise FinetuneError(f"unknown task {task!r}: choose one of {', '.join(TASKS)}")
    settings = settings or Settings()
    settings.check()
    display, folder, base_key, _ = _base(base)
    data = data or load_task(task)
    train = _subset(data.train, settings.limit)
    held = data.held_out[: settings.held_out_limit] if settings.held_out_limit else data.held_out
    sub = TaskData(data.task, data.labels, train, held, data.split)
    identity = {
        "kind": "fine-tuned",
        "task": task,
        "base": base_key,
        "data": sub.data_hash(),
        **{k: v for k, v in asdict(settings).items() if k not in ("limit", "held_out_limit")},
    }
    if out is None:
        extra = f"-{settings.epochs}ep" if settings.epochs != Settings.epochs else ""
        out = data_root() / "models" / safe_key(f"{display}-{task}-seed{settings.seed}{extra}")
    return _Plan(task, settings, display, folder, base_key, sub, identity, Path(out))


def finetune(
    task: str,
    out: str | Path | None = None,
    base: str | None | ModelRef = None,
    settings: Settings | None = None,
    progress: bool = True,
    on_step: Callable[[int, int], None] | None = None,
    data: TaskData | None = None,
) -> dict:
    """Fine-tune ``base`` (default: the embedded model) on ``task``; returns the provenance it saved.

    Args:
        out: the model folder (default ``<data folder>/models/<base>-<task>-seed<seed>``). A folder with
            this run's checkpoint resumes; one that already holds this model is returned as it is; one that
            holds anything else is refused with a one-line error and left untouched.
        on_step: called as ``on_step(epoch, step)`` after every optimiser step (0-based epoch, 1-based
            global step); an exception from it stops the run like an interruption would.
        data: the task's examples (default: :func:`identifiability.corpus.tasks.load_task`); tests pass small ones.
    """
    plan = _plan(task, out, base, settings, data)
    s, out = plan.settings, plan.out
    state, prov = claim_folder(out, plan.identity, REFUSALS)
    if state == "done":
        return {**prov, "folder": str(out), "already_there": True}  # type: ignore[dict-item]

    with rerun_line(lambda: interrupted(out, s.epochs)):  # Ctrl-C says whether a rerun resumes or starts over
        model, tokenizer = _load_classifier(plan.base_folder, plan.data.labels, s.seed)
        opt = optimizer(model, s.lr, s.weight_decay)
        meta = {"identity": plan.identity, "base": {"name": plan.base}, "steps": 0, "seconds": 0.0, "losses": []}
        if state == "resume":
            meta = load_checkpoint(out / CHECKPOINT, model, opt)
            tqdm.write(f"{out}: resuming after epoch {meta['epochs_done']} of {s.epochs} (step {meta['steps']})")
        t0 = time.time() - meta["seconds"]
        meta = _train(plan, model, tokenizer, opt, meta, t0, progress, on_step)
        held = plan.data.held_out
        report = held_out_report(predict(model, tokenizer, held, s.max_length), held, plan.data.labels)
        prov = _provenance(plan, meta, report, round(time.time() - t0, 1))
        with writes("the model", out, lambda: _kept(out / CHECKPOINT), FinetuneError):
            save_folder(out, model, tokenizer, prov)
        shutil.rmtree(out / CHECKPOINT, ignore_errors=True)
        return {**prov, "folder": str(out)}


def _train(
    plan: _Plan,
    model: torch.nn.Module,
    tokenizer,
    opt: torch.optim.Optimizer,
    meta: dict,
    t0: float,
    progress: bool,
    on_step: Callable[[int, int], None] | None,
) -> dict:
    """Train the epochs after ``meta``'s last (all of them for a new run), a checkpoint after each; returns the
    last checkpoint's record (``steps``, ``seconds`` since ``t0``, ``losses``: each epoch's mean)."""
    s, train = plan.settings, plan.data.train
    per_epoch = -(-len(train) // s.batch_size)
    total = per_epoch * s.epochs
    step = meta["steps"]
    for epoch in range(meta.get("epochs_done", 0), s.epochs):
        model.train()
        order = epoch_order(len(train), s.seed, epoch).tolist()
        desc = f"{plan.task} epoch {epoch + 1}/{s.epochs}"
        bar = tqdm(range(per_epoch), desc=desc, unit="step", disable=not progress, leave=True)
        running = []
        for b in bar:
            rows = [train[i] for i in order[b * s.batch_size : (b + 1) * s.batch_size]]
            loss = model(**_batch(tokenizer, rows, s.max_length)).loss
            optimizer_step(model, opt, loss, lr_at(step, total, s.lr, s.warmup), clip=1.0)
            step += 1
            running.append(loss.item())
            bar.set_postfix(loss=f"{np.mean(running[-20:]):.3f}")
            if on_step is not None:
                on_step(epoch, step)
        losses = [*meta["losses"], float(np.mean(running))]
        meta = {**meta, "steps": step, "seconds": time.time() - t0, "losses": losses}
        save_checkpoint(plan.out / CHECKPOINT, model, opt, epoch + 1, meta)
    return meta


def _provenance(plan: _Plan, meta: dict, report: dict, seconds: float) -> dict:
    """What the folder is: the run's identity, base, data and settings, its training record (the last
    checkpoint's ``meta``) and the held-out ``report``."""
    import transformers

    s, data = plan.settings, plan.data
    return {
        "identity": plan.identity,
        "kind": "fine-tuned",
        "task": plan.task,
        "labels": list(data.labels),
        "base": {"name": plan.base, "content_key": plan.base_key},
        "data": {
            "hash": plan.identity["data"],
            "split": data.split,
            "train_examples": len(data.train),
            "held_out_examples": len(data.held_out),
        },
        "settings": asdict(s),
        "seed": s.seed,
        "epochs": s.epochs,
        "steps": meta["steps"],
        "train_loss_per_epoch": [float(x) for x in meta["losses"]],
        "held_out": report,
        "seconds": seconds,
        "software": {"torch": torch.__version__, "transformers": transformers.__version__},
    }


def init_random(like: str | None | ModelRef = None, seed: int = 0, out: str | Path | None = None) -> dict:
    """Save a model of ``like``'s architecture (default: the embedded model's) with fresh weights from the
    model class's own initialiser under ``torch.manual_seed(seed)``, and its tokenizer; returns the
    provenance it saved."""
    from transformers import AutoModel, AutoTokenizer

    from .adapters import adapter_for

    display, folder, like_key, config = _base(like)
    adapter_for(config.model_type)  # a family the book cannot study is refused before anything is written
    identity = {"kind": "random-init", "like": like_key, "seed": seed, "model_type": config.model_type}
    out = Path(out) if out is not None else data_root() / "models" / safe_key(f"{display}-random-seed{seed}")
    state, prov = claim_folder(out, identity, REFUSALS)
    if state == "done":
        return {**prov, "folder": str(out), "already_there": True}  # type: ignore[dict-item]
    torch.manual_seed(seed)
    model = AutoModel.from_config(config, attn_implementation="eager")
    tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    prov = {
        "identity": identity,
        "kind": "random-init",
        "like": {"name": display, "content_key": like_key},
        "seed": seed,
        "initialiser": f"{type(model).__name__}.from_config under torch.manual_seed({seed}) (the class's own "
        "weight initialisation)",
        "model_type": config.model_type,
        "software": {"torch": torch.__version__},
    }
    save_folder(out, model, tokenizer, prov)
    return {**prov, "folder": str(out)}
