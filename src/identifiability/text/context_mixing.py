"""Chapter 6's text (context mixing): the sentences the page states (``*_text``: Markdown generated from a
study's result of :mod:`identifiability.studies.context_mixing`, so that every number and every finding a
sentence states comes from the run) and its tables. Layers are numbered 1..L (hidden states after each
layer)."""

from __future__ import annotations

import pandas as pd

from ..studies.context_mixing import (
    CorpusHTA,
    EstimatorError,
    ExactHTA,
    LiveSample,
    Locality,
    OwnShare,
    PartsOfSpeech,
    SegmentCrossing,
    SpecialTokens,
    TopContributor,
)
from ..verdicts import Verdict
from ..verdicts.context_mixing import C10_HIGH, C10_LOW, C10_WIDE, C11_FAR, C11_NEAR
from ..verdicts.text import layers


def _pct(x: float, digits: int = 0) -> str:
    return f"{100 * x:.{digits}f}%"


def engine_text(r: ExactHTA) -> str:
    """Which engine computes exact HTA for this model, and what a causal model changes."""
    if r.method == "folded":
        how = "(the folded forward-mode pass for post-LayerNorm BERT-style layers)."
    else:
        how = (
            f"(generic `torch.func` forward mode: the folded pass applies only to post-LN BERT-style layers, "
            f"and {r.family} is not one; expect a longer run with the default parameters)."
        )
    causal = (
        " **This model is causal:** a token only sees earlier tokens, so contributions from later positions "
        "are exactly zero and the first token always contributes 100% to itself."
        if r.causal
        else ""
    )
    return f"**Engine for this model:** `{r.method}` {how}{causal}"


def cost_text(r: ExactHTA) -> str:
    """What exact HTA and the estimator cost per sentence."""
    n = [x.n_tokens for x in r.exact]
    ratio = sum(x.seconds for x in r.exact) / max(sum(x.seconds for x in r.estimated), 1e-9)
    return (
        f"Exact HTA: {r.exact_sentences} sentences of {min(n)}–{max(n)} tokens, "
        f"{r.exact_seconds_per_sentence:.1f} s per sentence; the estimator with {r.estimator_probes} probes per "
        f"token: {r.estimate_seconds_per_sentence:.2f} s per sentence ({ratio:.0f}x cheaper)."
    )


def estimator_text(e: EstimatorError, x: ExactHTA) -> str:
    """The estimator's error on ``x``'s sentences and by length, its effect, the probes 1% would take."""
    err = e.estimator_error
    bands = "; ".join(
        f"{k}: median {_pct(v['median'], 1)}, 95th percentile {_pct(v['p95'], 1)}, same top contributor for "
        f"{_pct(v['top_agreement'])} of hidden tokens"
        for k, v in e.by_length.items()
    )
    need = e.estimator_probes_for_1pct
    sign = err["signed_median"]
    runs = "high more often than low" if sign > 0 else "low more often than high" if sign < 0 else "as often high"
    centre = f"the median signed error is {_pct(sign, 2)}, so the estimate of c runs {runs}"
    return (
        f"**Estimator error (measured here on the {x.exact_sentences} short exact sentences, {err['entries']:,} "
        f"entries, {e.probes} orthonormal probes per token):** relative error of $c$ median "
        f"**{_pct(err['median'], 1)}**, 95th percentile **{_pct(err['p95'], 1)}**, maximum {_pct(err['max'])} "
        f"(in absolute terms a median of {100 * err['abs_median']:.2f} and a 95th percentile of "
        f"{100 * err['abs_p95']:.2f} percentage points of contribution); {centre}. The most-contributing input "
        f"token is the same as in exact HTA for {_pct(err['top_agreement'], 1)} of the hidden tokens. On these "
        f"sentences the estimator moves the per-layer median own-token share by at most "
        f"{e.estimator_effect_on_own_median:.4f} and the share of tokens whose top contributor is themselves by "
        f"at most {e.estimator_effect_on_top_is_self_pct:.1f} percentage points. With the error falling like "
        f"$1/\\sqrt{{\\text{{probes}}}}$, a 1% median error would take roughly {need} probes per token on this "
        f"model, {need / e.d_model:.0%} of the {e.d_model} directions per token of exact HTA. By sentence "
        f"length (the quarters of C10's sample): {bands}. Exact HTA took "
        + ", ".join(f"{t:.1f} s per sentence at {k}" for k, t in e.exact_seconds_by_length.items())
        + " (its cost grows like $d_s^2$)."
    )


