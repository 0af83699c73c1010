"""Hidden Token Attribution (paper section 5): how much each input token contributes to each hidden token.

For layer l, hidden position i and input position j the paper's attribution is the Frobenius norm of a
d x d Jacobian block, ĉ^l_{i,j} = ||∂e_i^l / ∂x_j||_F, normalised over j: c^l_{i,j} = ĉ^l_{i,j} / Σ_k ĉ^l_{i,k}.
x is the embedding layer's output and e^l the hidden states, in the book's convention: hidden[0] = x,
hidden[l] the output of layer l, so results have L+1 layers with layer 0 the input itself. Everything here
computes S[l, i, j] = ĉ² (the *squared* block norms) for all layers at once; :func:`contributions` turns
S into c.

Why forward mode. An exact answer must push n = d_s·d input directions (one per coordinate of x) through
the network, or d_s·d output directions per layer back through it. Forward mode (a Jacobian-vector
product, JVP) carries one input direction through *all* layers in one sweep, so one pass over the n
directions yields every layer's blocks; reverse mode needs a pass per layer, position and output
coordinate (cost ∝ L(L+1)/2). Each chunk of directions is reduced to sums of squares at once, so memory
never grows with n.

Three exact engines and one estimator, all returning the same S (``benchmarks/bench_attribution.py``
measures them against each other; the engines' docstrings say why each was chosen).
Everything runs on ``lm.device`` (a GPU too); results come back on the CPU:

- :mod:`.naive`: :func:`hta_naive`, one ``autograd.grad`` per (layer, position, output coordinate), the
  reference the tests compare against on tiny inputs.
- :mod:`.generic` (``method="generic"``): ``torch.func.jvp`` under ``vmap``; every architecture.
- :mod:`.folded` (``method="folded"``): a hand-written batched forward-mode pass for post-LayerNorm
  layers, chosen automatically where the architecture registry says it applies; its memory bounds
  (:func:`peak_bytes`) and FLOP count (:func:`folded_flops`).
- :mod:`.estimator` (``mode="estimate"``): Hutchinson's trace estimator per input token, with its
  measured error; :func:`estimate_error` compares an estimate with the exact answer.

:mod:`.api` holds the entry points :func:`hta` and :func:`hta_corpus` (with its on-disk cache),
:mod:`.result` the :class:`HTAResult`, :mod:`.core` the single forward pass and the tangent directions,
:mod:`.statistics` the corpus statistics of chapter 6. The charts are in :mod:`identifiability.charts.context_mixing`:
nothing in this package imports Altair.
"""

from .api import CACHE_VERSION, available_method, cache_folder, cache_params, hta, hta_corpus
from .core import DEFAULT_ROWS
from .estimator import block_ranks, error_by_length, estimate_error, estimate_pairs
from .folded import PRIMAL_TOL, fold_spec, folded_flops, peak_bytes
from .naive import hidden_graph, hta_naive, naive_seconds
from .result import HTAResult, contributions
from .statistics import (
    content_gaps,
    cross_segment,
    distance_profile,
    explorer_rows,
    last_layer,
    layer_summary,
    locality,
    per_sentence_layers,
    per_token_layers,
    pos_summary,
    special_gaps,
    special_profile,
    token_table,
    window_means,
    window_summary,
    window_units,
)

__all__ = [
    "CACHE_VERSION",
    "DEFAULT_ROWS",
    "PRIMAL_TOL",
    "HTAResult",
    "available_method",
    "block_ranks",
    "cache_folder",
    "cache_params",
    "content_gaps",
    "contributions",
    "cross_segment",
    "distance_profile",
    "error_by_length",
    "estimate_error",
    "estimate_pairs",
    "explorer_rows",
    "fold_spec",
    "hidden_graph",
    "folded_flops",
    "hta",
    "hta_corpus",
    "hta_naive",
    "last_layer",
    "layer_summary",
    "locality",
    "naive_seconds",
    "peak_bytes",
    "per_sentence_layers",
    "per_token_layers",
    "pos_summary",
    "special_gaps",
    "special_profile",
    "token_table",
    "window_means",
    "window_summary",
    "window_units",
]
