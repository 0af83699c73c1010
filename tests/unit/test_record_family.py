"""make family's recording (identifiability.recorded.family): chapter 7's results, each member's verdicts in
chapters 2 to 6 and its provenance gathered from a data folder; chapter 7 adopts a recorded verdict only
where it was judged under the rule in force."""

from __future__ import annotations

import pytest

from identifiability.base import paths
from identifiability.base.fileio import write_json
from identifiability.book.notebook import Chapter
from identifiability.chapters.contract import by_name
from identifiability.models import keys
from identifiability.recorded import family as record_family
from identifiability.recorded.store import Recorded
from identifiability.verdicts import HOLDS, NOT_RUN, Verdict, with_robustness
from identifiability.verdicts.claims import load_claims, robustness_names

CLAIMS = {c["id"]: c for c in load_claims()}

# a recorded `make family` run as chapter 7 adopts its verdicts from it (only its target and date are read)
FAMILY_RUN = Recorded("family", "lee", {}, {"target": "family", "date": "2026-12-04T00:00:00+00:00"})


def _verdict(claim: str, rule: str | None = None) -> Verdict:
    c = CLAIMS[claim]
    v = Verdict(claim, HOLDS, 1.0, (0.9, 1.1), 0.0, "n", rule or c["rule"], "why")
    return with_robustness(v, {n: v for n in robustness_names(c)})


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path))
    member = "mlm-w128-dv32-seed0"
    write_json(
        tmp_path / "models" / member / "provenance.json",
        {"kind": "pretrained-mlm", "member": {"name": member}, "tokens_seen": 6, "weights": "never recorded"},
    )
    stem = by_name("token_identity").stem
    for model, claim in ((f"data/models/{member}", "C6"), (paths.DEFAULT_MODEL, "C7")):  # only the member's
        run = tmp_path / "sweeps" / paths.safe_key(model) / "lee" / stem / "seed0-abc" / f"{stem}.json"
        doc = {"results": {"claims": {claim: _verdict(claim).to_json()}}, "params": {"model": model, "corpus": "lee"}}
        write_json(run, {**doc, "chapter": stem})
    seven = keys.target(paths.DEFAULT_MODEL, "lee").results_dir / f"{by_name('head_width').stem}.json"
    write_json(seven, {"results": {"claims": {"C19": _verdict("C19").to_json()}}, "params": {"results_dir": "/x"}})
    return tmp_path


def test_gather_takes_the_members_verdicts_their_provenance_and_chapter_7(data):
    out = record_family.gather(data)
    member = out["members"]["mlm-w128-dv32-seed0"]
    stem = by_name("token_identity").stem
    assert list(member["chapters"]) == [stem] and list(member["chapters"][stem]["claims"]) == ["C6"]
    prov = {"kind": "pretrained-mlm", "member": {"name": "mlm-w128-dv32-seed0"}, "tokens_seen": 6}
    assert member["provenance"] == prov  # the provenance's own fields only
    assert out["head_width"]["params"] == {} and "C19" in out["head_width"]["results"]["claims"]
    assert set(out["judged_under"]) >= {"C19", "C20", "C21"}


def test_the_record_computed_with_what_the_kernels_of_the_files_it_gathered_reported(data, monkeypatch):
    from identifiability.base.fileio import read_json
    from identifiability.recorded import computed_with
    from identifiability.recorded import store as recorded

    monkeypatch.setattr(recorded, "root", lambda source=None: data / "out")
    monkeypatch.setattr(recorded, "git_state", lambda source: ("abc", False))
    files = record_family.results_files(data)
    assert [f.name for f in files] == [f"{by_name('head_width').stem}.json", f"{by_name('token_identity').stem}.json"]
    assert "mlm-w128" in files[1].as_posix()  # the member's run, not the reference model's
    write_json(files[1], {**read_json(files[1]), computed_with.KEY: {"identifiability.studies.kernel_only": "f"}})
    h = record_family.record_family(data, echo=lambda s: None).provenance["hashes"]
    assert h["modules"]["identifiability.studies.kernel_only"] == "f"
    assert h["unreported"] == [files[0].relative_to(data).as_posix()]  # chapter 7's file reported nothing


def test_nothing_of_the_family_is_one_line_naming_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path))
    with pytest.raises(record_family.NothingToRecord, match="make family"):
        record_family.gather(tmp_path)


def test_chapter_7_adopts_a_recorded_verdict_only_under_the_rule_in_force(tmp_path):
    ch = Chapter(by_name("head_width").stem, None, None, {}, tmp_path)
    assert ch.recorded("C20", _verdict("C20").to_json(), FAMILY_RUN).verdict == HOLDS
    old = ch.recorded("C21", _verdict("C21", rule="an earlier rule").to_json(), FAMILY_RUN)
    assert old.verdict == NOT_RUN and "`make family` judges it again" in old.reason
    assert ch.results["claims"]["C21"]["verdict"] == NOT_RUN and ch.results["claims"]["C20"]["verdict"] == HOLDS


def test_make_family_runs_the_members_of_the_registry():
    import re

    from identifiability.pretrain.family import MEMBERS

    makefile = (paths.source_root() / "Makefile").read_text()
    listed = re.search(r"^FAMILY = (.*)$", makefile, flags=re.M).group(1).split()
    assert listed == [m.name for m in MEMBERS]