def rank_text(ranks, own: int, d: int, probes: int) -> str:
    """The effective ranks of the blocks of the hidden token computed by hand (``ranks``:
    :func:`identifiability.hta.block_ranks`, one per input token; ``own``: its own position), and the
    relative error they predict for ``probes`` Gaussian probes."""
    if not (others := sorted(float(r) for j, r in enumerate(ranks) if j != own)):
        return "The sentence has no other input token, so there is no block between different tokens to rank."
    med = float(pd.Series(others).median())
    spread = "far below" if med < d / 4 else "below" if med < d / 2 else "close to"
    return (
        f"Here the blocks of this hidden token from the {len(others)} other input tokens have effective rank "
        f"$(\\sum\\sigma^2)^2/\\sum\\sigma^4$ from {others[0]:.1f} to {others[-1]:.1f} (median {med:.1f}), "
        f"{spread} the {d} dimensions a block has. One Gaussian probe estimates $\\hat c^2$ with relative "
        f"variance $2/r$, so {probes} of them would give $\\hat c$ a relative error of about "
        f"$1/\\sqrt{{2 \\cdot {probes} \\cdot r}}$ = {_pct((2 * probes * med) ** -0.5, 1)} at the median rank "
        "(orthonormal probes have a lower variance: the measured error below is the engine's)."
    )


def corpus_text(r: CorpusHTA) -> str:
    """What the corpus statistics were computed on."""
    parts = ", ".join(
        f"{r.corpus_sentences[k]} sentences of {k!r} ({r.corpus_tokens[k]} tokens)" for k in r.corpus_sentences
    )
    return f"{r.corpus_mode} HTA on {parts} in {r.corpus_seconds:.0f} s."


def own_share_text(r: OwnShare, corpus: str) -> str:
    """Section 1: how the median own share falls with depth, per corpus."""
    med = r.medians
    others = ", ".join(f"{k}: {'monotone' if v else 'not monotone'}" for k, v in r.own_monotone.items() if k != corpus)
    trend = ", lower at every layer" if r.own_monotone[corpus] else f", rising again at {layers(r.rises)}"
    first = (
        "more than half of a hidden token comes from other tokens already after one layer: mixing is strong."
        if med[0] < 0.5
        else "a hidden token is still mostly its own input after one layer."
    )
    return (
        f"**Measured.** On {corpus!r} the median own-token share goes from {_pct(med[0], 1)} in layer 1 to "
        f"{_pct(med[-1], 1)} in layer {len(med)}{trend}" + (f"; {others}" if others else "") + f". In layer 1 "
        f"the own token's median share is {_pct(med[0])}, so {first} The median share of the most-contributing "
        f"token is {_pct(r.top_median_last, 1)} in the last layer."
    )


def top_text(r: TopContributor, mode: str) -> str:
    """Section 2: how often the own token is the top contributor, per corpus, and how many lose that place."""
    ranges = ", ".join(f"{min(v):.0f}–{max(v):.0f}% of the tokens of {k!r}" for k, v in r.top_is_self_pct.items())
    lost = ", ".join(f"{v:.0f}% ({k!r})" for k, v in r.lost_top_last_pct.items())
    return (
        f"**Measured ({mode} HTA).** The own input token is the largest contributor for {ranges} per layer. In "
        f"the last layer it has lost that place for {lost} of the tokens, against the paper's about 30% (12 "
        "layers). C10's verdict uses exact HTA: an argmax over estimated contributions is biased by the "
        "estimator's noise."
    )


def _shares(x: list | None) -> str:
    return "none" if x is None else f"{_pct(x[0], 1)} (95% interval {_pct(x[1], 1)} to {_pct(x[2], 1)})"


