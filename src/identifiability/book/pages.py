"""The pages the build writes: this build's model, text and parameters (``book/this_build.md``), the
chapters' measured run times (``book/teachers.md``) and the paper-vs-replication table (``book/claims.md``).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..base import paths
from ..base.digits import fmt, times_ten
from ..base.fileio import read_json
from ..chapters.contract import results_file
from ..chapters.executed import BUILD_LOCATION, PARAMETERS, assignments, cell_comments, read_notebook, run_seconds
from ..chapters.parameters import ALLOWED
from ..models.keys import ModelRef, model_ref
from ..recorded import store as recorded
from ..verdicts.claims import claims_table
from ..verdicts.core import NOT_RUN, Verdict, from_json, render, robustness_summary, statement, verdict_label
from ..verdicts.text import anchor, math_text


def format_value(value) -> str:
    """A parameter or provenance value for people: "—" for none, yes/no, floats to 3 significant digits
    (powers of ten written out), text without quotes."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != value:  # NaN
            return "—"
        text = f"{value:.3g}"
        if "e" in text:
            mantissa, exponent = text.split("e")
            return times_ten(mantissa, int(exponent))
        return text
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {format_value(v)}" for k, v in value.items())
    return str(value)


def _cell(value, code: bool = False) -> str:
    """A Markdown table cell: code font for names and numbers a reader may type, escaped pipes."""
    text = format_value(value).replace("|", "\\|").replace("\n", " ")
    plain = not code or isinstance(value, bool) or text == "—" or "`" in text or " " in text
    return text if plain else f"`{text}`"


def _provenance_rows(provenance: dict, corpus: dict | None) -> list[str]:
    p = provenance
    rows = [
        ("model", f"{_cell(p.get('name'), code=True)} ({_cell(p.get('source'))})"),
        ("architecture family", _cell(p.get("model_type"))),
        ("weights, SHA-256", f"`{p['sha256'][:16]}…`" if p.get("sha256") else "—"),
        (
            "content key",
            f"`{p['content_key'][:16]}…` (SHA-256 of the weights, config and tokenizer files)"
            if p.get("content_key")
            else "—",
        ),
        ("revision", _cell(p.get("revision")) if p.get("revision") else "— (not downloaded from the Hugging Face Hub)"),
    ]
    if p.get("rebuild_rel_error") is not None:
        rows.append(
            (
                "rebuild check",
                f"largest relative error {format_value(float(p['rebuild_rel_error']))} "
                "(attention outputs recomputed from the extracted pieces; refused above 10⁻⁵)",
            )
        )
    if corpus:
        dropped = corpus.get("dropped_lines") or 0
        rows.append(
            (
                "text",
                f"{_cell(corpus.get('name'), code=True)}, {corpus.get('sentences')} sentences"
                + (f" ({dropped} lines left out: only special or unknown tokens)" if dropped else ""),
            )
        )
    return [f"| {k} | {v} |" for k, v in rows]


def write_run_page(stage: Path, params: dict, results_dir: Path, chapters: dict[str, dict | None]) -> Path:
    """``book/this_build.md``: the model (with its weight hash), the text, and every chapter's parameters.

    ``chapters``: {stem: the parameters its parameters cell ran with
    (:func:`identifiability.chapters.executed.parameters_used`), or None for a chapter this build did not run
    (``--only``)}.
    """
    # in the book's order; a chapter this build did not run may have a file of an older build, under its old stem
    files = {stem: results_file(results_dir, stem) for stem in chapters}
    runs = {stem: read_json(f) for stem, f in files.items() if f.is_file()}
    first = next((r for r in runs.values() if r.get("provenance")), {})
    lines = [
        "# This build",
        "",
        "Which model, text and parameters produced the pages of this copy of the book. The full hashes are in "
        "each chapter's results file (`data/results/<model>/<corpus>/<chapter>.json`, under `provenance`).",
        "",
    ]
    if first:
        lines += ["## The model and the text", "", "| | |", "|---|---|"]
        lines += _provenance_rows(first["provenance"], first.get("corpus"))
    else:
        lines += [f"Model {_cell(params.get('model'), code=True)}, text {_cell(params.get('corpus'), code=True)}."]
    lines += [
        "",
        "## The chapters' parameters",
        "",
        "Each chapter's parameters cell as it ran in this build: its own defaults, with the values given to "
        "`make book` (`MODEL`, `CORPUS`, `PARAMS`) in their place, and what each sets (the comments of the "
        "cell, with the least value a parameter allows). Every chapter ran on the model and text above; "
        "rerunning with other values is described in {doc}`rerun`.",
        "",
    ]
    for stem, values in chapters.items():
        lines += [f"### {chapter_title(stem)}", ""]  # plain text: a role in a heading shows raw in the contents
        if values is None:
            lines += ["Not run in this build (`--only`).", ""]
            continue
        helps = parameter_help(stem)
        lines += ["| parameter | value | what it sets |", "|---|---|---|"]
        lines += [
            f"| `{name}` | {_cell(value, code=True)} | {helps.get(name, '—')} |"
            for name, value in values.items()
            if name not in ("model", "corpus", *BUILD_LOCATION)
        ]
        lines.append("")
    path = stage / "book" / "this_build.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _markdown_text(text: str) -> str:
    """``text`` for a Markdown table cell: its `code` kept, elsewhere the characters Markdown would read
    (a pipe, ``<task>`` as an HTML tag, ``*`` and ``_`` as emphasis) escaped."""
    parts = text.split("`")
    for k in range(0, len(parts), 2):  # outside code spans
        for ch in "\\|<>*_":
            parts[k] = parts[k].replace(ch, "\\" + ch)
    return "`".join(parts)


