"""Chapter 2's studies: the null spaces of every head, alternative attention with the same output, the
d_s = d_v + 1 threshold and softmax realisability (the paper's Sections 3.2-3.3 and the review's two
objections).

Every study runs the model in float64 (:func:`identifiability.nullspace.float64`): ranks and the exact
realisability test need float64 inputs. Layers are numbered 1..L; ``head`` is 0..H-1. Shapes: d_s tokens,
d model width, d_v value width, d_q = d_v query/key width, L layers, H heads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .. import nullspace as ns
from ..base.linalg import rank_rtol
from ..chapters.preflight import middle_layer
from ..evidence.nonidentifiability import C1Evidence, C2Evidence, C3Evidence, C15Evidence, C16Evidence, C17Evidence
from ..models.loaded_model import LoadedModel
from ..models.trace import SentenceTrace, head, out_proj_weights, trace_batch, trace_sentences
from ..nullspace import Realisability
from . import Study, data


def _w_o(lm: LoadedModel) -> torch.Tensor:
    """(L, H, d_v, d) output-projection blocks W_O^h in float64."""
    return out_proj_weights(lm).double()


def _trace64(lm: LoadedModel, text: str, max_tokens: int) -> SentenceTrace:
    with ns.float64(lm):
        return trace_batch(lm, [text], max_tokens=max_tokens)[0]


def _check_head(lm: LoadedModel, layer: int, h: int) -> None:
    if not (1 <= layer <= lm.n_layers and 0 <= h < lm.n_heads):
        raise ValueError(
            f"layer must be 1..{lm.n_layers} and head 0..{lm.n_heads - 1}, got {layer}/{h}; "
            f"pass e.g. -p layer={middle_layer(lm.n_layers)} -p head=0"
        )


def _visible(n: int, causal: bool) -> torch.Tensor | None:
    """The keys each row may use (causal models), None where every row sees every key."""
    return ns.visible_mask(n, True) if causal else None


def _nanmax(s: pd.Series) -> float:
    return float(np.nanmax(s.to_numpy())) if s.notna().any() else float("nan")


# ------------------------------------------------------------------------------------ 1. the null space


@dataclass(frozen=True)
class NullSpaceSurvey(Study):
    """rank(T), dim LN(T) and dim LN([T, 1]) of every head on every text, against rank-nullity."""

    rtol: float  # the largest relative rank tolerance used: max(d_s, d + 1) * eps(float64) at the longest input
    d_v: int
    d_q: int  # query/key width (= d_v in every supported family)
    causal: bool
    survey_texts: int
    survey_heads: int  # (text, layer, head) triples measured
    survey_max_ds: int
    survey_min_ds: int
    share_rank_T_full: float  # share with rank(T) = min(d_s, d_v)
    share_LN_T_at_bound: float  # share with dim LN(T) = max(0, d_s - d_v)
    share_LN_T1_at_bound: float  # share with dim LN([T, 1]) = max(0, d_s - d_v - 1)
    rank_nullity_violations: int  # dim LN(T) below its rank-nullity bound (there can be none)
    gap_T_kept_min: float  # smallest singular value counted in T, relative to the largest
    gap_T_dropped_max: float  # largest one not counted (NaN: no text longer than d_v)
    gap_T1_kept_min: float
    gap_T1_dropped_max: float
    table: pd.DataFrame = data()  # one row per (text, layer, head): see nullspace.null_space_table
    heads_per_text: int = data()  # L * H
    min_dim_LN_T1_by_ds: dict[int, int] = data()  # d_s -> smallest dim LN([T, 1]) over heads (C1's input)
    alternatives_at_dv2: bool = data()  # every head at d_s = d_v + 2 has dim LN([T, 1]) >= 1 (C2's input)
    c1: C1Evidence = data()  # what C1's verdict reads: the table and d_v
    c15: C15Evidence = data()  # what C15's verdict reads: the same table


def null_space_survey(lm: LoadedModel, texts: Sequence[str], max_tokens: int) -> NullSpaceSurvey:
    """Measure the null spaces of every head on ``texts`` (traced in float64, at most ``max_tokens``)."""
    w_o = _w_o(lm)
    with ns.float64(lm):
        traces = trace_sentences(lm, texts, max_tokens=max_tokens, batch_size=4)
    dims = ns.null_space_table(traces, w_o)
    at_dv2 = dims[dims.d_s == lm.d_v + 2]
    return NullSpaceSurvey(
        rtol=rank_rtol(max_tokens, lm.d_model + 1, torch.float64),
        d_v=lm.d_v,
        d_q=lm.d_v,
        causal=lm.adapter.causal,
        survey_texts=int(dims.text.nunique()),
        survey_heads=len(dims),
        survey_max_ds=int(dims.d_s.max()),
        survey_min_ds=int(dims.d_s.min()),
        share_rank_T_full=float((dims.rank_T == np.minimum(dims.d_s, lm.d_v)).mean()),
        share_LN_T_at_bound=float((dims.dim_LN_T == dims.bound_T).mean()),
        share_LN_T1_at_bound=float((dims.dim_LN_T1 == dims.bound_T1).mean()),
        rank_nullity_violations=int((dims.dim_LN_T < dims.bound_T).sum()),
        gap_T_kept_min=float(dims.kept_min_T.min()),
        gap_T_dropped_max=_nanmax(dims.dropped_max_T),
        gap_T1_kept_min=float(dims.kept_min_T1.min()),
        gap_T1_dropped_max=_nanmax(dims.dropped_max_T1),
        table=dims,
        heads_per_text=lm.n_layers * lm.n_heads,
        min_dim_LN_T1_by_ds={int(n): int(k) for n, k in dims.groupby("d_s").dim_LN_T1.min().items()},
        alternatives_at_dv2=bool(len(at_dv2) and (at_dv2.dim_LN_T1 >= 1).all()),
        c1=C1Evidence(dims, lm.d_v),
        c15=C15Evidence(dims, lm.d_v),
    )


# ------------------------------------------------------------------- 2. alternatives with the same output


def _verified(check: dict) -> bool:
    """A valid alternative: rows sum to 1 (to 1e-12), no negative weight, the output kept to ``OUTPUT_TOL``.
    ``check``: the dict of :func:`identifiability.nullspace.verify_alternative`."""
    ok_sums, ok_signs = check["row_sum_max_error"] < 1e-12, check["min_entry"] >= 0
    return bool(ok_sums and ok_signs and check["rel_output_error"] <= ns.OUTPUT_TOL)


@dataclass(frozen=True)
class Alternatives(Study):
    """For one head of one text: the paper's construction (a random direction in LN([T, 1]) per row, the
    largest step that keeps every weight >= 0) and the LP's alternative farthest in total variation."""

    example_ds: int
    example_layer: int
    example_head: int
    example_dim_LN_T1: int
    construct: dict  # the paper's construction, checked (nullspace.verify_alternative)
    lp: dict  # the LP's alternative, checked
    construct_verified: bool
    lp_verified: bool
    text: str = data()
    tokens: list[str] = data()
    A: torch.Tensor = data()  # (d_s, d_s) the real attention
    T: torch.Tensor = data()  # (d_s, d) = V_h W_O^h
    paper: torch.Tensor = data()  # (d_s, d_s) A + Ã
    largest_tv: torch.Tensor = data()  # (d_s, d_s) the LP's alternative
    max_entropy: torch.Tensor = data()  # (d_s, d_s) the realisable max-entropy alternative (Section 4)
    max_entropy_log: torch.Tensor = data()  # (d_s, d_s) its log-probabilities, exact where weights underflow