def test_make_familys_parameters_pass_every_chapters_checks_on_every_member():
    """What the sweep of make family checks first, on each member's config (no model is loaded): a rule a
    member's d_v breaks would leave out all of that member's chapters (the d_v = 64 member's chapter 3 viewer
    once did)."""
    import re

    from identifiability.chapters.contract import CHAPTERS, coerce_parameters, find, parameters
    from identifiability.chapters.preflight import ModelInfo
    from identifiability.pretrain.family import MEMBERS, POSITIONS
    from identifiability.runs.sweep import split_scoped

    makefile = (paths.source_root() / "Makefile").read_text()
    text = re.search(r"^FAMILY_PARAMS \?= (.*?)\n(?!\t)", makefile, flags=re.M | re.S).group(1)
    given = dict(p.split("=", 1) for p in text.replace("\\\n", " ").split())
    sources = [c.source for c in find(["02", "03", "04", "05", "06"])]
    shared, scoped = split_scoped(given, sources)
    for m in MEMBERS:
        info = ModelInfo(n_layers=4, n_heads=m.width // m.d_v, d_v=m.d_v, max_positions=POSITIONS, tokenizer=None)
        for source in sources:
            declared = {k: p.default for k, p in parameters(source).items()}
            params = {**declared, **coerce_parameters(source, {**shared, **scoped[source.stem]}, strict=False)}
            for rule in CHAPTERS[source.stem].checks.rules:
                assert rule(params, info) is None, f"{m.name}, {source.stem}: {rule(params, info)}"


def _members() -> dict:
    def v(verdict, estimate):
        return {"verdict": verdict, "qualifier": "", "estimate": estimate}

    def ch(claims, twins=None):
        return {"claims": claims, "twin_claims": twins or {}}

    return {
        "mlm-w64-dv32-seed0": {
            "provenance": {"trained_enough": False},
            "chapters": {"04": ch({"C6": v("holds", 1.0)})},
        },
        "mlm-w128-dv64-seed0": {
            "provenance": {"trained_enough": True},
            "chapters": {"04": ch({"C6": v("holds", 0.9)})},
        },
        "mlm-w128-dv16-seed0": {
            "provenance": {"trained_enough": True},
            "chapters": {
                "04": ch({"C6": v("holds", 0.8)}),
                "03": ch({"C4": v("fails", -0.5)}, {"C4": v("holds", 0.1)}),
            },
        },
        "not-a-member": {"chapters": {"04": ch({"C6": v("fails", 0.0)})}},
    }


def test_the_claims_across_the_family_are_ordered_by_claim_then_head_width_and_mark_the_undertrained():
    df = record_family.claims_across(_members())
    assert list(zip(df.claim, df.member)) == [
        ("C4", "mlm-w128-dv16-seed0"),
        ("C6", "mlm-w128-dv16-seed0"),
        ("C6", "mlm-w128-dv64-seed0"),
        ("C6", "mlm-w64-dv32-seed0"),
    ]  # C4 before C6 (by number, not text), width 128 by d_v, then width 64; not a member: left out
    assert list(df.judged) == [True, True, True, False] and list(df.twin) == ["holds", "", "", ""]
    assert list(df.d_v) == [16, 16, 64, 32] and df.estimate.iloc[0] == -0.5
    assert record_family.claims_across({}).empty


def test_make_family_fine_tunes_the_reference_chapter_9_reads():
    """make family runs make compare's steps from FAMILY_REFERENCE, a member of the registry, and chapter 9's
    `pretrained` names the same member: else the book would look for a recorded run nobody makes."""
    import re

    from identifiability.chapters.contract import by_name, parameters
    from identifiability.pretrain.family import MEMBERS

    makefile = (paths.source_root() / "Makefile").read_text()
    reference = re.search(r"^FAMILY_REFERENCE = (\S+)$", makefile, flags=re.M).group(1)
    assert reference in {m.name for m in MEMBERS}
    recipe = makefile.split("\nfamily:", 1)[1].split("\n\n", 1)[0]
    assert "$(MAKE) compare-run BASE=data/models/$(FAMILY_REFERENCE)" in recipe
    assert parameters(by_name("across_models").source)["pretrained"].default == reference


def test_a_recorded_verdict_chapter_7_adopts_is_never_a_row_of_this_runs_model(tmp_path):
    """`sweep --chapters 07` on the default model: chapter 7 shows the recorded family's verdicts, which were
    judged on the family's members, so the results table files no claim row of them under the default model."""
    from identifiability.base.results import ADOPTED
    from identifiability.book import schema
    from identifiability.runs import aggregate

    ch = Chapter(by_name("head_width").stem, None, None, {}, tmp_path)
    ch.recorded("C20", _verdict("C20").to_json(), FAMILY_RUN)
    doc = {"params": {"model": paths.DEFAULT_MODEL, "corpus": "lee"}, "results": ch.results, "chapter": ch.name}
    assert doc["results"][ADOPTED] == {"C20": "family"} and "C20" in doc["results"]["claims"]
    schema.check(ch.name, ch.results)  # a key every chapter may record
    rows = aggregate.rows_of(doc, "sweep", "r")
    assert not [r for r in rows if r.get("claim") == "C20"] and not [r for r in rows if "adopted" in r["quantity"]]
