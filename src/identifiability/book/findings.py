"""What the replication found, as pages show it: the findings table the introduction opens with, the
overview table and the cards of the claims page (``book/claims.md``), and a chapter's findings at a glance.
Every row is read from data/claims.csv (with its amendments and names) and the verdicts the chapters recorded;
nothing here judges a claim.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..base.digits import fmt
from ..base.results import RECORDED_FROM
from ..models.keys import ModelRef, model_ref
from ..recorded import store as recorded
from ..verdicts.claims import claims_table
from ..verdicts.core import (
    FAILS,
    HOLDS,
    NOT_RUN,
    PARTLY,
    VERDICTS,
    Verdict,
    claim_outcome,
    from_json,
    render,
    robustness_summary,
    statement,
    twin_difference,
    verdict_label,
)
from ..verdicts.text import anchor, math_text


def measured_text(v: Verdict, named: bool = True) -> str:
    """The estimate in a table cell: its symbol (or its words) = value (interval), or without ``named`` the
    value and interval alone; the command that fills a comparison this build did not run."""
    if v.verdict == NOT_RUN:  # the command that runs it, as the verdict's reason names it
        command = re.search(r"`make [^`]+`", v.reason)
        return "not run in this build" + (f": {command.group(0)}" if command else "")
    if v.estimate is None:
        return "no estimate"
    q = v.estimate_of
    text = q.value(v.estimate) if q else fmt(v.estimate)
    if q and named:
        text = (f"${q.symbol}$" if q.symbol else math_text(q.words)) + f" = {text}"
    lo, hi = v.ci95 or (None, None)
    if v.ci95 is not None and not all(b is not None and b == b for b in v.ci95):
        return text + " (no interval)"
    if v.ci95 is not None and lo != hi:
        integer = bool(q and q.integer)
        text += f" ({fmt(lo, integer)} to {fmt(hi, integer)})"
    return text


def baseline_text(v: Verdict) -> str:
    """The baseline in a table cell, saying when it measures another quantity than the estimate."""
    if v.baseline is None:
        return "—"
    if v.baseline_of is None:
        return (v.estimate_of.value(v.baseline) if v.estimate_of else fmt(v.baseline)) + " (same quantity)"
    b = v.baseline_of
    return f"${b.symbol}$ = {b.value(v.baseline)} (another quantity)" if b.symbol else b.value(v.baseline)


def confirmation_text(c: dict | None) -> str:
    """A claim's confirmation (:func:`identifiability.recorded.confirm.confirmation`) in words; "—" without one."""
    if c is None:
        return "—"
    if not c["frozen"]:
        return f"not confirmed: judged under a rule changed after the freeze ({c['label']} on lee_test)"
    words = [f"{c['label']} on lee_test"]
    if c["agrees"] is not None:
        words.append("as in this build" if c["agrees"] else "unlike this build")
    if c["rules_agree"] is not None:
        words.append("original rule agrees" if c["rules_agree"] else "original rule differs")
    return "; ".join(words)


def family_confirmation(claim: str, rec) -> str:
    """A claim's verdicts on the members of a recorded `make family` run (:mod:`identifiability.recorded.family`),
    counted by verdict; "" without any; "not confirmed" where they were judged under a rule changed after the
    freeze."""
    from collections import Counter

    from ..recorded.family import member_verdicts

    found = member_verdicts(rec, claim)
    if not found:
        return ""
    if not recorded.confirmable({claim: rec.results.get("judged_under", {}).get(claim, "")})[claim]:
        return "on the family: not confirmed, judged under a rule changed after the freeze"
    counts = Counter(verdict_label(v) for v in found.values())
    return "on the family: " + ", ".join(f"{label} on {n} of {len(found)} members" for label, n in counts.items())


