"""Chapter 10's text (which measure to trust): the measures scored, and the practical answer drawn from the
verdicts of C22-C27. Whether a claim holds is its verdict's sentence (``ch.sentence(v)``); the answer here
only sorts the measures by what their verdicts say."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

from ..base import paths
from ..contributions import MEASURES
from ..verdicts.core import FAILS, HOLDS, NOT_RUN, NOT_TESTABLE, PARTLY, Verdict

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


def answer_text(verdicts: Sequence[Verdict]) -> str:
    """The practical answer: which measures' claims hold, hold in part, fail, or are undecided here."""
    groups: dict[str, list[str]] = {}
    for v in verdicts:
        key = v.verdict if v.verdict in (HOLDS, PARTLY, FAILS, NOT_RUN, NOT_TESTABLE) else "undecided"
        groups.setdefault(key, []).append(f"{CLAIM_SUBJECT.get(v.claim, v.claim)} ({v.claim})")
    if set(groups) <= {NOT_RUN, NOT_TESTABLE}:
        return (
            "This build scores too few sentences to judge any measure (the rules need 50): the scores above "
            "show the method on the live sentences. `make measures` scores at least 50 sentences and records "
            "the run, which this page then shows."
        )
    words = {
        HOLDS: "The claim holds for",
        PARTLY: "It holds in part for",
        FAILS: "It fails for",
        "undecided": "The data do not settle it for",
        NOT_TESTABLE: "It cannot be tested on this model for",
        NOT_RUN: "It was not run for",
    }
    return " ".join(f"{words[k]}: {'; '.join(groups[k])}." for k in words if k in groups)
