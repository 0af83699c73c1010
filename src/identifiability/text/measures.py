"""Chapter 10's text (which measure to trust): the measures scored, and the practical answer drawn from the
verdicts of C22-C27. Whether a claim holds is its verdict's sentence (``ch.sentence(v)``); the answer here
only sorts the measures by what their verdicts say."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

from ..base import paths
from ..contributions import MEASURES
from ..contributions.gradients import COMPLETENESS_BOUND, DEFAULT_STEPS, StepsGap
from ..evidence.measures import ROLLED, MeasuresEvidence
from ..recorded.store import Recorded, caption
from ..studies.measures import ORDER
from ..verdicts.claims import load_claims
from ..verdicts.core import NOT_RUN, NOT_TESTABLE, VERDICTS, Verdict, claim_outcome
from ..verdicts.measures import MEASURES_MIN_SENTENCES

KIND_WORDS = {
    "attention": "attention weights",
    "norm": "norms of the decomposed layer output",
    "gradient": "the Jacobian",
    "intervention": "a changed input",
}

# what each claim's verdict says about which measures, in the reader's words
CLAIM_SUBJECT = {
    "C22": "raw attention",
    "C23": "attention rollout and attention flow (against raw attention)",
    "C24": "norm-based attention with residual and LayerNorm, GlobEnc and ALTI",
    "C25": "gradient × input and Integrated Gradients",
    "C26": "exact HTA against the intervention",
    "C27": "Value Zeroing",
}


@cache
def _bib() -> dict[str, str]:
    """{BibTeX key: 'First author et al. (year)'} from the book's references.bib."""
    text = (paths.source_root() / "references.bib").read_text(encoding="utf-8")
    out = {}
    for key, body in re.findall(r"@\w+\{([^,]+),(.*?)\n\}", text, flags=re.S):
        authors = re.search(r"author\s*=\s*[{\"](.+?)[}\"],?\n", body, flags=re.S)
        year = re.search(r"year\s*=\s*[{\"]?(\d{4})", body)
        names = [a.split(",")[0].strip(" {}") for a in (authors[1].split(" and ") if authors else [])]
        who = names[0] + (" et al." if len(names) > 2 else f" and {names[1]}" if len(names) == 2 else "")
        out[key.strip()] = f"{who} ({year[1] if year else 'n.d.'})" if names else key.strip()
    return out


def citation(key: str) -> str:
    """'Abnar and Zuidema (2020)' for a key of references.bib (the key itself where it is not there)."""
    return _bib().get(key, key)


def measures_table(names: Sequence[str]) -> str:
    """A Markdown table of the measures scored: name, what it reads, whether it is per layer, its source."""
    lines = ["| measure | reads | defined for | source |", "|---|---|---|---|"]
    for name in names:
        m = MEASURES[name]
        scope = "one layer (also rolled out)" if m.per_layer else "input tokens"
        lines.append(f"| {m.label} | {KIND_WORDS[m.kind]} | {scope} | {citation(m.reference)} |")
    return "\n".join(lines)


def steps_table(rows: Sequence[StepsGap]) -> str:
    """Integrated Gradients' completeness gap per number of steps as a Markdown table, and one sentence on
    whether the default meets :data:`COMPLETENESS_BOUND` on this sentence."""
    finest = max(r.steps for r in rows)
    lines = [f"| steps | gap (share of the row's total) | largest share change from {finest} steps |", "|---|---|---|"]
    for r in rows:
        mark = " (default)" if r.steps == DEFAULT_STEPS else ""
        lines.append(f"| {r.steps}{mark} | {r.gap:.3g} | {r.moved:.2f} |")
    default = next((r for r in rows if r.steps == DEFAULT_STEPS), None)
    if default is None:
        verdict = f"The default ({DEFAULT_STEPS} steps) was not tried here."
    else:
        meets = (
            "meets it on this sentence"
            if default.gap <= COMPLETENESS_BOUND
            else "does not meet it on this sentence: its shares above carry the quadrature's error as well as "
            "the model's mixing"
        )
        verdict = f"The default ({DEFAULT_STEPS} steps) {meets}."
    bound = f"The worst row may miss at most {COMPLETENESS_BOUND:g} of its total. {verdict}"
    return "\n".join(lines) + "\n\n" + bound