def _claim_card(r: dict, v: Verdict | None, confirmation: str = "—") -> list[str]:
    """One claim of the claims page as a card (MyST): the claim in words first, then a definition list of its
    verdict (robustness; the original rule's), this build's estimate, the baseline, the untrained twin's
    verdict and its confirmation on data the rules never saw (:func:`confirmation_text`). ``book.css`` lays the
    list out in five columns on a wide page and one below another on a phone, so no column is cut and nothing
    scrolls sideways."""
    est, base = (measured_text(v), baseline_text(v)) if v else ("—", "—")
    original = r.get("original")
    before = verdict_label(original) if original else (None if r["amendment"] is None else "not measured")
    notes = [robustness_summary(r) or "robustness not measured"] + ([f"original rule: {before}"] if before else [])
    twin = r.get("twin")
    link = f'<a href="../notebooks/{r["chapter"]}.html#{anchor(r["id"])}">{r["id"]}</a>'
    flat = lambda t: str(t).replace("\n", " ")  # noqa: E731
    return [
        "::::{container} claim-card",
        f"**{link}** {flat(math_text(r['claim']))} ({flat(r['source'])}, {flat(math_text(r['where']))}; "
        f"*{flat(math_text(r['paper_value']))}*)",
        "",
        "verdict",
        f": **{verdict_label(r)}** ({'; '.join(notes)})",
        "",
        "this build (95% interval)",
        f": {flat(est)}",
        "",
        "baseline",
        f": {flat(base)}",
        "",
        "untrained twin",
        f": {verdict_label(twin) if twin else '—'}",
        "",
        "confirmation",
        f": {confirmation}",
        "::::",
        "",
    ]


