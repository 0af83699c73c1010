"""Chapter 4's text (token identity): each sentence from a study result of
:mod:`identifiability.studies.token_identity`, and the table of its probes' training."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from pandas.io.formats.style import Styler

    from ..studies.token_identity import (
        ClaimsResult,
        GeneralisationResult,
        IdentificationResult,
        NeighbourResult,
        ProbesResult,
        SampleResult,
        SecondCorpusResult,
    )


def probe_table(overview: pd.DataFrame) -> Styler:
    """Chapter 4's training overview (``ProbesResult.overview``: per mapping and loss) as a reader reads it:
    headers in words, counts and epochs as integers (a median of two middle values keeps its .5), the kept
    epochs as one range, losses to three decimals."""
    t = overview.reset_index()
    kept = [f"{a:.0f}" if a == b else f"{a:.0f}–{b:.0f}" for a, b in zip(t.best_epoch_min, t.best_epoch_max)]
    table = pd.DataFrame(
        {
            "map": t.mapping,
            "training loss": t.loss,
            "probes": t.probes.astype(int),
            "stopped early": t.stopped_early.astype(int),
            "epochs run (median)": t.epochs_run,
            "epoch kept": kept,
            "best validation loss, layer 0": t.val_loss_first,
            "best validation loss, last layer": t.val_loss_last,
        }
    )
    styles = [
        {"selector": "th", "props": "white-space: normal; max-width: 8em; vertical-align: bottom"},
        {"selector": "th, td", "props": "padding: 0.15em 0.6em"},
    ]
    loss = lambda v: f"{0.0 if abs(v) < 5e-4 else v:.3f}"  # no "-0.000" for a cosine loss a rounding below 0
    losses = ["best validation loss, layer 0", "best validation loss, last layer"]
    return (
        table.style.hide(axis="index")
        .set_table_styles(styles)
        .format({"epochs run (median)": "{:g}"} | dict.fromkeys(losses, loss))
    )


def model_text(family: str, causal: bool) -> str:
    """What the model's attention direction changes about the question (chapter 4)."""
    if not causal:
        return f"{family} is bidirectional: every $e_i^l$ can draw on the whole sentence."
    return (
        f"**This model is causal ({family}).** The question and the candidate set are unchanged: token $i$ is to "
        "be identified from $e_i^l$ among the input embeddings of its sentence. What changes is what $e_i^l$ can "
        "contain: only tokens $\\le i$ reach it, so the first token's hidden state never mixes with anything, "
        "and landing on a *right* neighbour $x_{i+k}$ (below) can only be a confusion, never information about "
        "that token. Pre-LayerNorm models also keep a growing residual stream whose norm rises with depth, "
        "which the L2 rows feel more than the cosine rows."
    )


def sample_text(r: SampleResult) -> str:
    """The sample and its split by sentence."""
    splits = ", ".join(f"{k} {v['sentences']}/{v['tokens']}" for k, v in r.split_sizes.items())
    return (
        f"{r.n_sentences_used} sentences, {r.n_tokens_all} tokens ({int(r.hs.special.sum())} special), "
        f"{r.n_layers + 1} hidden states each; split (sentences/tokens, special tokens left out): {splits}; "
        f"{r.split_sentence_overlap} sentences in both train and test."
    )


def training_text(r: ProbesResult) -> str:
    """How many probes stopped early, and where the rate of those that reached the epoch cap levels off."""
    head = (
        f"Early stopping triggered for {r.probes_stopped_early} of the {r.probes_trained} trained probes "
        f"({r.patience} epochs without a better validation loss, within the cap of {r.epoch_cap} epochs)."
    )
    if not r.probes_at_cap:
        return head + " Every probe was trained until its validation loss stopped improving."
    capped = f"{head} **{r.probes_at_cap} reached the cap** before their validation loss stopped improving"
    if r.levels_off_at_cap is not None and r.levels_off_at_cap <= r.epoch_cap - r.patience:
        return (
            f"{capped}; the chart below shows every probe's validation rate per epoch. The capped probes' rates "
            f"stay within {r.level_tol:.1%} of their last value from epoch {r.levels_off_at_cap} on at the latest: "
            "their validation loss still improved, their rate no longer moved."
        )
    return (
        f"{capped}, and their validation rate had not levelled off either (it still moved by more than "
        f"{r.level_tol:.1%} in the last {r.patience} epochs; chart below): these probes may be under-trained, "
        "and more epochs may raise their rates."
    )


def c6_text(r: ClaimsResult) -> str:
    """C6's rate beside its three baselines, and the probe seeds it averages."""
    e = r.c6
    d = e.over_position
    spread = f"{min(r.c6_seed_rates):.1%} to {max(r.c6_seed_rates):.1%}"
    stopped = sum(r.seed_training.get("stopped early", []))
    extra = len(r.seed_training.get("stopped early", []))
    return (
        f"At the last layer the linear cosine probe identifies {e.rate.estimate:.1%} of a test sentence's tokens "
        f"on average (its {len(r.c6_seed_rates)} training seeds: {spread}). Knowing only each token's position "
        f"identifies {e.position_rate:.1%}; the probe trained on shuffled labels {e.shuffled_rate:.1%}; a uniform "
        f"guess {e.chance:.1%}. The probe lies {abs(d.estimate):.1%} "
        + ("above" if d.estimate >= 0 else "below")
        + " the position-only lookup per sentence ("
        + (f"95% interval of the difference {d.low:+.1%} to {d.high:+.1%})." if d.has_interval else "no interval).")
        + (f" Early stopping triggered for {stopped} of the {extra} probes of the extra seeds." if extra else "")
    )