def answer_text(verdicts: Sequence[Verdict]) -> str:
    """The practical answer, one line per claim sorted by outcome (holds first): the measures it is about, then
    the claim in words, then its outcome ('Raw attention (C22): the claim that raw attention weights are a poor
    guide ... **fails**'), so that an outcome is never read as the measure's."""
    if all(v.verdict in (NOT_RUN, NOT_TESTABLE) for v in verdicts):
        return (
            "This build scores too few sentences to judge any measure (the rules need 50): the scores above "
            "show the method on the live sentences. `make measures` scores at least 50 sentences and records "
            "the run, which this page then shows."
        )
    texts = {c["id"]: c["claim"] for c in load_claims()}
    lines = []
    for v in sorted(verdicts, key=lambda v: (VERDICTS.index(v.verdict), int(v.claim[1:]))):
        said = claim_outcome(v, texts.get(v.claim, ""))
        subject = CLAIM_SUBJECT.get(v.claim, v.claim)
        lines.append(f"- {subject[:1].upper() + subject[1:]} ({v.claim}): {said[:1].lower() + said[1:]}.")
    return "What the verdicts below say of each measure:\n\n" + "\n".join(lines)


RANKED_AGAINST = ("hta", "hta_layer", "intervention", "intervention_layer")  # the mask is a robustness row only


def _names(words: Sequence[str]) -> str:
    """'A', 'A and B', 'A, B and C' ('' for none)."""
    if not words:
        return ""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _page_order(key: str) -> tuple[int, bool]:
    """Where a measure's key comes in the page's order of measures (a rolled-out one after its own; exact HTA,
    scored against the intervention, last)."""
    bare = key.removesuffix(ROLLED)
    return (ORDER.index(bare) if bare in ORDER else len(ORDER), key.endswith(ROLLED))


def ranking_table(ev: MeasuresEvidence) -> str:
    """Per layer and reference, the measures the scored sentences cannot tell apart from the best (its *top
    group*, :meth:`MeasuresEvidence.top_group`), named in words in the page's order of measures, never ranked
    by their point estimates; a Markdown table, one row per layer, one column per reference scored. Says what
    to run instead where the scores hold no paired differences between measures (a run recorded before them)."""
    refs = [r for r in RANKED_AGAINST if any(s.reference == r for s in ev.scores)]
    if not refs:
        return "No measure was scored against a reference in this build."
    groups = {(r, k): ev.top_group(r, k) for r in refs for k in range(1, ev.n_layers + 1)}
    if any(g is None for g in groups.values()):
        return (
            "The scores shown hold no paired differences between measures (they were recorded before the "
            "ranking): `make measures` records them, and this table then names the measures that cannot be told "
            "apart from the best at each layer."
        )
    heads = [ev.name(r)[:1].lower() + ev.name(r)[1:] for r in refs]
    heads = [f"the {h}" if h.startswith("intervention") else h for h in heads]
    lines = ["| layer | " + " | ".join(f"against {h}" for h in heads) + " |", "|---|" + "---|" * len(refs)]
    for k in range(1, ev.n_layers + 1):
        cells = [_names([ev.name(m) for m in sorted(groups[(r, k)], key=_page_order)]) or "none" for r in refs]
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def recorded_note(rec: Recorded, n_live: int) -> str:
    """What chapter 10 says where it shows ``make measures``' recorded run ``rec`` in place of its own scores
    (``n_live``: the sentences this page scored itself, fewer than the rules need): one italic line."""
    n = rec.results.get("n_scored")
    return (
        f"*Scores and verdicts below are from `make measures`' run on {n} sentences (this page scored {n_live} "
        f"itself, parameter `n_sentences`, fewer than the {MEASURES_MIN_SENTENCES} the rules need): the "
        f"{caption(rec)}.*"
    )