def recorded_text(r: TopContributor) -> str:
    """C10's sample: the recorded run's numbers and caption (or the command that computes it), and the
    live sentences' shares beside the recorded ones for the same sentences."""
    live, then = r.c10_live["share"], r.c10_live["recorded"]
    pairs = ", ".join(
        f"{_pct(a, 1)} (recorded: {'not among its sentences' if b is None else _pct(b, 1)})" for a, b in zip(live, then)
    )
    s = r.c10_sample
    if s is None:
        return (
            f"**C10's sample: not run in this build.** {r.caption[0].upper()}{r.caption[1:]}. The "
            f"{len(live)} sentence(s) computed live give {pairs}: too few to decide anything."
        )
    sh = r.c10_shares
    same = all(b is not None and abs(a - b) < 1e-6 for a, b in zip(live, then))
    check = "the same as recorded" if same else "not all the same as recorded"
    return (
        f"**C10's sample** ({r.caption}): {s['sentences']} sentences drawn in proportion to their tokens "
        f"({s['distinct']} distinct, {s['hidden_tokens']:,} hidden tokens), from the sentences of up to "
        f"{s['max_tokens']} tokens, which hold {_pct(s['covered'], 1)} of the corpus's hidden tokens. The own "
        f"token stays on top for {_shares(sh['all'])} of the hidden tokens per sentence (half-width "
        f"{s['half_width']:.3f}); word tokens {_shares(sh['words'])}, special tokens {_shares(sh['special'])}. "
        f"Computed live in this build, {len(live)} of its sentences: {pairs}, {check}."
    )


def sample_text(t: LiveSample) -> str:
    """What C10's live sentences are: the shortest of its sample's first draws, and what is eligible."""
    return (
        f"C10's sample draws from the sentences of up to {t.eligible_max_tokens} tokens (the corpus's 95th "
        f"percentile; {_pct(t.eligible_covered, 1)} of its hidden tokens) in proportion to their tokens. Computed "
        f"live here: the {t.live_sentences} shortest of its first {t.live_from} draws (seed {t.live_seed}), of "
        + ", ".join(f"{n} tokens" for n in t.lengths)
        + ", to check that this build reproduces the recorded numbers (exact HTA costs like $d_s^2$)."
    )


def band_text(v: Verdict) -> str:
    """C10's verdict under the rule's band, the wider and narrower band, on word tokens only, and on the
    original rule's sample."""
    alts = dict(v.robustness)
    original = f"; on the original rule's sample (the short exact sentences): {v.original.label}" if v.original else ""
    return (
        f"**How C10 moves with the band.** With the rule's band [{C10_LOW:g}, {C10_HIGH:g}]: {v.label}; widened to "
        f"[{C10_LOW - C10_WIDE:g}, {C10_HIGH + C10_WIDE:g}]: {alts.get('band wide')}; narrowed to "
        f"[{C10_LOW + C10_WIDE:g}, {C10_HIGH - C10_WIDE:g}]: {alts.get('band narrow')}; word tokens only: "
        f"{alts.get('words only')}{original}."
    )


def locality_table(loc: Locality):
    """Section 3, per corpus and layer: the mean contribution of one near and one far input token (C11's
    amended rule) next to uniform mixing's 1/d_s, the far share f of the context (version 4) next to uniform
    mixing's n_far / (d_s - 1), and the window sums of the context share (the original
    rule's quantities) next to uniform mixing's (a Styler)."""
    one = {"near": f"one token within ±{C11_NEAR}", "far": f"one token beyond ±{C11_FAR}", "uniform": "uniform: 1/d_s"}
    shares = {"far_share": f"far share f of the context (beyond ±{C11_FAR})", "far_share_uniform": "uniform: f"}
    means = pd.concat([v.assign(corpus=k) for k, v in loc.means.items()]).rename(columns={**one, **shares})

    def share(c: str) -> str:  # within_3 -> "context share within ±3", uniform_within_3 -> "uniform: share within ±3"
        kind = "uniform: " if c.startswith("uniform") else "context "
        return c if c in ("corpus", "layer") else kind + "share " + c.removeprefix("uniform_").replace("_", " ±")

    sums = pd.concat([v.assign(corpus=k) for k, v in loc.tables.items()]).rename(columns=share)
    tbl = means.merge(sums, on=["corpus", "layer"], how="outer").set_index(["corpus", "layer"])
    return tbl.style.format({c: "{:.4f}" if c in one.values() else "{:.1%}" for c in tbl.columns}, na_rep="—")


