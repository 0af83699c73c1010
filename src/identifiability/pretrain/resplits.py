"""The command behind ``identifiability resplit``: the book's model re-split at other head widths and healed,
one member after another, into ``data/models/``.

    identifiability resplit [--model M] [--widths 16,64,128] [--tokens N] [--seed S]
                            [--mode global|layerwise] [--device cpu|cuda]

Everything that can stop a member stops the command before any weight is read, in one line: a width that is
not a whole number or does not divide the hidden size, a model that is no post-LN encoder with separate Q, K
and V maps, a member's folder that holds another model or a corrupt checkpoint. A healed member is skipped
(its line says so), an interrupted one resumes, a width named twice runs once. Members are healed one at a
time: each step already uses every core.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..base.paths import data_root
from ..models.resplit import ResplitError, check_resplit
from .heal import HealSettings, Original, claim, heal, identity_of

WIDTHS = (16, 64, 128)  # the family of issue 55 (item 2); d_v = 32 is the book's own width, the control
BLOCK = 128  # tokens per block of the pre-training text


def parse_widths(text: str | Sequence[int]) -> list[int]:
    """``16,128`` (or a sequence) as the widths, each once, in the order given; anything else is one line."""
    items = [w.strip() for w in text.split(",") if w.strip()] if isinstance(text, str) else list(text)
    out: list[int] = []
    for item in items:
        try:
            width = int(item)
        except (TypeError, ValueError):
            raise ResplitError(f"--widths takes whole numbers separated by commas, e.g. 16,128; got {item!r}") from None
        if width not in out:
            out.append(width)
    if not out:
        raise ResplitError("--widths names no width: pass e.g. --widths 16,128")
    return out


def folder_of(base: str, s: HealSettings, root: Path | None = None) -> Path:
    """``<data>/models/<base>-dv<width>-seed<seed>``; another mode or length than the default's gets its own
    suffix, so that a pilot never takes the member's folder."""
    root = root if root is not None else data_root() / "models"
    default = HealSettings(width=s.width)
    name = f"{base}-dv{s.width}-seed{s.seed}"
    name += "" if s.mode == default.mode else f"-{s.mode}"
    name += "" if s.tokens == default.tokens else f"-{s.tokens}tok"
    return root / name


def preflight(model: str | None, settings: Sequence[HealSettings], root: Path | None = None) -> list[Path]:
    """Every check that needs no weights, for every member, before any work: the model's architecture and each
    width (from its config), the settings, and each member's folder (done, resume or new); returns the
    folders. A one-line ResplitError (or the loader's own one line for a model that is not there) otherwise."""
    from ..models.adapters import adapter_for
    from ..models.keys import model_ref, read_config

    ref = model_ref(model)
    config = read_config(ref.name, ref.source)
    adapter = adapter_for(config.model_type)
    folders = []
    for s in settings:
        s.check()
        check_resplit(config, adapter, s.width, ref.display)
        out = folder_of(ref.key, s, root)
        claim(out, identity_of(ref.content_key, s))
        folders.append(out)
    return folders


def resplit_family(
    model: str | None = None,
    widths: str | Sequence[int] = WIDTHS,
    tokens: int | None = None,
    seed: int = 0,
    mode: str = "global",
    device: str = "cpu",
    root: Path | None = None,
    progress: bool = True,
) -> list[dict]:
    """Heal ``model`` re-split at each of ``widths`` (:func:`identifiability.pretrain.heal.heal`) on the
    pre-training text's blocks of :data:`BLOCK` tokens, its fidelity measured on the held-out documents;
    returns each member's provenance (with ``folder``)."""
    from ..models.load import load_model
    from . import text
    from .fidelity import PAIRS, Reference, heldout_sentences, sentence_pairs

    extra = {} if tokens is None else {"tokens": tokens}
    settings = [HealSettings(width=w, seed=seed, mode=mode, **extra) for w in parse_widths(widths)]
    folders = preflight(model, settings, root)
    lm = load_model(model, device=device)
    original = Original(lm.model, lm.tokenizer, lm.adapter, lm.name, lm.provenance["content_key"])
    train = text.token_blocks(lm.tokenizer, BLOCK, "train")
    pairs = sentence_pairs(heldout_sentences(), PAIRS)
    reference = Reference.of(lm.model, lm.tokenizer, text.token_blocks(lm.tokenizer, BLOCK, "heldout"), pairs)
    return [heal(original, s, train, out, reference, device, progress) for s, out in zip(settings, folders)]


def summary(results: Sequence[dict]) -> str:
    """One line per member: its folder, tokens, minutes and last fidelity point, and whether it is healed."""
    lines = []
    for r in results:
        last = r["fidelity"][-1] if r.get("fidelity") else None
        fid = "" if last is None else f"; worst-layer cosine {last['worst']:.3f}, Spearman {last['spearman']:.3f}"
        state = "healed" if r.get("healed") else "not healed (below the bar)"
        skipped = " (already there)" if r.get("already_there") else ""
        lines.append(f"{r['folder']}{skipped}: {r['tokens_seen']:,} tokens, {r['minutes']} min{fid}: {state}")
    return "\n".join(lines)
