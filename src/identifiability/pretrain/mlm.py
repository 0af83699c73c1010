"""The masked-language model of a family member and BERT's masked-token objective, draw by draw.

A member (:class:`~identifiability.pretrain.family.Member`) becomes a ``BertForMaskedLM`` with the default
model's tokenizer (uncased WordPiece, 30522 tokens), built under ``torch.manual_seed(member.seed)``: members
of one seed and width start from the same weights whatever their heads (the split only reshapes Q, K and V).
15% of the tokens other than [CLS], [SEP] and [PAD] are predicted (80% of them replaced by [MASK], 10% by a
random token, 10% left), the prediction head applied at those positions only. Every draw is a function of
the seed and a counter, never of what ran before (:func:`generator`), so a resumed run draws what an
uninterrupted one would.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..base.errors import UserError
from ..models.keys import embedded_model_path
from ..models.training import quiet_transformers
from .family import POSITIONS, Member

HELDOUT_SEED = 0  # the held-out masks: the same at every checkpoint and for every member
ORDER, MASK, HELDOUT = 0, 1, 2  # the streams a generator's seed names besides the member's seed


class PretrainError(UserError, ValueError):
    """A pre-training that cannot start or go on; the message is one line that says what to do."""


# -- the model --------------------------------------------------------------------------------------------


def check_member(member: Member) -> None:
    """One line for a member no config can hold (before anything is read or written)."""
    if member.heads < 1 or member.width % member.heads:
        raise PretrainError(
            f"a member of width {member.width} cannot have {member.heads} heads: the width must be a multiple of "
            "the heads (d_v = width / heads), e.g. heads 2, 4 or 8 for width 128"
        )


def load_tokenizer():
    """The default model's tokenizer (uncased WordPiece, 30522 tokens), from the embedded copy."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(embedded_model_path()), trust_remote_code=False)
    tokenizer.model_max_length = POSITIONS
    return tokenizer


# Training runs PyTorch's fused attention ("sdpa": more tokens per second than eager on the CPU,
# benchmarks/bench_pretrain.py); the chapters load the saved folders with eager attention, whose weights they read.
TRAIN_ATTENTION = "sdpa"
# No dropout on the attention probabilities (BERT's 0.1 stays on the hidden states): with it PyTorch's CPU
# attention falls back to its unfused kernel, which writes every (heads, d_s, d_s) score matrix to memory and
# slows every step (benchmarks/bench_pretrain.py: "sdpa fp32 attn-drop 0.1" against "sdpa fp32 (training)").
ATTENTION_DROPOUT = 0.0


def member_config(member: Member, tokenizer, positions: int = POSITIONS, attention: str = "eager"):
    """The member's ``BertConfig``: BERT's defaults (hidden dropout 0.1, GELU, post-LN) at the member's sizes,
    no attention dropout (``ATTENTION_DROPOUT``), with ``attention`` the attention kernel ("eager" or "sdpa";
    the same weights either way)."""
    from transformers import BertConfig

    check_member(member)
    return BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=member.width,
        num_hidden_layers=member.layers,
        num_attention_heads=member.heads,
        intermediate_size=member.intermediate,
        max_position_embeddings=positions,
        pad_token_id=tokenizer.pad_token_id,
        attention_probs_dropout_prob=ATTENTION_DROPOUT,
        attn_implementation=attention,
    )


def build_model(member: Member, tokenizer, positions: int = POSITIONS):
    """A ``BertForMaskedLM`` of the member with the class's own initial weights under
    ``torch.manual_seed(member.seed)`` (which also seeds dropout's generator for the first step)."""
    from transformers import BertForMaskedLM

    config = member_config(member, tokenizer, positions, TRAIN_ATTENTION)
    torch.manual_seed(member.seed)
    with quiet_transformers():
        return BertForMaskedLM(config)


# -- draws: each a function of the seed and a counter ---------------------------------------------------


def generator(*parts: int) -> torch.Generator:
    """A CPU generator seeded by ``parts`` (seed, stream, counter) through NumPy's SeedSequence, which mixes
    them: (0, 1, 2) and (0, 2, 1) give unrelated streams."""
    state = np.random.SeedSequence([int(p) for p in parts]).generate_state(2, np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))


