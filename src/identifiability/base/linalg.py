"""The numerical rules every chapter shares: when a singular value counts, and how many threads small
matrix work runs on.

One rank rule for the whole book: a singular value counts when it exceeds ``rtol * s_max`` with
``rtol = max(m, n) * eps(dtype)`` for an m x n matrix, in the precision in which the matrix was *formed*
(the numpy/LAPACK convention). Forming a matrix in float32 and judging it with float64's tolerance turns
rounding noise into rank; an absolute tolerance does the same at another scale. It applies to every matrix
formed from model tensors by sums and products: value matrices V_h, T = V_h W_O^h, [T, 1], W_O^h.

Matrices formed through exp and log (the centred log-attention of the realisability test, and the Jacobian
of softmax in the local-dimension measurement) carry rounding noise of a few ulps per entry *times the
logits' size*; their noise floor was measured at 1-4 times ``max(m, n) * eps`` on random-weight models, so
the same rule would count noise as rank. They use ``NONLINEAR_RTOL`` instead, which sits inside a gap of
several orders of magnitude on every model tried (the chapter prints the spectra).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import wraps

import torch

NONLINEAR_RTOL = 1e-10  # float64 matrices computed through exp/log (see the module docstring)


def rank_rtol(n_rows: int, n_cols: int, dtype: torch.dtype) -> float:
    """Relative rank tolerance ``max(n_rows, n_cols) * eps(dtype)``."""
    return max(n_rows, n_cols) * torch.finfo(dtype).eps


def numerical_rank(s: torch.Tensor, rtol: float) -> torch.Tensor:
    """Rank from singular values ``s`` (..., k) sorted descending: the count of s > rtol * s_max."""
    return (s > rtol * s[..., :1]).sum(-1)


def matrix_rtol(m: torch.Tensor, rtol: float | None = None) -> float:
    """``rtol`` if given, else the book's rule for the (..., rows, cols) matrix ``m`` in its own precision."""
    return rank_rtol(m.shape[-2], m.shape[-1], m.dtype) if rtol is None else rtol


@contextmanager
def _threads(n: int) -> Iterator[None]:
    old = torch.get_num_threads()
    torch.set_num_threads(min(n, old))
    try:
        yield
    finally:
        torch.set_num_threads(old)


def one_thread(fn=None):
    """Run torch on one thread inside a ``with one_thread():`` block or a decorated function, then restore.

    Batched decompositions of many small matrices, and the Newton and LP loops over them, gain nothing from
    a second thread: the threads mostly wait on each other, the more so on a loaded machine
    (``benchmarks/bench_effective.py`` records the batched SVD on one thread against the default count).
    """
    if fn is None:
        return _threads(1)

    @wraps(fn)
    def run(*args, **kwargs):
        with _threads(1):
            return fn(*args, **kwargs)

    return run