def alternatives(
    lm: LoadedModel, text: str, layer: int, h: int, lp_rounds: int = 1, seed: int = 0, max_tokens: int = 512
) -> Alternatives:
    """Construct and verify alternatives to head ``h`` of ``layer`` (1..L) on ``text``. The LP also starts
    from the keys the max-entropy alternative gains on, so it moves each row at least as far as that one."""
    _check_head(lm, layer, h)
    tr = _trace64(lm, text, max_tokens)
    a, t = head(tr, _w_o(lm), layer, h)
    causal = lm.adapter.causal
    vis = _visible(tr.n_tokens, causal)
    paper, _ = ns.construct_alternative(a, t, vis, seed=seed)
    me = ns.max_entropy_alternative(a, t, lm.d_v, causal)
    lp, _ = ns.max_tv_alternative(a, t, vis, rounds=lp_rounds, starts=[me["a_alt"] > a])
    construct, lp_check = ns.verify_alternative(a, paper, t), ns.verify_alternative(a, lp, t)
    return Alternatives(
        example_ds=tr.n_tokens,
        example_layer=layer,
        example_head=h,
        example_dim_LN_T1=int(ns.left_null_basis(t).shape[1]),
        construct=construct,
        lp=lp_check,
        construct_verified=_verified(construct),
        lp_verified=_verified(lp_check),
        text=text,
        tokens=tr.tokens,
        A=a,
        T=t,
        paper=paper,
        largest_tv=lp,
        max_entropy=me["a_alt"],
        max_entropy_log=me["log_a_alt"],
    )