def locality_text(loc: Locality, corpus: str) -> str:
    """Section 3: how much one near and one far input token contribute, layer by layer, against uniform
    mixing (C11's amended quantities)."""
    t = loc.means[corpus]
    if t.empty:
        return (
            f"No hidden token of {corpus!r} has an input token more than {C11_FAR} tokens away: the sentences are "
            "too short to compare near and far."
        )
    near, far, uni = t.near.to_numpy(), t.far.to_numpy(), t.uniform.to_numpy()
    ratio = near / far
    local = "in every layer" if (near > far).all() else f"in {(near > far).sum()} of {len(near)} layers"
    grows = "grows" if far[-1] > far[0] else "does not grow"
    text = (
        f"**Measured.** In {corpus!r}, one input token within {C11_NEAR} of a hidden token contributes on average "
        f"{near[0]:.3f} in layer 1 and {near[-1]:.3f} in layer {len(near)}; one more than {C11_FAR} tokens away "
        f"contributes {far[0]:.3f} and {far[-1]:.3f}, where uniform mixing would give both {uni[0]:.3f} (1/d_s). "
        f"A near token outweighs a far one {local} ({ratio.min():.1f} to {ratio.max():.1f} times as much), and "
        f"a far token's contribution {grows} from the first layer to the last."
    )
    f, f_uni = t.far_share.to_numpy(), t.far_share_uniform.to_numpy()
    moves = "grows" if f[-1] > f[0] else "does not grow"
    return (
        f"{text} Of what a hidden token takes from other tokens, the part from tokens beyond {C11_FAR} (its far "
        f"share f) is {_pct(f[0], 1)} in layer 1 and {_pct(f[-1], 1)} in layer {len(f)}: it {moves}; uniform "
        f"mixing over the context would give {_pct(f_uni[0], 1)} in every layer."
    )


def dilution_text(loc: Locality, on: str = "") -> str:
    """Section 3, beside C11's verdict and not part of it: version 3's far per-token mean growth, the growth
    that dilution of the own token alone predicts, and the observed minus predicted; ``on``: the model it was
    measured on where it is not the chapter's (e.g. "the untrained twin", whose dilution sits beside its own
    C11 verdict, so what training adds to far mixing can be read off both)."""
    e = loc.evidence
    lead = f"**On {on}, beside its verdict.**" if on else "**Beside the verdict, not part of it.**"
    if not e.far_growth.n:
        return (
            f"No hidden token has an input token more than {C11_FAR} tokens away: there is no far growth to set "
            "against dilution."
        )
    excess = e.far_growth_minus_dilution
    side = excess.side(0.0) if excess.has_interval else "contains"
    reading = {
        "above": "more than dilution predicts: far tokens gain beyond the own token's lost share",
        "below": "less than dilution predicts: far tokens get less than an even part of the own token's lost share",
        "contains": "as much as dilution predicts, within the interval",
    }[side]
    return (
        f"{lead} Version 3 of C11's rule read the growth of one far token's mean "
        f"contribution: {e.far_growth}. If the own token's lost share were spread evenly over the other d_s - 1 "
        f"tokens, that mean would grow by {e.dilution_growth}; observed minus predicted at layer "
        f"{len(e.near_minus_far)}: {excess}, {reading}."
    )


def crossing_text(r: SegmentCrossing, corpus: str, mode: str) -> str:
    """Sentence pairs: the other segment's share, or why there is none."""
    if not r.pairs:
        return (
            f'The corpus `{corpus}` holds single sentences: rerun with `corpus="lee_pairs"` to see how much '
            "context crosses from one sentence of a pair to the other."
        )
    t = r.table
    return (
        f"**Measured ({mode} HTA, {r.pairs} pairs).** From layer 1 to layer {int(t.layer.iloc[-1])}, the other "
        f"segment contributes {_pct(t.share.iloc[0], 1)} to {_pct(t.share.iloc[-1], 1)} of a hidden token's "
        f"attribution; uniform mixing would give {_pct(t.uniform.iloc[0])}."
    )


