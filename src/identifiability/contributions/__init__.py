"""Context-mixing measures: every common way to read how much input token j contributes to hidden token i at
layer l, each one function of the same shape, in one registry (:mod:`.registry`).

    from identifiability.contributions import MEASURES, compute
    c = compute(lm, trace, "rollout")      # (L+1, d_s, d_s), rows sum to 1

The modules are grouped by what a measure reads: attention weights, norms of the decomposed layer output,
gradients, and interventions. Exact HTA (:mod:`identifiability.hta`) is the reference they are scored
against, beside an intervention that shares nothing with gradients.
"""

# Each measure module files its measures in MEASURES when imported.
from . import attention, gradients, intervention, norms, value_zeroing  # noqa: F401
from .registry import MEASURES, Measure, compute, register, rollout, version

__all__ = ["MEASURES", "Measure", "compute", "register", "rollout", "version"]