@dataclass(frozen=True)
class HeadDistances(Study):
    """For every head of one text: how far a row-stochastic alternative can move (LP) and how far the
    realisable max-entropy one does, and whether the paper's construction passes the exact test."""

    per_layer: list  # per layer: mean and largest TV of the LP's and the max-entropy alternatives
    survey_paper_realisable_share: float  # paper's alternatives (full and half step) passing the exact test
    survey_lp_tv_mean: float
    survey_me_tv_mean: float
    survey_lp_error_max: float  # relative output change, largest over heads
    survey_me_error_max: float
    survey_me_rank_max: int | None  # rank of the max-entropy alternative's centred log (None: causal)
    survey_lp_ge_me: bool  # LP >= max-entropy in every head, up to the LP's tolerance (1e-6)
    table: pd.DataFrame = data()  # one row per (layer, head): see nullspace.head_survey
    per_layer_table: pd.DataFrame = data()  # per_layer, indexed by layer
    d_s: int = data()
    real_passes: bool | None = data()  # every real A passes the exact test (None: causal); C3's control
    paper_failing_share: float = data()  # share of the paper's tested alternatives that fail (C3's estimate)


def head_distances(lm: LoadedModel, text: str, lp_rounds: int = 1, max_tokens: int = 512) -> HeadDistances:
    """Alternatives for every head of ``text`` (see :func:`identifiability.nullspace.head_survey`)."""
    causal = lm.adapter.causal
    tr = _trace64(lm, text, max_tokens)
    survey = ns.head_survey(tr.attentions, tr.values, _w_o(lm), lm.d_v, causal, rounds=lp_rounds)
    per_layer = survey.groupby("layer").agg(
        lp_tv_mean=("lp_tv_mean", "mean"),
        lp_tv_max=("lp_tv_max", "max"),
        me_tv_mean=("me_tv_mean", "mean"),
        me_tv_max=("me_tv_max", "max"),
    )
    paper = survey[["paper_full_realisable", "paper_half_realisable"]]
    tested = [t for t in paper.to_numpy().ravel().tolist() if t is not None]
    return HeadDistances(
        per_layer=per_layer.reset_index().to_dict(orient="records"),
        survey_paper_realisable_share=float(paper.eq(True).to_numpy().mean()),
        survey_lp_tv_mean=float(survey.lp_tv_mean.mean()),
        survey_me_tv_mean=float(survey.me_tv_mean.mean()),
        survey_lp_error_max=float(survey.lp_error.max()),
        survey_me_error_max=float(survey.me_error.max()),
        survey_me_rank_max=None if causal else int(survey.me_rank.max()),
        survey_lp_ge_me=bool((survey.lp_tv_mean >= survey.me_tv_mean - 1e-6).all()),
        table=survey,
        per_layer_table=per_layer,
        d_s=tr.n_tokens,
        real_passes=None if causal else bool(survey.a_realisable.all()),
        paper_failing_share=sum(t is False for t in tested) / max(1, len(tested)),
    )


# --------------------------------------------------------------------------------- 3. the threshold


@dataclass(frozen=True)
class ExactThreshold(Study):
    """d_s = 3, d_v = 2 in rational arithmetic: every A' with A'T = AT and A'1 = 1, for a generic T and a
    rank-deficient one (see :func:`identifiability.nullspace.exact_threshold_examples`)."""

    exact_generic_unique: bool  # the generic T admits A' = A only
    exact_generic_free: int  # free parameters of its solution set
    exact_deficient_free: int
    exact_deficient_dim_LN_T1: int
    examples: dict = data()  # the sympy matrices and solution sets


def exact_threshold() -> ExactThreshold:
    ex = ns.exact_threshold_examples()
    g, dfc = ex["generic"], ex["deficient"]
    return ExactThreshold(
        exact_generic_unique=bool(g["unique"]),
        exact_generic_free=int(g["free_parameters"]),
        exact_deficient_free=int(dfc["free_parameters"]),
        exact_deficient_dim_LN_T1=int(dfc["dim_LN_T1"]),
        examples=ex,
    )


