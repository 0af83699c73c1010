"""References of one layer's mixing (amended C22, version 2: like is compared with like).

A per-layer measure (raw or effective attention, the attention norms, Value Zeroing, each as it is) says how
layer l alone mixes the tokens of layer l - 1 into those of layer l. Exact HTA and the input intervention
answer another question, how the *input* tokens reach layer l through every layer below. The two references
here ask the per-layer question of block l alone, run on the model's own hidden states of layer l - 1 (the
arguments the model hands block l, recorded by :func:`.value_zeroing.block_inputs`, masks included):

- :func:`hta_layer`: exact HTA of one layer, ĉ^l_{i,j} = ||∂h_i^l / ∂h_j^{l-1}||_F, the Frobenius norms of
  the Jacobian of block l's output tokens with respect to its input tokens, rows normalised as HTA's
  (c = ĉ / Σ_j ĉ, :func:`identifiability.hta.result.contributions`). Computed by HTA's own engines with every
  one-hot tangent of h^{l-1} (d_s·d of them per layer): the folded pass
  (:func:`identifiability.hta.folded.folded_layer_S`) where HTA uses it, each layer's tangents starting at
  its own input, else the generic forward-mode sweep (:func:`identifiability.hta.generic.jvp_S`) through
  each block from its recorded input; either about the arithmetic of HTA's own pass with the same engine.
- :func:`intervention_layer`: the one-layer intervention, token j of block l's input replaced, block l
  alone run again, a^l[i, j] = ||h~_i^l - h_i^l|| / ||h_i^l||, rows normalised as the input intervention's
  (:mod:`.intervention`). One batched block call of d_s + 1 copies per layer.

Layer 0 is the identity in both, as in every measure. h^l is block l's own output (as Value Zeroing's
original output), not the model's ``hidden_states[l]``: for a pre-LN family the last hidden state includes the
final LayerNorm, which is not part of layer L's block. At layer 1 the block's input is x, so both coincide with
their input-to-layer counterparts there (the tests check it).
"""

from __future__ import annotations

import time

import torch

from ..hta.core import Directions, prepare
from ..hta.folded import fold_spec, folded_layer_S
from ..hta.generic import jvp_S
from ..hta.result import HTAResult
from ..models.loaded_model import LoadedModel
from ..models.trace import SentenceTrace
from .registry import normalise_rows
from .value_zeroing import block_hidden, block_inputs, block_output, layer_blocks, sentence_inputs, with_hidden


def hta_layer(lm: LoadedModel, trace: SentenceTrace, chunk: int | None = None, method: str = "auto") -> HTAResult:
    """Exact HTA of each layer alone (module docstring), all layers of one sentence.

    Args:
        lm: the model (any family of the registry).
        trace: one traced sentence (its token ids and segments are used).
        chunk: tangent directions per batch (None: as HTA's default, about 8,192 / d_s).
        method: "auto" (the folded pass where HTA's applies, else generic), "folded" or "generic".
    Returns:
        An :class:`HTAResult` whose ``S`` is (L+1, d_s, d_s) float64 on the CPU: S[l, i, j] =
        ||∂h_i^l / ∂h_j^{l-1}||_F² for l = 1..L, S[0] = d·I (h^0 = x, as HTA's layer 0), so ``.c`` has rows
        summing to 1 and entry 0 the identity; ``method`` the engine used.
    """
    if method not in ("auto", "folded", "generic"):
        raise ValueError(f"method must be auto, folded or generic, got {method!r}")
    t0 = time.perf_counter()
    spec = fold_spec(lm) if method != "generic" else None
    if spec is None and method == "folded":
        raise ValueError(f"the folded pass does not apply to {lm.name} ({lm.adapter.family}); use method='auto'")
    special_ids = set(lm.tokenizer.all_special_ids)
    special = [int(i) in special_ids for i in trace.input_ids.reshape(-1).tolist()]
    if spec is not None:
        inp = prepare(lm, trace)
        S = folded_layer_S(lm, inp, Directions(*inp.x.shape), chunk, spec)
        if S is not None:
            return HTAResult(
                trace.text, list(trace.tokens), S, "folded", seconds=time.perf_counter() - t0, special=special
            )
    enc = sentence_inputs(lm, trace)
    blocks, calls = layer_blocks(lm), block_inputs(lm, enc)
    n = enc["input_ids"].shape[1]
    layers = []
    with torch.no_grad():  # forward AD needs no reverse graph (as generic_S)
        for block, (args, kwargs) in zip(blocks, calls):
            h = block_hidden(args, kwargs)[0].detach()  # (n, d)

            def out_of(hh: torch.Tensor, block=block, args=args, kwargs=kwargs) -> torch.Tensor:
                b_args, b_kwargs = with_hidden(args, kwargs, hh.unsqueeze(0))
                return block_output(block(*b_args, **b_kwargs))  # (1, n, d): K = 1 output per layer

            layers.append(jvp_S(out_of, h, Directions(n, h.shape[1]), chunk)[0].cpu())
    d = block_hidden(*calls[0]).shape[-1]
    S = torch.stack([torch.eye(n, dtype=torch.float64) * d, *layers])
    return HTAResult(trace.text, list(trace.tokens), S, "generic", seconds=time.perf_counter() - t0, special=special)