def unseen_text(r: ClaimsResult) -> str:
    """C6's probe on the test tokens whose word type no training sentence holds."""
    u = r.unseen
    bounds = f"95% interval {u.low:.1%} to {u.high:.1%}" if u.has_interval else "too few sentences for an interval"
    return (
        f"On the {r.c6_unseen_tokens} test tokens whose word type never occurs in the training sentences the same "
        f"probe identifies {u.estimate:.1%} ({bounds}), against {r.last_rate.estimate:.1%} on all test tokens."
    )


def last_layer_caption(r: IdentificationResult) -> str:
    return (
        f"Test identifiability at the last layer ({r.n_layers}); chance {r.chance_sentence:.3f} (same sentence) "
        f"and {r.chance_all:.5f} (all tokens)."
    )


def identification_text(r: IdentificationResult) -> str:
    """The per-layer rates at the last layer, the identity map's decay and the train-test gap."""
    drop = r.naive_cos_first_layer_below_99
    best = r.best_last
    best_probe = (
        f"the identity map with {best['lookup']} lookup"
        if best["mapping"] == "naive"
        else f"{best['mapping']} / {best['loss']} loss / {best['lookup']} lookup"
    )
    return (
        f"At the last layer the linear map trained with cosine distance and cosine lookup identifies "
        f"**{r.linear_cos_cos_last:.1%}** of held-out tokens among their sentence's input embeddings (paper, "
        f"BERT-base: ≈ {r.paper_last_layer:.0%}); the MLP {r.mlp_cos_cos_last:.1%}; the identity map alone "
        f"{r.naive_cos_last:.1%} with cosine and {r.naive_l2_last:.1%} with L2 lookup (chance "
        f"{r.chance_sentence:.1%}). The identity map is "
        + (
            f"above 99 % up to layer {drop - 1} and drops from layer {drop} on. "
            if drop
            else "above 99 % at every layer. "
            if drop is None
            else "below 99 % already at layer 0. "
        )
        + f"Against all {r.test_tokens} test tokens at once the same linear probe still finds "
        f"{r.linear_cos_cos_last_all:.1%} (chance {r.chance_all:.3%}). The best last-layer combination is "
        f"{best_probe} ({best['rate']:.1%}). Train and test rates differ by {r.mean_train_test_gap:.1%} on "
        f"average (at most {r.max_train_test_gap:.1%}): compare the paper's Figure 7."
    )


def generalisation_text(r: GeneralisationResult) -> str:
    return (
        f"For the linear cosine probe the diagonal (trained and tested on the same layer) averages "
        f"{r.gen_linear_cos_diag_mean:.1%}, the adjacent layers {r.gen_linear_cos_neighbour_mean:.1%} and all "
        f"off-diagonal cells {r.gen_linear_cos_offdiag_mean:.1%}. The last layer's probe applied to the input "
        f"embeddings finds {r.gen_linear_cos_last_on_first:.1%}; the layer-0 probe applied to the last layer "
        f"{r.gen_linear_cos_first_on_last:.1%}. The paper (Figures 8–10) describes good transfer between "
        "neighbouring layers that decays with distance; this chapter records the three averages above without a "
        "verdict (the statement has no claim id)."
    )


def neighbour_text(r: NeighbourResult) -> str:
    """Where the last layer's misses land, against uniform misses and the position-only lookup."""
    miss = max(r.linear_cos_last_miss, 1e-12)
    same = r.linear_cos_last_miss_same_word
    return (
        f"At the last layer the linear cosine probe misses {r.linear_cos_last_miss:.1%} of test tokens. Of these "
        f"misses {r.adjacent:.0%} land on an immediate neighbour ($k=\\pm1$) and "
        f"{r.linear_cos_last_miss_within_3 / miss:.0%} within three positions; misses spread uniformly over the "
        f"other tokens of the sentence would give {r.adjacent_uniform:.0%} and "
        f"{sum(r.uniform_misses_by_offset.values()):.0%}. A lookup that knows only each token's position (the "
        f"mean input embedding of that position) lands on an immediate neighbour in {r.position_only_adjacent:.0%} "
        "of its wrong guesses: position embeddings alone make neighbours look alike to that degree, so only the "
        f"excess of the probe's {r.adjacent:.0%} over it speaks for local context mixing. {same:.0%} of the "
        "misses retrieve **the same word at another position** of the sentence"
        + (
            " (a repeated 'the', ',' or 'to'): what the last layer loses is mostly the position, not the word."
            if same > 0.5
            else "."
        )
    )


def second_corpus_text(r: SecondCorpusResult, first: IdentificationResult, first_corpus: str) -> str:
    """The second corpus against the first, at the last layer."""
    close = abs(r.second_linear_cos_cos_last - first.linear_cos_cos_last) < 0.1
    return (
        f"On `{r.second_corpus_name}` ({r.second_sentences} sentences, {r.second_test_tokens} test tokens) the "
        f"linear cosine probe identifies {r.second_linear_cos_cos_last:.1%} at the last layer when trained on it "
        f"and {r.second_transfer_linear_cos_cos_last:.1%} when trained on `{first_corpus}` (there: "
        f"{first.linear_cos_cos_last:.1%}). "
        + (
            "The curves keep their shape across corpora, as in the paper's appendix."
            if close
            else "The corpora differ noticeably here; the smaller training set of the second corpus is one reason."
        )
    )
