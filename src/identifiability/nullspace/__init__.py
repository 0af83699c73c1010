"""Non-identifiability of attention (paper section 3; the review's two objections): left null spaces,
constructed alternatives, the d_s = d_v + 1 threshold and softmax realisability.

- :mod:`.common`: target lengths, exact-length texts, float64 runs, masks, distances, tolerances;
- :mod:`.constructions`: bases of LN(T) and LN([T, 1]), alternative attention with the same output, exact
  threshold examples;
- :mod:`.realisability`: is an alternative a softmax of a rank-d_q logit matrix? exact test, factors, the
  maximum-entropy alternative, a search for realisable alternatives, the local solution dimension;
- :mod:`.survey`: the same over every head and over lengths.
"""

from .common import (
    OUTPUT_TOL,
    SEARCH_TOL,
    float64,
    parse_lengths,
    rel_output_error,
    text_of_length,
    texts_of_lengths,
    tv_rows,
    visible_mask,
)
from .constructions import (
    construct_alternative,
    exact_threshold_examples,
    left_null_basis,
    max_tv_alternative,
    output_basis,
    verify_alternative,
)
from .realisability import (
    Realisability,
    SearchResult,
    attention_from_factors,
    centered_log,
    expected_dimension,
    factor_attention,
    local_solution_dimension,
    max_entropy_alternative,
    realisability,
    search_realisable,
    solve_queries,
)
from .survey import head_spectra, head_survey, null_space_table, search_by_length, threshold_margins, unique_share

__all__ = [
    "OUTPUT_TOL",
    "SEARCH_TOL",
    "Realisability",
    "SearchResult",
    "attention_from_factors",
    "centered_log",
    "construct_alternative",
    "exact_threshold_examples",
    "expected_dimension",
    "factor_attention",
    "float64",
    "head_spectra",
    "head_survey",
    "left_null_basis",
    "local_solution_dimension",
    "max_entropy_alternative",
    "max_tv_alternative",
    "null_space_table",
    "output_basis",
    "parse_lengths",
    "realisability",
    "rel_output_error",
    "search_by_length",
    "search_realisable",
    "solve_queries",
    "text_of_length",
    "texts_of_lengths",
    "threshold_margins",
    "tv_rows",
    "unique_share",
    "verify_alternative",
    "visible_mask",
]
