"""make family's recording (identifiability.record_family): chapter 7's results, each member's verdicts in
chapters 2 to 6 and its provenance gathered from a data folder; chapter 7 adopts a recorded verdict only
where it was judged under the rule in force."""

from __future__ import annotations

import pytest

from identifiability import keys, paths, record_family
from identifiability.chapters import by_name
from identifiability.fileio import write_json
from identifiability.notebook import Chapter
from identifiability.verdicts import HOLDS, NOT_RUN, Verdict, with_robustness
from identifiability.verdicts.claims import load_claims, robustness_names

CLAIMS = {c["id"]: c for c in load_claims()}


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
        run = tmp_path / "sweeps" / keys.model_key(model) / "lee" / stem / "seed0-abc" / f"{stem}.json"
        doc = {"results": {"claims": {claim: _verdict(claim).to_json()}}, "params": {"model": model, "corpus": "lee"}}
        write_json(run, {**doc, "chapter": stem})
    seven = keys.results_dir(paths.DEFAULT_MODEL, "lee") / "07_head_width.json"
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


def test_nothing_of_the_family_is_one_line_naming_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path))
    with pytest.raises(record_family.NothingToRecord, match="make family"):
        record_family.gather(tmp_path)


def test_chapter_7_adopts_a_recorded_verdict_only_under_the_rule_in_force(tmp_path):
    ch = Chapter(by_name("head_width").stem, None, None, {}, tmp_path)
    assert ch.recorded("C20", _verdict("C20").to_json(), "family").verdict == HOLDS
    old = ch.recorded("C21", _verdict("C21", rule="an earlier rule").to_json(), "family")
    assert old.verdict == NOT_RUN and "`make family` judges it again" in old.reason
    assert ch.results["claims"]["C21"]["verdict"] == NOT_RUN and ch.results["claims"]["C20"]["verdict"] == HOLDS


def test_make_family_runs_the_members_of_the_registry():
    import re

    from identifiability.pretrain.family import MEMBERS

    makefile = (paths.source_root() / "Makefile").read_text()
    listed = re.search(r"^FAMILY = (.*)$", makefile, flags=re.M).group(1).split()
    assert listed == [m.name for m in MEMBERS]