@dataclass(frozen=True)
class Threshold(Study):
    """Every head on several texts of d_s = d_v + 1 tokens: is A the only row-stochastic matrix with its output
    (rank([T, 1]) = d_s), and how far from degenerate; the LP and max-entropy moves of one head on the first."""

    threshold_ds: int
    threshold_inputs: int  # texts of d_v + 1 tokens measured
    threshold_heads: int  # (input, layer, head) triples
    threshold_unique_heads: int  # triples with rank([T, 1]) = d_s and the margin (``margin``: C2's)
    threshold_sigma_min: float  # smallest relative singular value of [T, 1] over heads and inputs
    threshold_ones_min: float  # smallest |x.1| / (||x|| sqrt(d_s)) for x spanning LN(T), over heads and inputs
    threshold_lp_tv_max: float  # the LP's largest row move for the chosen head (first input)
    threshold_me_tv_max: float  # the max-entropy alternative's
    table: pd.DataFrame = data()  # one row per (text, layer, head): see nullspace.threshold_margins
    unique_share: float = data()  # threshold_unique_heads / threshold_heads (C2's estimate)
    share_one_text: float = data()  # rank([T, 1]) = d_s on the first input, no margin (C2's original estimate)
    layer: int = data()
    head: int = data()


def threshold(
    lm: LoadedModel,
    texts: Sequence[str],
    layer: int,
    h: int,
    margin: float,
    lp_rounds: int = 1,
    max_tokens: int = 512,
) -> Threshold:
    """``texts`` should each have d_v + 1 tokens (see :func:`identifiability.nullspace.text_of_length`); the
    chosen head's LP and max-entropy moves are measured on the first. A pair counts as unique when rank([T, 1])
    = d_s with its smallest relative singular value above ``margin`` (the chapter passes C2's)."""
    _check_head(lm, layer, h)
    if not texts:
        raise ValueError("threshold needs at least one text of d_v + 1 tokens")
    causal = lm.adapter.causal
    w_o = _w_o(lm)
    traces = [_trace64(lm, t, max_tokens) for t in texts]
    margins = pd.concat(
        [ns.threshold_margins(tr.values, w_o).assign(text=i) for i, tr in enumerate(traces)], ignore_index=True
    )
    a, t = head(traces[0], w_o, layer, h)
    _, lp_tv = ns.max_tv_alternative(a, t, _visible(traces[0].n_tokens, causal), rounds=lp_rounds)
    me = ns.max_entropy_alternative(a, t, lm.d_v, causal)
    first = margins[margins.text == 0]
    share = ns.unique_share(margins, margin)
    return Threshold(
        threshold_ds=traces[0].n_tokens,
        threshold_inputs=len(traces),
        threshold_heads=len(margins),
        threshold_unique_heads=round(share * len(margins)),
        threshold_sigma_min=float(margins.sigma_min_T1.min()),
        threshold_ones_min=float(margins.ones_in_LN_T.min()),
        threshold_lp_tv_max=float(lp_tv.max()),
        threshold_me_tv_max=float(ns.tv_rows(a, me["a_alt"]).max()),
        table=margins,
        unique_share=share,
        share_one_text=ns.unique_share(first, margin=None),
        layer=layer,
        head=h,
    )


# ------------------------------------------------------------------------------- 4. realisability


@dataclass(frozen=True)
class ExactTests(Study):
    """The exact realisability test (rank of log A' - row means <= d_q) on the real A, the paper's
    alternative at three steps, the LP's and the max-entropy alternative of :func:`alternatives`."""

    realisable: dict  # candidate -> True / False (None: causal, the test does not apply)
    realisable_rank: dict  # candidate -> rank of its centred log (None where not computed)
    tests: dict[str, Realisability] = data()
    spectra: dict[str, torch.Tensor] = data()  # candidate -> relative singular values (none if causal)
    d_q: int = data()
    d_s: int = data()
    causal: bool = data()