def batch_indices(step: int, n_blocks: int, batch_size: int, seed: int) -> torch.Tensor:
    """(batch_size,) the blocks of ``step`` (0-based): the epoch's order from (seed, epoch), sliced; the last
    incomplete batch of an epoch is left out, so every step sees ``batch_size`` blocks."""
    per_epoch = n_blocks // batch_size
    epoch, b = divmod(step, per_epoch)
    order = torch.randperm(n_blocks, generator=generator(seed, ORDER, epoch))
    return order[b * batch_size : (b + 1) * batch_size]


def special_ids(tokenizer) -> torch.Tensor:
    """(k,) the ids never predicted: [CLS], [SEP], [PAD] (and [MASK], which the text never holds)."""
    ids = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id, tokenizer.mask_token_id}
    return torch.tensor(sorted(i for i in ids if i is not None))


def mask_blocks(
    blocks: torch.Tensor, gen: torch.Generator, specials: torch.Tensor, mask_id: int, vocab: int, rate: float = 0.15
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's corruption of ``blocks`` (B, L): (inputs (B, L), masked (B, L) bool). Of the positions that hold
    no special token, each is masked with probability ``rate`` (at least one per call); a masked position
    becomes [MASK] (80%), a random token (10%) or stays (10%). Every draw is made for every position, so the
    draws depend on the shape and the generator only."""
    chosen = torch.rand(blocks.shape, generator=gen)
    how = torch.rand(blocks.shape, generator=gen)
    random_tokens = torch.randint(vocab, blocks.shape, generator=gen)
    ordinary = ~torch.isin(blocks, specials)
    masked = (chosen < rate) & ordinary
    if not masked.any() and ordinary.any():  # a short batch that drew nothing: a loss needs one target
        masked.view(-1)[ordinary.view(-1).nonzero()[0]] = True
    inputs = blocks.clone()
    inputs[masked & (how < 0.8)] = mask_id
    swap = masked & (how >= 0.8) & (how < 0.9)
    inputs[swap] = random_tokens[swap]
    return inputs, masked


def masked_logits(model, inputs: torch.Tensor, attention: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
    """(M, V) the prediction head's logits at the M masked positions only: the encoder's hidden states
    (B, L, d) are gathered at ``masked`` (B, L) before the head, which never sees the other positions."""
    hidden = model.base_model(input_ids=inputs, attention_mask=attention).last_hidden_state
    return model.cls(hidden[masked])


@dataclass(frozen=True)
class HeldOut:
    """The held-out blocks (N, L) with their fixed masks: inputs (N, L), masked (N, L) bool."""

    blocks: torch.Tensor
    inputs: torch.Tensor
    masked: torch.Tensor

    @classmethod
    def draw(cls, blocks: torch.Tensor, tokenizer, rate: float) -> HeldOut:
        inputs, masked = mask_blocks(
            blocks,
            generator(HELDOUT_SEED, HELDOUT),
            special_ids(tokenizer),
            tokenizer.mask_token_id,
            len(tokenizer),
            rate,
        )
        return cls(blocks, inputs, masked)


@torch.no_grad()
def evaluate(model, held: HeldOut, pad_id: int, device: str, batch_size: int = 64) -> dict:
    """Masked-token loss (mean cross-entropy, nats) and accuracy on the held-out blocks, and the number of
    masked tokens. Leaves the model in eval mode."""
    model.eval()
    loss, correct, n = 0.0, 0, 0
    for i in range(0, len(held.blocks), batch_size):
        blocks, masked = held.blocks[i : i + batch_size], held.masked[i : i + batch_size]
        if not masked.any():
            continue
        logits = masked_logits(
            model, held.inputs[i : i + batch_size].to(device), (blocks != pad_id).long().to(device), masked.to(device)
        )
        targets = blocks[masked].to(device)
        loss += float(F.cross_entropy(logits.float(), targets, reduction="sum"))
        correct += int((logits.argmax(-1) == targets).sum())
        n += int(masked.sum())
    return {"masked_tokens": n, "loss": loss / max(n, 1), "accuracy": correct / max(n, 1)}


def unigram_baseline(train: torch.Tensor, held: HeldOut, tokenizer) -> dict:
    """Always predicting the train blocks' most frequent ordinary token, on the held-out masked positions."""
    counts = torch.bincount(train.flatten(), minlength=len(tokenizer))
    counts[special_ids(tokenizer)] = 0
    token = int(counts.argmax())
    targets = held.blocks[held.masked]
    return {
        "token": token,
        "token_text": tokenizer.convert_ids_to_tokens(token),
        "accuracy": float((targets == token).float().mean()),
    }