def write_claims_page(stage: Path, results_dir: Path, model: str | None | ModelRef = None) -> None:
    """``book/claims.md``: the paper-vs-replication table, from data/claims.csv (with its amendments) and the
    verdict each chapter recorded in ``results_dir``: the current verdict, its robustness to the alternatives
    the claim's row names, and for an amended claim the original rule's verdict beside it; and ``model``'s
    recorded confirmation run (``make confirm``), where there is one (``model``: a name, or a ref resolved
    already)."""
    from ..recorded.confirm import confirmation, records
    from ..recorded.family import find as find_family

    model = model_ref(model)
    read = records(model)  # chapters 2 to 6's confirmation run, then chapter 10's
    confirm = [rec for rec, _ in read]
    # the family was judged beside the default
    family, why_family = recorded.for_page(find_family, lambda rec: None) if model.embedded else (None, None)
    esc = lambda t: str(t).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    table = claims_table(results_dir)
    rows = [finding(r) for r in table]
    built = {r["id"]: None if r["verdict"] == "not measured" else r["verdict"] for r in table}
    short = {f.id: confirmation_short(confirmation(f.id, built[f.id], confirm)) for f in rows}
    lines = [
        "# Paper vs replication",
        "",
        "Every claim of the paper, each objection of the review and each prediction this book adds, with the verdict "
        "its rule (fixed before the numbers) computes from this build's estimate. The cards below give each claim in "
        "full; the rules and the reasons for every verdict follow them.",
        "",
        tally(rows),
        "",
        overview_table(rows, short),
        "",
    ]
    for rec, of in zip(confirm, ("chapters 2 to 6", "chapter 10")):
        if rec is not None:
            lines += [f"*Confirmation of {of}:* {recorded.caption(rec)}.", ""]
    # unreadable, or missing or partial numbers: said in one line each, the rest shown
    lines += [line for why in [w for _, w in read] + [why_family] if why for line in (f"*{why}*", "")]
    lines += [
        "## Every claim in full",
        "",
        "Each card gives the claim in words with the paper's value, then its verdict, this build's estimate with its "
        "95% interval, the null baseline (what chance or dimension counting alone would give) and the verdict on "
        'the untrained twin (the same architecture with its random initial weights, one seed; "—" where the claim '
        "is not run on it). *Robustness* is the verdict under the alternative choices each rule names (a moved "
        "threshold, the other null, the other unit of resampling): *robust* when none changes it. Where a rule "
        "was amended after its first verdict was seen, the original rule's verdict stands beside the current one. "
        "*Confirmation* is the verdict on text that no chapter had read when the rules were frozen (`lee_test`), "
        "whether it is the same as this build's, and whether the original and amended rules agree there (a claim "
        'whose rule changed after the freeze is *not confirmed*; "—" where `make confirm` has not recorded it). '
        "Numbers have three significant digits; each id links to the verdict in its chapter.",
        "",
    ]
    # the row's claim text replaced the verdict's own ``claim`` field (its id) in claims_table
    verdicts = {r["id"]: None if r["verdict"] == "not measured" else from_json({**r, "claim": r["id"]}) for r in table}
    for r in table:
        built = None if r["verdict"] == "not measured" else r["verdict"]
        said = [confirmation_text(confirmation(r["id"], built, confirm)), family_confirmation(r["id"], family)]
        said = [t for t in said if t and t != "—"]
        lines += _claim_card(r, verdicts[r["id"]], "; ".join(said) or "—")
    lines += ["", "## Why each verdict", ""]
    for r in table:
        v = verdicts[r["id"]]
        if v is None:
            said = f"The claim that {statement(r['claim'])} has **not been measured**"
            lines.append(f"**{r['id']}.** {said}: the chapter has not run in this build.\n")
            continue
        lines.append(render(v, r["claim"], lists=False).replace("\n", " ") + "\n")
        if r.get("robustness"):
            alts = "; ".join(f"{name}: {verdict}" for name, verdict in r["robustness"])
            lines.append(f"Under the alternatives: {alts}.\n")
        if r.get("original"):
            o = r["original"]
            lines.append(f"Under the original rule: **{verdict_label(o)}** ({esc(math_text(o['reason']))}).\n")
    lines += [
        "## The rules",
        "",
        "Each verdict follows a rule fixed from the paper's (or the review's) statement before the numbers were "
        "looked at; the rules are committed in `data/claims.csv` apart from, and before, the code that applies them "
        "(`identifiability.verdicts`). An amended rule keeps the original: the amendment, in "
        "`data/amendments.csv`, is dated, gives its reason from the claim's meaning and is marked *post hoc*. A "
        "claim added after the numbers were seen (to give a rule to a sentence that decided it without one) says "
        "so where its rule begins: *Post hoc*.",
        "",
    ]
    for r in table:
        m = math_text
        alts = f" *Alternatives:* {m(r['alternatives'])}." if r["alternatives"] else ""
        a = r["amendment"]
        if a is None:
            lines.append(f"**{r['id']}.** {m(r['rule'])}{alts}\n")
            continue
        lines.append(
            f"**{r['id']}** (amended {a['date']}, version {a['version']}; *{a['mark']}*). {m(a['rule'])}{alts}\n\n"
            f"*Reason:* {m(a['reason'])}\n"
        )
        for old in reversed(r["amendments"][:-1]):  # earlier amendments, newest first
            lines.append(f"*Version {old['version']}* ({old['date']}): {m(old['rule'])} *Reason:* {m(old['reason'])}\n")
        lines.append(f"*Original rule (version 1):* {m(r['original_rule'])}\n")
    (stage / "book" / "claims.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


FINDINGS_MARKER = "<!-- findings: written by the build -->"


@dataclass(frozen=True)
class Finding:
    """One claim as the findings tables show it (Markdown cells; "—" where there is nothing to show)."""

    id: str
    chapter: str  # its chapter's stem
    source: str  # paper | review | prediction (data/claims.csv)
    short: str  # a name of a few words
    plain: str  # the claim in plain words
    paper: str  # what the paper (or the review) says
    verdict: str  # the verdict's label, or NOT_RUN
    value: str  # the estimate's value and its 95% interval (its quantity is named on its chapter's page)
    twin: str  # the verdict on the untrained twin
    recorded: str  # "recorded run of <date>" where the verdict was judged on one, else ""

    @property
    def link(self) -> str:
        """The claim's id, linked to its verdict on its chapter's page (from a page under book/)."""
        return f'<a href="../notebooks/{self.chapter}.html#{anchor(self.id)}">{self.id}</a>'


def findings(results_dir: str | Path) -> list[Finding]:
    """Every claim of data/claims.csv in its order, with the verdict its chapter recorded in ``results_dir``."""
    return [finding(r) for r in claims_table(results_dir)]


def finding(r: dict) -> Finding:
    """A row of :func:`identifiability.verdicts.claims.claims_table` as the findings tables show it."""
    built = r["verdict"] != "not measured"
    v = from_json({**r, "claim": r["id"]}) if built else None  # the row's text replaced the verdict's id
    source = r.get("recorded_from")
    return Finding(
        id=r["id"],
        chapter=r["chapter"],
        source=r["source"],
        short=r["short"],
        plain=r["plain"],
        paper=_flat(math_text(r["paper_value"])),
        verdict=verdict_label(r) if built else NOT_RUN,
        value=_flat(measured_text(v, named=False)) if v and v.verdict != NOT_RUN and v.estimate is not None else "—",
        twin=verdict_label(r["twin"]) if r.get("twin") else "—",
        recorded=f"recorded run of {source['date']}" if source and source.get("date") else "",
    )


def _flat(text: str) -> str:
    """``text`` for one Markdown table cell: one line, its pipes escaped."""
    return str(text).replace("\n", " ").replace("|", "\\|")


def _outcome(f: Finding) -> str:
    """The verdict in bold, and the recorded run it was judged on."""
    return f"**{f.verdict}**" + (f" ({f.recorded})" if f.recorded else "")


# a count of claims and its verdict: "3 hold", "1 holds", "2 are inconclusive"
_PLURAL = {HOLDS: "hold", PARTLY: "partly hold", FAILS: "fail"}


def tally(rows: list[Finding]) -> str:
    """One sentence: how many claims got each verdict, in the order of :data:`identifiability.verdicts.VERDICTS`
    (a qualified verdict, "holds (post hoc)", counts as its verdict)."""
    counts = Counter(f.verdict.split(" (")[0] for f in rows)
    parts = []
    for v in (v for v in VERDICTS if counts[v]):
        n = counts[v]
        if v in _PLURAL:
            parts.append(f"{n} {v if n == 1 else _PLURAL[v]}")
        else:
            parts.append(f"{n} {'is' if n == 1 else 'are'} {v}")
    listed = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
    by = Counter(f.source for f in rows)
    kinds = [f"{by[k]} {words}" for k, words in _SOURCES.items() if by[k]]
    return f"Of the {len(rows)} claims ({', '.join(kinds)}), {listed}."


# where a claim comes from (data/claims.csv, column source): a prediction is this book's, committed with its
# rule before it was measured
_SOURCES = {"paper": "from the paper", "review": "from a review of it", "prediction": "predictions of this book"}


def intro_table(rows: list[Finding]) -> str:
    """The introduction's findings (Markdown): the tally, then per chapter a table of its claims in plain words,
    the verdict, the estimate with its interval and what the paper says (for a review's objection or a
    prediction of this book, what the paper said of it); each id links to the verdict on its chapter's page."""
    lines = [tally(rows), ""]
    by_chapter: dict[str, list[Finding]] = {}
    for f in rows:
        by_chapter.setdefault(f.chapter, []).append(f)
    for stem in sorted(by_chapter):
        lines += [
            f"**{{doc}}`../notebooks/{stem}`**",
            "",
            ":::{container} findings",
            "| claim | verdict | estimate (95% interval) | the paper says |",
            "|---|---|---|---|",
        ]
        for f in by_chapter[stem]:  # the verdict beside the claim: on a phone the last column scrolls
            lines.append(f"| {f.link} {_flat(f.plain)} | {_outcome(f)} | {f.value} | {f.paper} |")
        lines += [":::", ""]
    return "\n".join(lines)


def overview_table(rows: list[Finding], confirmations: dict[str, str]) -> str:
    """The claims page's overview (Markdown): one short row per claim, its id (linked), short name, verdict,
    estimate with its interval, the untrained twin's verdict and its confirmation (``confirmations``: {id: short
    text}, :func:`confirmation_short`)."""
    lines = [
        ":::{container} overview",
        "| id | claim | verdict | estimate (95% interval) | untrained twin | confirmation |",
        "|---|---|---|---|---|---|",
    ]
    for f in rows:
        cells = [f.link, _flat(f.short), _outcome(f), f.value, f.twin, confirmations.get(f.id, "—")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, ":::"])