def exact_tests(lm: LoadedModel, alt: Alternatives) -> ExactTests:
    causal, d_q = lm.adapter.causal, lm.d_v
    a, paper = alt.A, alt.paper
    candidates = {
        "A (real)": a,
        "A + Ã (paper, full step)": paper,
        "A + ½Ã": a + 0.5 * (paper - a),
        "A + 10⁻⁴Ã": a + 1e-4 * (paper - a),
        "largest TV (LP)": alt.largest_tv,
    }
    tests = {k: ns.realisability(m, d_q, causal=causal) for k, m in candidates.items()}
    tests["max-entropy alternative"] = ns.realisability(d_q=d_q, log_probs=alt.max_entropy_log, causal=causal)
    return ExactTests(
        realisable={k: t.realisable for k, t in tests.items()},
        realisable_rank={k: t.rank for k, t in tests.items()},
        tests=tests,
        spectra={k: t.spectrum for k, t in tests.items() if t.spectrum is not None},
        d_q=d_q,
        d_s=alt.example_ds,
        causal=causal,
    )


def _accepted_tv(runs: pd.DataFrame) -> pd.Series:
    """Per run of a search table, the mean row TV of its realisable alternative where the exact test accepts
    it (output kept to ``SEARCH_TOL``), else 0."""
    ok = (runs.search_error <= ns.SEARCH_TOL) & (runs.me_error <= ns.SEARCH_TOL)
    return runs.search_tv_mean.where(ok, 0.0).fillna(0.0)


def _moved(runs: pd.DataFrame) -> pd.Series:
    """Per run, the larger mean row TV of its two realisable alternatives (max-entropy and searched)."""
    return runs[["me_tv_mean", "search_tv_mean"]].max(axis=1)


def c16_evidence(search: pd.DataFrame, d_v: int, steps: int) -> C16Evidence:
    """C16's evidence from a search table (``nullspace.search_by_length``, run with ``steps`` Adam steps): per
    searched length beyond d_v + 1 the smallest accepted move over heads, per length at or below it the
    largest move, the measured local dimensions beside their count, and the search's budget."""
    beyond, at_thr = search[search.d_s >= d_v + 2], search[search.d_s <= d_v + 1]
    checked = search.dropna(subset=["local_dim"])
    return C16Evidence(
        {int(n): float(tv) for n, tv in _accepted_tv(beyond).groupby(beyond.d_s).min().items()},
        {int(n): float(tv) for n, tv in _moved(at_thr).groupby(at_thr.d_s).max().items()},
        tuple((int(r.d_s), int(r.local_dim), int(r.expected_dim)) for r in checked.itertuples()),
        steps,
    )


@dataclass(frozen=True)
class RealisableSearch(Study):
    """Realisable alternatives by length: the max-entropy one, the optimiser's (Adam on K', queries solved
    exactly), the LP's unconstrained distance, the dimension counts and the measured local dimension."""

    search: list  # one record per (d_s, layer, head): see nullspace.search_by_length
    realisable_exists_all_beyond: bool  # a realisable A' != A, accepted, at every d_s >= d_v + 2 tried
    realisable_none_at_threshold: bool  # none (TV < 1e-8) at every d_s <= d_v + 1 tried
    dimension_count_confirmed: bool  # measured local dimension = d_q(d_s - d_q - 1) wherever measured
    naive_count_wrong_at_threshold: bool  # d_q(d_s - d_q) > 0 at d_s = d_q + 1, where the measured is 0
    search_max_tv_mean: float
    search_max_tv_row: float
    search_error_max: float | None  # largest relative output error beyond the threshold (None: none tried)
    search_min_prob: float | None  # smallest weight of a found alternative beyond the threshold
    A_min_prob: float | None  # smallest weight of the real A there
    table: pd.DataFrame = data()
    realisable_by_ds: dict[int, bool] = data()  # d_s >= d_v + 2 -> every head's accepted alternative moves > min_tv
    accepted_tv_by_ds: dict[int, float] = data()  # d_s >= d_v + 2 -> smallest accepted mean row TV over heads
    c16: C16Evidence = data()  # what C16's verdict reads: the accepted moves, the moves at d_v + 1, the counts
    by_length: pd.DataFrame = data()  # per d_s (over layers if several): search_tv_mean/max, lp_tv_mean
    beyond_runs: int = data()  # (length, head) runs at d_s >= d_v + 2
    jacobian_lengths: list[int] = data()  # the lengths whose local dimension was measured
    search_rank_max: int | None = data()  # largest rank of a found alternative's centred log (None: causal)
    d_v: int = data()
    d_q: int = data()
    causal: bool = data()
    per_layer: bool = data()  # several layers searched (the chart draws one line each)


