"""make confirm's gathering (identifiability.recorded.confirm): the judging chapters' verdicts on the unseen text,
with the hash of the rule each was judged under; nothing to gather is one line naming the command."""

from __future__ import annotations

import pytest

from identifiability.base.fileio import write_json
from identifiability.chapters.contract import by_name
from identifiability.recorded import confirm as record_confirm
from identifiability.recorded import store as recorded
from identifiability.verdicts import HOLDS, Verdict


def _file(folder, name: str, claims: dict, twin: dict | None = None, params: dict | None = None) -> None:
    results = {"claims": {c: v.to_json() for c, v in claims.items()}}
    if twin:
        results["twin_claims"] = {c: v.to_json() for c, v in twin.items()}
    doc = {"results": results, "params": {"results_dir": "/x", **(params or {})}}
    write_json(folder / f"{by_name(name).stem}.json", doc)


def test_gather_reads_every_judging_chapter_and_the_rules_it_was_judged_under(tmp_path):
    v = lambda c: Verdict(c, HOLDS, 1.0, None, 0.0, "n", "r", "w")  # noqa: E731
    _file(tmp_path, "effective_attention", {"C4": v("C4"), "C18": v("C18")}, {"C4": v("C4")}, {"n_sentences": 70})
    _file(tmp_path, "token_identity", {"C6": v("C6")})
    _file(tmp_path, "model_and_data", {"C99": v("C99")})  # not a judging chapter of the confirmation
    out = record_confirm.gather(tmp_path)
    assert sorted(out["claims"]) == ["C18", "C4", "C6"] and list(out["twin_claims"]) == ["C4"]
    assert out["params"][by_name("effective_attention").stem] == {"n_sentences": 70}  # no results_dir (a path)
    assert out["judged_under"] == {c: recorded.claim_hashes()[c] for c in ("C4", "C18", "C6")}


def test_nothing_to_gather_is_one_line_naming_the_command(tmp_path):
    with pytest.raises(record_confirm.NothingToRecord, match="run make confirm"):
        record_confirm.gather(tmp_path)


def test_the_confirmation_runs_every_judging_chapter_of_the_paper_with_parameters_it_declares():
    from identifiability.chapters.parameters import declared_parameters

    paper = {"nonidentifiability", "effective_attention", "token_identity", "angle_magnitude", "context_mixing"}
    assert set(record_confirm.PARAMS) == paper
    for name, params in record_confirm.PARAMS.items():
        assert set(params) <= set(declared_parameters(by_name(name).source)), name


def test_the_record_computed_with_what_the_judging_chapters_kernels_reported(tmp_path, monkeypatch):
    from identifiability.base import paths
    from identifiability.models import keys
    from identifiability.recorded import computed_with

    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "data"))
    monkeypatch.setattr(recorded, "root", lambda source=None: tmp_path / "recorded")
    monkeypatch.setattr(recorded, "git_state", lambda source: ("abc", False))
    folder = keys.target(paths.DEFAULT_MODEL, record_confirm.CORPUS).results_dir
    v = Verdict("C6", HOLDS, 1.0, None, 0.0, "n", "r", "w")
    stem = by_name("token_identity").stem
    doc = {
        "results": {"claims": {"C6": v.to_json()}},
        "params": {},
        computed_with.KEY: {"identifiability.identity.kernel_only": "f"},
    }
    write_json(folder / f"{stem}.json", doc)
    _file(folder, "model_and_data", {"C99": v})  # not gathered: says nothing of the record's modules
    h = record_confirm.record_confirm(run=False, echo=lambda s: None).provenance["hashes"]
    assert h["modules"]["identifiability.identity.kernel_only"] == "f" and h["unreported"] == []