def parameter_help(stem: str) -> dict[str, str]:
    """{name: what it sets} for a chapter's parameters: the comments of its source's parameters cell
    (:func:`identifiability.chapters.executed.cell_comments`, the one place the help is written), with the least value
    the chapter contract allows (:data:`identifiability.chapters.parameters.ALLOWED`)."""
    import jupytext

    source = paths.source_root() / "notebooks" / f"{stem}.md"
    if not source.exists():
        return {}
    cell = next((c for c in jupytext.read(source).cells if PARAMETERS in c.metadata.get("tags", [])), None)
    if cell is None:
        return {}
    help_, out = cell_comments(cell.source), {}
    for name in assignments(cell.source):
        text = _markdown_text(help_.get(name, ""))
        least = ALLOWED[name].minimum if name in ALLOWED else None
        if least is not None:
            text += f"{'; ' if text else ''}at least {least:g}"
        if text:
            out[name] = text
    return out


def chapter_title(stem: str) -> str:
    """The first heading of a chapter's source (``notebooks/<stem>.md``)."""
    source = paths.source_root() / "notebooks" / f"{stem}.md"
    for line in source.read_text(encoding="utf-8").splitlines() if source.exists() else []:
        if line.startswith("# "):
            return line[2:].strip()
    return stem.split("_", 1)[-1].replace("_", " ").capitalize()


RUN_TIMES_MARKER = "<!-- chapter run times: written by the build -->"
LAUNCH_MARKER = "<!-- launch buttons: written by the build -->"


def launch_text(repository: str | None) -> str:
    """What the teachers' page says about launch buttons: they exist only in a copy built with the book's
    public repository (:func:`identifiability.book.build.repository_url`)."""
    if repository:
        return (
            f"In this copy, each chapter page also has a launch button (Binder) that opens the chapter in "
            f"JupyterLab on mybinder.org, built from {repository}."
        )
    return (
        "This copy was built without a repository address, so its chapter pages have no launch button; a copy "
        "built with one (`make book REPO_URL=https://github.com/<owner>/<repo>`, {doc}`rerun`) has a Binder "
        "button on every chapter page."
    )


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def write_teachers_page(
    stage: Path,
    notebooks: Path,
    stems: list[str],
    cores: int | None,
    device: str,
    repository: str | None = None,
    beside: dict[str, int] | None = None,
) -> Path:
    """Fill the run-time table of ``book/teachers.md`` from the executed chapters (papermill's measured
    duration of each), for the machine that built this copy, and say whether its pages have launch buttons
    (``repository``: the address they open, None without buttons). ``beside``: {stem: threads} of the chapters
    this build ran beside others (:func:`identifiability.book.build.execute_chapters`), which their rows say."""
    beside = beside or {}
    rows, total = ["| chapter | run time in this build |", "|---|---|"], 0.0
    for stem in stems:
        f = Path(notebooks) / f"{stem}.ipynb"
        seconds = run_seconds(read_notebook(f)) if f.exists() else None
        total += seconds or 0.0
        threads = beside.get(stem)
        note = f" ({'one thread' if threads == 1 else f'{threads} threads'}, beside another chapter)" if threads else ""
        shown = _minutes(seconds) + note if seconds else ""
        rows.append(f"| {{doc}}`../notebooks/{stem}` | {shown or 'not run in this build'} |")
    rows.append(f"| all chapters, one after the other | {_minutes(total)} |")
    where = f"{cores} CPU cores" if device == "cpu" else f"device `{device}`"
    # the sum was read as the build's own time, which running chapters side by side makes shorter (what a
    # chapter takes alone, the page's own text says after the table)
    after = ["", "This build ran its chapters side by side, so it took less than that sum."] if beside else []
    table = "\n".join(
        [f"Measured while building this copy of the book, on {where}, with the parameters on {{doc}}`this_build`:", ""]
        + rows
        + after
    )
    path = stage / "book" / "teachers.md"
    text = path.read_text(encoding="utf-8")
    for marker in (RUN_TIMES_MARKER, LAUNCH_MARKER):
        if marker not in text:
            raise ValueError(f"{path.name} has lost its marker {marker!r}")
    text = text.replace(RUN_TIMES_MARKER, table).replace(LAUNCH_MARKER, launch_text(repository))
    path.write_text(text, encoding="utf-8")
    return path