def confirmation_short(c: dict | None) -> str:
    """A claim's confirmation (:func:`identifiability.recorded.confirm.confirmation`) in a few words for the
    overview: the verdict on the held-out text and whether it is this build's; "—" without one."""
    if c is None:
        return "—"
    if not c["frozen"]:
        return "not confirmed"
    if c["label"] == NOT_RUN:  # the held-out run lacks what this claim needs (its own line says which command)
        return "not run on the held-out text"
    same = {True: ", as here", False: ", unlike here", None: ""}[c["agrees"]]
    return f"{c['label']}{same}"


def write_findings(stage: Path, results_dir: Path) -> Path:
    """Replace :data:`FINDINGS_MARKER` in the staged ``book/intro.md`` with :func:`intro_table` of the verdicts
    in ``results_dir``."""
    path = stage / "book" / "intro.md"
    text = path.read_text(encoding="utf-8")
    if FINDINGS_MARKER not in text:
        raise ValueError(f"{path.name} has lost its marker {FINDINGS_MARKER!r}")
    path.write_text(text.replace(FINDINGS_MARKER, intro_table(findings(results_dir))), encoding="utf-8")
    return path


def chapter_summary(results: dict, chapter: str) -> str:
    """A chapter's findings at a glance (Markdown), for the top of its page: each claim of ``chapter`` that
    ``results`` (a chapter's results, as :meth:`identifiability.book.notebook.Chapter.save` writes them) judged,
    in its order in data/claims.csv, as 'The claim that ... **holds**' with the estimate and its interval, the
    untrained twin's verdict where it was judged, and the recorded run it was judged on; then where the reasons
    are."""
    from ..verdicts.claims import load_claims

    judged, twins = results.get("claims") or {}, results.get("twin_claims") or {}
    sources = results.get(RECORDED_FROM) or {}
    lines = []
    for c in (c for c in load_claims() if c["chapter"] == chapter and c["id"] in judged):
        v = from_json(judged[c["id"]])
        said = [measured_text(v)] if v.verdict != NOT_RUN else []
        if c["id"] in twins:
            said.append(f"untrained twin: **{verdict_label(twins[c['id']])}**")
            if (d := twin_difference(v, from_json(twins[c["id"]]))) is not None:
                said.append(f"trained minus twin, the learned part: {fmt(d.estimate)} ({fmt(d.low)} to {fmt(d.high)})")
        if (where := sources.get(c["id"])) and where.get("date"):
            said.append(f"judged on the recorded run of {where['date']}")
        tail = f" ({'; '.join(said)})" if said else ""
        # "**C4:**", not the verdict line's "**C4.**": the full verdict, with its parts and chart, is further down
        lines.append(f"- **{c['id']}:** {claim_outcome(v, c['claim'])}{tail}.")
    if not lines:
        return "This run judged none of the chapter's claims."
    return "\n".join(lines + ["", "Each verdict's reasons, its baseline and its rule follow further down this page."])
