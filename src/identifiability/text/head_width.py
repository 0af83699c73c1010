"""Chapter 7's text (head width): one sentence per prediction, stating what was measured across the family,
generated from the results of :mod:`identifiability.studies.head_width`. Whether a prediction holds is its
verdict's sentence (``ch.sentence(v)``), never said here."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..base.digits import fmt, pct
from ..pretrain.family import display_names

if TYPE_CHECKING:
    from ..evidence.head_width import C20Evidence, FamilyModel
    from ..studies.head_width import HeadOffset, HeadThreshold
    from ..verdicts.core import Verdict


def _in_words(fn: Callable[..., str]) -> Callable[..., str]:
    """``fn``'s text with every member's folder name in words (:func:`display_names`): a folder name is what a
    reader types, not what a page says."""

    @functools.wraps(fn)
    def worded(*args, **kwargs) -> str:
        return display_names(fn(*args, **kwargs))

    return worded


def _names(names: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


@_in_words
def threshold_text(thresholds: Sequence[HeadThreshold]) -> str:
    """C19's measurement in words: per model its share of (head, input) pairs with a single solution at
    d_s = d_v + 1, and on how many models every head admits alternatives at d_s = d_v + 2."""
    if not thresholds:
        return "No model of the family was measured at its threshold."
    shares = "; ".join(
        f"{t.hw_model} (d_v = {t.hw_d_v}) {pct(t.hw_unique_share)} of {len(t.margins)}" for t in thresholds
    )
    no = [t.hw_model for t in thresholds if t.hw_alternatives_at_dv2 is False]
    unmeasured = [t.hw_model for t in thresholds if t.hw_alternatives_at_dv2 is None]
    n = len(thresholds)
    if not no and not unmeasured:
        dv2 = f"every head admits alternatives at d_s = d_v + 2 on all {n} models"
    else:
        dv2 = f"every head admits alternatives at d_s = d_v + 2 on {n - len(no) - len(unmeasured)} of {n} models"
        dv2 += f" (not on {_names(no)})" if no else ""
        dv2 += f" ({_names(unmeasured)}: no input of d_v + 2 tokens)" if unmeasured else ""
    return f"At d_s = d_v + 1 the (head, input) pairs with a single solution are: {shares}; {dv2}."


@_in_words
def offset_text(evidence: C20Evidence) -> str:
    """C20's measurement in words: the common d_s / d_v range, each compared member's D there, the largest
    difference between members, between their twins and between the two seeds."""
    c = evidence.comparison
    if len(c.members) < 2:
        return "Fewer than two members of one width were trained enough to compare."
    lo, hi = c.ratio_range
    ds = "; ".join(f"{n} {fmt(c.d[n].estimate)}" for n in c.members if n in c.d)
    big = max(c.pairs, key=lambda p: abs(p.difference.estimate))
    text = (
        f"On d_s / d_v from {fmt(lo)} to {fmt(hi)} ({c.lengths} input lengths or more per member), D (model minus "
        f"random subspace, mean over inputs) is {ds}; the largest difference between members is "
        f"{fmt(big.difference.estimate)} ({big.first} minus {big.second})"
    )
    if c.twin_pairs:
        tw = max(c.twin_pairs, key=lambda p: abs(p.difference.estimate))
        text += f", between their untrained twins {fmt(tw.difference.estimate)}"
    if c.seed_difference is None:
        return text + "; no second pre-training seed was measured, so there is no seed-to-seed difference."
    return text + f"; between the two seeds of {c.seeds[0]} it is {c.seed_difference}."


@_in_words
def learned_text(offsets: Sequence[HeadOffset]) -> str:
    """C21's measurement in words: D_sub and D_val over inputs with d_s >= d_v + 2 and the mean attention
    entropy, on the pre-trained members and on their untrained twins."""

    def side(group: Sequence[HeadOffset]) -> str:
        return "; ".join(
            f"{o.hw_model} D_sub {fmt(o.hw_beyond_random)}, D_val {fmt(o.hw_beyond_random_weights)}, entropy "
            f"{fmt(o.hw_entropy)} nats"
            for o in group
        )

    trained = [o for o in offsets if not o.model.twin]
    twins = [o for o in offsets if o.model.twin]
    if not trained:
        return "No pre-trained member was measured."
    text = f"Over the inputs with d_s >= d_v + 2, the pre-trained members give {side(trained)}"
    if not twins:
        return text + "; no untrained twin was measured."
    return text + f"; their untrained twins give {side(twins)}."


@_in_words
def family_text(models: Sequence[FamilyModel], recorded: bool = False) -> str:
    """Which models of the family this build measures, with what each is (d_v, heads, width, seed, trained
    enough or not), or that it has none and which command makes them; without models, ``recorded`` says the
    page shows a recorded `make family` run instead."""
    if not models:
        none = "This build has no model of the family (none in `data/models/`, none named with `members`)"
        if recorded:
            return f"{none}: the charts, tables and verdicts below are the recorded run's; `make family` recomputes it."
        return (
            f"{none}: `make family` pre-trains them and records what this chapter measures on them. The verdicts "
            "below are *not run*."
        )
    trained = [m for m in models if not m.twin]
    twins = [m for m in models if m.twin]

    def what(m: FamilyModel) -> str:
        gain = "" if m.accuracy_gain is None else f", {100 * m.accuracy_gain:+.1f} points over the unigram baseline"
        enough = "trained enough" if m.trained_enough else "undertrained: reported, not judged"
        return f"{m.name} (d_v = {m.d_v}: {m.heads} heads of width {m.width}, seed {m.seed}; {enough}{gain})"

    text = f"This build measures {len(trained)} pre-trained member(s): " + "; ".join(what(m) for m in trained)
    return text + (f"; and {len(twins)} untrained twin(s): {_names([m.name for m in twins])}." if twins else ".")


@_in_words
def training_text(table) -> str:
    """How C4's offset and the sink moved while each followed member trained: per member, D_sub and the mean
    attention on [CLS] and on the final [SEP] (× the uniform share) on its untrained twin and at its last
    checkpoint. ``table``: rows of ``studies.head_width.training_curves``."""
    if table is None or not len(table):
        return "No member's checkpoints were measured."
    parts = []
    for member, t in table.sort_values("tokens_seen").groupby("member", sort=False):
        first, last = t.iloc[0], t.iloc[-1]
        start = "untrained" if first.tokens_seen == 0 else f"at {fmt(first.tokens_seen / 1e6)} million tokens"
        parts.append(
            f"{member} (d_v = {int(first.d_v)}): D_sub {fmt(first.d_sub)} {start}, {fmt(last.d_sub)} after "
            f"{fmt(last.tokens_seen / 1e6)} million tokens; attention on [CLS] "
            f"{fmt(first.cls)} → {fmt(last.cls)} and on the final [SEP] {fmt(first.sep)} → {fmt(last.sep)} times "
            "the uniform share"
        )
    return "While training, " + "; ".join(parts) + "."


@_in_words
def claims_across_markdown(df) -> str:
    """The claims of chapters 2 to 6 on every member (``df``: :func:`identifiability.recorded.family.claims_across`)
    as a table, a row per claim and a column per member ordered by head width: the verdict and its estimate, and
    the untrained twin's verdict where it was judged; an undertrained member's column says it is not judged.
    Without rows, the command that makes them."""
    if df is None or len(df) == 0:
        return "No member of the family has chapter results here: `make family` runs chapters 2 to 6 on each."
    members = df.drop_duplicates("member")
    heads = []
    for m in members.itertuples():
        extra = [f"width {m.width}"] if m.width != members.width.max() else []
        extra += [f"seed {m.seed}"] if m.seed else []
        extra += [] if m.judged else ["undertrained, not judged"]
        heads.append(f"d_v = {m.d_v}" + (f" ({', '.join(extra)})" if extra else ""))
    lines = ["| claim | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for claim, g in df.groupby("claim", sort=False):
        by = {r.member: r for r in g.itertuples()}
        cells = []
        for m in members.member:
            r = by.get(m)
            if r is None:
                cells.append("—")
                continue
            est = "" if r.estimate is None or r.estimate != r.estimate else f" {fmt(r.estimate)}"
            said = f"**{r.verdict}**{est}" if r.judged else f"({r.verdict}{est})"
            cells.append(said + (f"; twin: {r.twin}" if r.twin else ""))
        lines.append(f"| {claim} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@_in_words
def across_text(df) -> str:
    """What moves with d_v, what appears only after training and what neither changes, read from the claims
    on the members (``df``: :func:`identifiability.recorded.family.claims_across`; judged members only, and only
    verdicts on data: "not run" and "not testable" are named apart): the claims whose verdict is the same on
    every member, those whose verdict differs (with each d_v's verdict), and, where a chapter judged the
    untrained twin, the claims whose verdict the twin does not share (what training makes) and those where it
    is the same (where the verdict alone does not show what training changes). "" without judged rows."""
    from ..verdicts.core import NOT_RUN, NOT_TESTABLE

    if df is None or len(df) == 0 or not df.judged.any():
        return ""
    off = (NOT_RUN, NOT_TESTABLE)
    j = df[df.judged]
    on_data = j[~j.verdict.str.startswith(off)]
    same, moves = [], []
    for claim, g in on_data.groupby("claim", sort=False):
        labels = list(dict.fromkeys(g.verdict))
        if len(labels) == 1:
            same.append(f"{claim} ({labels[0]})")
        else:
            by = "; ".join(f"d_v = {r.d_v}{f' seed {r.seed}' if r.seed else ''}: {r.verdict}" for r in g.itertuples())
            moves.append(f"{claim} ({by})")
    n = j.member.nunique()
    text = f"On the {n} member{'s' if n > 1 else ''} trained enough to judge, "
    text += f"the same verdict whatever d_v: {_names(same)}" if same else "no claim gets one verdict on every member"
    text += f"; a verdict that differs between members: {_names(moves)}." if moves else "."
    # claims_across orders the rows by claim number: every list below keeps that order
    unjudged = [c for c in dict.fromkeys(j.claim) if c not in set(on_data.claim)]
    if unjudged:
        text += f" Not judged on the family (not run or not testable there): {_names(unjudged)}."
    twin = on_data[(on_data.twin != "") & ~on_data.twin.str.startswith(off)]
    if len(twin):
        differs = set(twin.claim[twin.twin != twin.verdict])
        learned = [c for c in dict.fromkeys(twin.claim) if c in differs]
        kept = [c for c in dict.fromkeys(twin.claim) if c not in differs]
        said = [f"differs from the trained member's on {_names(learned)} (what training makes)"] if learned else []
        if kept:
            said.append(
                f"is the same on {_names(kept)} (there the estimates, not the verdicts, show what training changes)"
            )
        text += " The untrained twin's verdict " + ", and ".join(said) + "."
    return text


@_in_words
def twin_shift_text(parts: Sequence[Verdict]) -> str:
    """What training did to C4's offset beyond dimension counting, member by member: each trained member's
    D_sub beside its untrained twin's (``parts``: C21's per-model verdicts, claim 'C21.<model>', the twin's
    model named '<member>-init', estimate D_sub), the direction of the change on every pair, and on which side
    of 0 the trained members fall. "" without a trained member that has its twin."""
    sub = {p.claim.split(".", 1)[1]: p.estimate for p in parts if "." in p.claim and p.estimate is not None}
    pairs = [(m, d, sub[f"{m}-init"]) for m, d in sub.items() if not m.endswith("-init") and f"{m}-init" in sub]
    if not pairs:
        return ""
    said = "; ".join(f"{m} {fmt(twin)} → {fmt(d)}" for m, d, twin in pairs)
    down = sum(d < twin for _, d, twin in pairs)
    way = {0: "up on every member", len(pairs): "down on every member"}.get(down, f"down on {down} of {len(pairs)}")
    below = sum(d < 0 for _, d, _ in pairs)
    side = {0: "above 0 on every member", len(pairs): "below 0 on every member"}.get(
        below, f"below 0 on {below} of {len(pairs)} members"
    )
    return (
        f"Over all of C21's inputs (d_s >= d_v + 2; the curves above use the first six texts), training moved "
        f"D_sub from the untrained twin's value to the member's ({said}): {way}; the trained "
        f"D_sub is {side}. Chapter 3 measures the same quantity on the model this book runs on (C4's second part)."
    )


@_in_words
def pretraining_note(members: dict[str, dict]) -> str:
    """The pre-training time a family record's duration leaves out (``members``: the record's members, each
    with its folder's provenance, ``minutes`` and ``device``): '; pre-training, not in that time: 5 members,
    31 to 94 minutes each on cpu (290 minutes in all)', or "" when no member says."""
    runs = [(m["provenance"]["minutes"], m["provenance"].get("device", "?")) for m in members.values()
            if m.get("provenance", {}).get("minutes") is not None]  # fmt: skip
    if not runs:
        return ""
    minutes = [t for t, _ in runs]
    devices = ", ".join(sorted({d for _, d in runs}))
    each = f"{fmt(min(minutes))} to {fmt(max(minutes))} minutes each" if len(runs) > 1 else f"{fmt(minutes[0])} minutes"
    return (
        f"; pre-training, not in that time: {len(runs)} member{'s' if len(runs) > 1 else ''}, {each} on {devices}"
        f" ({fmt(sum(minutes))} minutes in all)"
    )