def special_text(r: SpecialTokens, model: str) -> str:
    """Section 4: where the first and last special token get their context in the last layer."""
    if r.special_sources is None:
        return (
            f"The tokenizer of {model} adds no special tokens around a sentence, so there is no [CLS] or [SEP] "
            "to study for this model."
        )
    src = r.sources
    last = src[src.layer == src.layer.max()].set_index(["target", "source"])["share"]
    first, end = r.names["first"], r.names["last"]
    return (
        f"In the last layer {first} keeps {_pct(last['first', 'itself'])} of itself and takes "
        f"{_pct(last['first', 'words'])} from the words and {_pct(last['first', 'other special tokens'])} from the "
        f"other special token; {end} keeps {_pct(last['last', 'itself'])}, takes "
        f"{_pct(last['last', 'other special tokens'])} from the other special token(s) and "
        f"{_pct(last['last', 'words'])} from the words. The paper found [CLS] drawing on all tokens, most strongly "
        "on those near the start, and [SEP] drawing mostly on [CLS]."
    )


def pos_text(r: PartsOfSpeech) -> str:
    """Section 5: the parts of speech that keep most and least of their own input in the last layer."""
    last = sorted(r.pos_own_median_last.items(), key=lambda kv: kv[1], reverse=True)
    if not last:
        return "No part of speech was seen often enough in the last layer to show."
    most = ", ".join(f"{tag} ({_pct(m)})" for tag, m in last[:3])
    least = ", ".join(f"{tag} ({_pct(m)})" for tag, m in last[::-1][:3])
    return (
        f"In the last layer the tags that keep most of their own input are {most}; those that keep least are "
        f"{least}. The paper saw content words (nouns, verbs, adjectives, adverbs) regain some own contribution "
        "in BERT's last layer and [CLS]/[SEP] behave unlike every word class."
    )


def claims_table(own: OwnShare, top: TopContributor, loc: Locality, corpus: CorpusHTA, model: str) -> pd.DataFrame:
    """The paper's section-5 claims next to what this run measured on the chapter's corpus."""
    name = corpus.main
    pct = top.top_is_self_pct[name]
    t = loc.means[name]
    falls = "falls at every layer" if own.own_monotone[name] else "not at every layer"
    rows = [
        (
            "own-token share decreases monotonically with depth",
            f"median {_pct(own.medians[0])} → {_pct(own.medians[-1])}; {falls}",
        ),
        ("own token usually remains the top contributor", f"{min(pct):.0f}–{max(pct):.0f}% of tokens per layer"),
        (
            "about 30% of tokens lose that in later layers",
            f"{top.lost_top_last_pct[name]:.0f}% in the last layer; "
            + (
                "C10's recorded sample not run in this build"
                if top.evidence.share is None
                else f"{_pct(1 - top.evidence.share.estimate)} on C10's recorded sample (exact)"
            ),
        ),
    ]
    if not t.empty:
        rows += [
            (
                "context is mostly local",
                f"one token within ±{C11_NEAR}: {t.near.min():.3f}–{t.near.max():.3f}; beyond ±{C11_FAR}: "
                f"{t.far.min():.3f}–{t.far.max():.3f} (uniform {t.uniform.iloc[0]:.3f})",
            ),
            (
                "long-range mixing grows with depth",
                f"far share of the context beyond ±{C11_FAR}: {_pct(t.far_share.iloc[0], 1)} → "
                f"{_pct(t.far_share.iloc[-1], 1)}; one token beyond ±{C11_FAR}: {t.far.iloc[0]:.3f} → "
                f"{t.far.iloc[-1]:.3f}",
            ),
        ]
    return pd.DataFrame(rows, columns=["paper's claim", f"{model}, {name} ({corpus.corpus_mode} HTA)"])