def layer_replacement(trace: SentenceTrace, mean: torch.Tensor | None) -> torch.Tensor:
    """The rows :func:`intervention_layer` replaces block inputs by, (L, d_s, d).

    Args:
        trace: one traced sentence of a model with L layers.
        mean: (L, max d_s, d) from :func:`.intervention.mean_hidden` over a corpus (rows past d_s ignored),
            or (L, d) (one vector per layer); None: each layer's mean over the sentence's own hidden states,
            the same vector at every position (as the input intervention's default).
    """
    n_layers, n, d = trace.hidden.shape[0] - 1, trace.n_tokens, trace.hidden.shape[-1]
    if mean is None:
        mean = trace.hidden[:-1].double().mean(1).float()  # (L, d)
    r = mean.unsqueeze(1).expand(-1, n, -1) if mean.dim() == 2 else mean[:, :n]
    if r.shape != (n_layers, n, d):
        raise ValueError(
            f"mean must be ({n_layers}, >= {n}, {d}) or ({n_layers}, {d}): one row per layer 0..L-1 "
            f"(intervention.mean_hidden), got {tuple(mean.shape)}"
        )
    return r


@torch.no_grad()
def layer_moves(lm: LoadedModel, trace: SentenceTrace, mean: torch.Tensor | None = None) -> torch.Tensor:
    """How far each output token of block l moves when one token of its input is replaced, before normalising.

    Args:
        lm: the model (any family of the registry).
        trace: one traced sentence.
        mean: the replacement (:func:`layer_replacement`).
    Returns:
        (L, d_s, d_s) float64: entry [l - 1, i, j] = ||h~_i^l - h_i^l|| / ||h_i^l|| with h_j^{l-1} replaced
        by the replacement's row [l - 1, j] and block l alone run again.
    """
    enc = sentence_inputs(lm, trace)
    n = enc["input_ids"].shape[1]
    calls = block_inputs(lm, enc)
    r = layer_replacement(trace, mean)
    k = torch.arange(n, device=lm.device)
    out = torch.zeros(lm.n_layers, n, n, dtype=torch.float64)
    for layer, (block, (args, kwargs)) in enumerate(zip(layer_blocks(lm), calls)):
        h = block_hidden(args, kwargs)  # (1, n, d)
        hs = h.expand(n + 1, *h.shape[1:]).clone()
        hs[k + 1, k] = r[layer].to(hs.device, hs.dtype)  # copy k + 1 has h_k replaced
        b_args, b_kwargs = with_hidden(args, kwargs, hs)
        y = block_output(block(*b_args, **b_kwargs)).double()  # (n + 1, n, d)
        orig, alt = y[0], y[1:]  # (n_i, d), (n_j, n_i, d)
        moves = (alt - orig).norm(dim=-1) / orig.norm(dim=-1).clamp_min(1e-30)  # (n_j, n_i)
        out[layer] = moves.T.cpu()
    return out


def intervention_layer(lm: LoadedModel, trace: SentenceTrace, mean: torch.Tensor | None = None) -> torch.Tensor:
    """The one-layer intervention (module docstring): (L+1, d_s, d_s) float64, rows summing to 1, entry 0
    the identity.

    Token j of layer l's input h^{l-1} is replaced by the corpus's mean hidden state of layer l - 1 at position
    j (``mean``, :func:`.intervention.mean_hidden` over the same corpus sample as the input intervention's
    mean), for the reason the input intervention uses the mean input embedding: it is where layer l - 1's
    states lie at that position (their scale and their positional part, which in a post-LN model a zero
    vector or an input embedding would be far from), so block l is asked about a state it could meet, and
    "token j replaced" reads as "token j's content removed", not "an out-of-range vector inserted". At layer 1
    it is the input intervention's replacement itself, so the two references coincide there.

    Args:
        mean: see :func:`layer_replacement` (None: the sentence's own mean per layer).
    """
    c = normalise_rows(layer_moves(lm, trace, mean))
    eye = torch.eye(c.shape[-1], dtype=c.dtype).unsqueeze(0)
    return torch.cat([eye, c])
