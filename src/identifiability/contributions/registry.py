"""The one registry of context-mixing measures and the shape they share.

Every measure is a function ``fn(lm, trace) -> c`` with ``c`` a float64 tensor of shape (L+1, d_s, d_s):
``c[l, i, j]`` is the share of hidden token i at layer l that the measure gives to input token j (rows are
non-negative and sum to 1). Entry 0 is the identity, as in :class:`identifiability.hta.result.HTAResult`:
at layer 0 each hidden token is its input token. Layers follow the book's numbering (1..L).

A measure defined for one layer (``per_layer=True``: raw attention, effective attention, norm-based
attention, Value Zeroing) returns, at entry l, how layer l alone mixes the tokens of layer l - 1 into those
of layer l; :func:`rollout` composes such a measure across layers so it can be read against input tokens
like HTA. A measure across layers (rollout, flow, GlobEnc, ALTI, the gradient measures) returns
contributions of the input tokens directly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..models.loaded_model import LoadedModel
from ..models.trace import SentenceTrace

MeasureFn = Callable[[LoadedModel, SentenceTrace], torch.Tensor]


@dataclass(frozen=True)
class Measure:
    """One registered measure.

    Attributes:
        name: the registry key (``rollout``, ``alti``, ...).
        label: the reader's name of the measure, as the chapter's charts print it.
        reference: its BibTeX key in the book's ``references.bib``.
        per_layer: True if entry l describes layer l alone (scored as is and rolled out).
        kind: what it reads: "attention", "norm", "gradient" or "intervention".
        fn: ``fn(lm, trace) -> (L+1, d_s, d_s)`` (module docstring).
        version: raised when the measure's numbers change (a fix, a new default); part of the key of its
            cached arrays, so they are computed again and no other measure's are.
    """

    name: str
    label: str
    reference: str
    per_layer: bool
    kind: str
    fn: MeasureFn
    version: int = 1


MEASURES: dict[str, Measure] = {}
KINDS = ("attention", "norm", "gradient", "intervention")


def register(
    name: str, label: str, reference: str, per_layer: bool, kind: str, version: int = 1
) -> Callable[[MeasureFn], MeasureFn]:
    """Decorator that files a measure under ``name`` (each name once); ``version``: :attr:`Measure.version`."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")

    def add(fn: MeasureFn) -> MeasureFn:
        if name in MEASURES:
            raise ValueError(f"measure {name!r} is registered twice")
        MEASURES[name] = Measure(name, label, reference, per_layer, kind, fn, version)
        return fn

    return add


def version(name: str) -> int:
    """The version of measure ``name`` (:attr:`Measure.version`); 1 for a name that is not a registered measure
    (exact HTA and the interventions a study computes beside them)."""
    return MEASURES[name].version if name in MEASURES else 1


def _measure(name: str) -> Measure:
    if name not in MEASURES:
        raise KeyError(f"unknown measure {name!r}; choose one of: {', '.join(sorted(MEASURES))}")
    return MEASURES[name]


def compute(lm: LoadedModel, trace: SentenceTrace, name: str, rolled: bool = False) -> torch.Tensor:
    """Measure ``name`` on one traced sentence: (L+1, d_s, d_s), rows summing to 1. With ``rolled=True`` a
    per-layer measure is composed across layers (:func:`rollout`); a measure across layers is returned as is."""
    m = _measure(name)
    c = m.fn(lm, trace).to(torch.float64)
    return rollout(c) if rolled and m.per_layer else c


def rollout(c: torch.Tensor) -> torch.Tensor:
    """Compose per-layer mixing matrices across layers (Abnar & Zuidema's rollout, without their residual
    term: add it in the measure where the measure wants it).

    Args:
        c: (L+1, d_s, d_s) per-layer matrices, entry 0 ignored (taken as the identity).
    Returns:
        (L+1, d_s, d_s): entry l is c[l] @ c[l-1] @ ... @ c[1], entry 0 the identity.
    """
    out = torch.empty_like(c)
    out[0] = torch.eye(c.shape[-1], dtype=c.dtype, device=c.device)
    for k in range(1, c.shape[0]):  # entry k is layer k (entry 0 the identity): no index shift
        out[k] = c[k] @ out[k - 1]
    return out


def normalise_rows(c: torch.Tensor) -> torch.Tensor:
    """Rows scaled to sum to 1 (a row of zeros stays zero). c: (..., d_s, d_s)."""
    s = c.sum(-1, keepdim=True)
    return torch.where(s > 0, c / torch.where(s > 0, s, torch.ones_like(s)), c)