def realisable_search(
    lm: LoadedModel,
    texts: Sequence[str],
    heads: Sequence[tuple[int, int]],
    steps: int = 30,
    lp_rounds: int = 1,
    jacobian_max_length: int = 0,
    max_tokens: int = 512,
    *,
    min_tv: float,
) -> RealisableSearch:
    """Search realisable alternatives for ``heads`` ((layer 1..L, head) pairs) on each of ``texts`` (one
    length each); see :func:`identifiability.nullspace.search_by_length`. An alternative counts as found when
    the exact test accepts it and it moves rows by a mean TV above ``min_tv`` (the chapter passes C3's)."""
    for layer, h in heads:
        _check_head(lm, layer, h)
    causal, d_v, d_q = lm.adapter.causal, lm.d_v, lm.d_v
    traces = [_trace64(lm, t, max_tokens) for t in texts]
    search, _ = ns.search_by_length(
        traces, _w_o(lm), heads, d_q, causal, steps=steps, lp_rounds=lp_rounds, jacobian_max_length=jacobian_max_length
    )
    beyond = search[search.d_s >= d_v + 2]
    at_thr = search[search.d_s <= d_v + 1]
    accepted_tv = _accepted_tv(beyond)
    found = accepted_tv > min_tv
    checked = search.dropna(subset=["local_dim"])
    c16 = c16_evidence(search, d_v, steps)
    at_dq1 = checked[checked.d_s == d_q + 1]
    by_length = (
        search.groupby("d_s")
        .agg(
            search_tv_mean=("search_tv_mean", "mean"),
            search_tv_max=("search_tv_max", "max"),
            lp_tv_mean=("lp_tv_mean", "mean"),
        )
        .reset_index()
    )
    return RealisableSearch(
        search=search.to_dict(orient="records"),
        realisable_exists_all_beyond=bool(len(beyond) and found.all()),
        realisable_none_at_threshold=bool(len(at_thr) == 0 or (_moved(at_thr) < 1e-8).all()),
        dimension_count_confirmed=bool(len(checked) and (checked.local_dim == checked.expected_dim).all()),
        naive_count_wrong_at_threshold=bool(len(at_dq1) and (at_dq1.naive_dim > 0).all()),
        search_max_tv_mean=float(search.search_tv_mean.max()),
        search_max_tv_row=float(search.search_tv_max.max()),
        search_error_max=float(beyond.search_error.max()) if len(beyond) else None,
        search_min_prob=float(beyond.min_prob_search.min()) if len(beyond) else None,
        A_min_prob=float(beyond.min_prob_A.min()) if len(beyond) else None,
        table=search,
        realisable_by_ds={int(n): bool(ok) for n, ok in found.groupby(beyond.d_s).all().items()},
        accepted_tv_by_ds=c16.accepted_tv_by_ds,
        c16=c16,
        by_length=by_length,
        beyond_runs=len(beyond),
        jacobian_lengths=sorted(int(n) for n in checked.d_s.unique()),
        search_rank_max=None if causal or not len(beyond) else int(beyond.search_rank.max()),
        d_v=d_v,
        d_q=d_q,
        causal=causal,
        per_layer=len({layer for layer, _ in heads}) > 1,
    )


def c2_evidence(exact: ExactThreshold, threshold: Threshold, survey: NullSpaceSurvey) -> C2Evidence:
    """C2's evidence: the exact example, the margins at d_s = d_v + 1 and the survey at d_v + 2."""
    return C2Evidence(exact.exact_generic_unique, threshold.table, survey.alternatives_at_dv2, threshold.share_one_text)


def c3_evidence(heads: HeadDistances, search: RealisableSearch) -> C3Evidence:
    """C3's evidence: the exact test on the real A and the paper's alternatives, and the realisable search."""
    return C3Evidence(heads.real_passes, heads.paper_failing_share, search.accepted_tv_by_ds)


def c17_evidence(threshold: Threshold, survey: NullSpaceSurvey) -> C17Evidence:
    """C17's evidence: the margins at d_s = d_v + 1, the survey at d_v + 2 (None without such a text) and the
    survey's share of T of full rank."""
    t = survey.table
    at_dv2 = t[t.d_s == survey.d_v + 2]
    alternatives = bool((at_dv2.dim_LN_T1 >= 1).all()) if len(at_dv2) else None
    return C17Evidence(threshold.table, alternatives, float((t.rank_T == np.minimum(t.d_s, survey.d_v)).mean()))


RESULTS = (NullSpaceSurvey, Alternatives, HeadDistances, ExactThreshold, Threshold, ExactTests, RealisableSearch)