@_in_words
def retraining_text(first: dict, current: Sequence[Verdict]) -> str:
    """What chapter 7 says of the family's two trainings (``first``: :func:`identifiability.recorded.family.
    first_training`; ``current``: the verdicts shown above): that the family was retrained after its first
    verdicts were seen, why, and a table of each prediction's verdict and estimate under both trainings."""
    from ..verdicts.core import verdict_label

    def cell(v: dict | None) -> str:
        if not v:
            return "—"
        est = v.get("estimate")
        return f"{verdict_label(v)}" + (f" ({fmt(est)})" if isinstance(est, (int, float)) else "")

    rows = [
        "| prediction | first training, attention dropout "
        f"{first.get('attention_dropout', 0.1):g} ({first.get('date', '?')}) | retrained, no attention dropout |",
        "|---|---|---|",
    ]
    rows += [f"| {v.claim} | {cell(first['claims'].get(v.claim))} | {cell(v.to_json())} |" for v in current]
    then, now = (
        first["claims"].get("C20", {}).get("threshold"),
        next((v.threshold for v in current if v.claim == "C20"), None),
    )
    bounds = None
    if isinstance(then, (int, float)) and isinstance(now, (int, float)):
        bounds = (
            f"C20's bound on the seed-to-seed spread rests on one pair of seeds (seeds 0 and 1 of one member): it "
            f"was {fmt(then)} in the first training and is {fmt(now)} in the second, so C20's verdict moved with "
            "that one pair."
        )
    return "\n".join(
        [
            "The family shown here is its second training. The first trained every member with BERT's dropout "
            "on the attention probabilities; after its verdicts were seen, the family was trained again without "
            "that dropout, for speed (PyTorch's fused attention kernel then runs), and the rules were not changed. "
            "Both trainings' verdicts, with their estimates:",
            "",
            *rows,
            *([] if bounds is None else ["", bounds]),
        ]
    )