def _measured(v: Verdict) -> str:
    """The estimate in a table cell: its symbol (or its words) = value (interval); the command that fills a
    comparison this build did not run."""
    if v.verdict == NOT_RUN:  # the command that runs it, as the verdict's reason names it
        command = re.search(r"`make [^`]+`", v.reason)
        return "not run in this build" + (f": {command.group(0)}" if command else "")
    if v.estimate is None:
        return "no estimate"
    q = v.estimate_of
    text = (f"${q.symbol}$" if q.symbol else math_text(q.words)) + f" = {q.value(v.estimate)}" if q else fmt(v.estimate)
    lo, hi = v.ci95 or (None, None)
    if v.ci95 is not None and not all(b is not None and b == b for b in v.ci95):
        return text + " (no interval)"
    if v.ci95 is not None and lo != hi:
        integer = bool(q and q.integer)
        text += f" ({fmt(lo, integer)} to {fmt(hi, integer)})"
    return text


def _base(v: Verdict) -> str:
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
    est, base = (_measured(v), _base(v)) if v else ("—", "—")
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
    from ..recorded.confirm import confirmation, find, partial
    from ..recorded.family import find as find_family

    model = model_ref(model)
    confirm, why_confirm = recorded.for_page(lambda: find(model), partial)
    # the family was judged beside the default
    family, why_family = recorded.for_page(find_family, lambda rec: None) if model.embedded else (None, None)
    esc = lambda t: str(t).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = [
        "# Paper vs replication",
        "",
        "Each claim of the paper, and each objection of the review: the paper's value, this build's estimate with "
        "its 95% interval, the null baseline (what chance or dimension counting alone would give), and the "
        "verdict that the claim's rule (listed below, fixed before the numbers) computes from them. *Robustness* "
        "is the verdict under the alternative choices each rule names (a moved threshold, the other null, the other "
        "unit of resampling): *robust* when none changes it. Where a rule was amended after its first verdict was "
        "seen, the original rule's verdict stands beside the current one, and the amendment's reason is below. "
        "Generated from `data/claims.csv`, `data/amendments.csv` and the chapters' results files; each id links "
        "to the verdict in its chapter. Numbers have three significant digits; each estimate and baseline is "
        "named below with what it measures. Each claim is a card: the claim in words, then its verdict, this "
        "build's estimate, the baseline and the verdict on the untrained twin (the same architecture with its "
        'random initial weights, one initialisation seed: what the architecture gives before any training; "—" '
        "where the claim is not run on it), and its *confirmation*: the verdict on text that no chapter had read "
        "when the rules were last amended and frozen (`lee_test`), whether it is the same as this build's, and whether "
        "the original and amended rules agree there (a claim whose rule changed after the freeze is *not "
        'confirmed*; "—" where `make confirm` has not recorded it).',
        "",
    ]
    if confirm is not None:
        lines += [f"*Confirmation:* {recorded.caption(confirm, recorded.stale(confirm))}.", ""]
    # unreadable, or missing or partial numbers: said in one line each, the rest shown
    lines += [line for why in (why_confirm, why_family) if why for line in (f"*{why}*", "")]
    table = claims_table(results_dir)
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
        lines.append(render(v, r["claim"]).replace("\n", " ") + "\n")
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
