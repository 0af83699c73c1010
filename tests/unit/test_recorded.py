"""Recorded heavy runs (identifiability.recorded.store): written and read back, judged stale when the code they
computed with, the rules or the lock change, their moved values listed, their caption."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from identifiability.recorded import computed_with
from identifiability.recorded import store as recorded
from identifiability.verdicts.claims import load_amendments

GIT = ("0123abc", False)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of what a recorded run hashes: the package's sources, the lock and the claims tables."""
    src = Path(recorded.__file__).resolve().parents[3]
    shutil.copytree(src / "src" / "identifiability", tmp_path / "src" / "identifiability")
    (tmp_path / "data").mkdir()
    for name in ("data/claims.csv", "data/amendments.csv", "requirements.txt"):
        shutil.copy(src / name, tmp_path / name)
    return tmp_path


RESULTS = {"seed": 0, "draws": [3, 1, 3], "sentences": {"1": {"share": 0.5, "tokens": 8}}, "label": "lee"}


def _write(checkout: Path, results: dict = RESULTS, seconds: float = 4000.0) -> recorded.Recorded:
    prov = recorded.provenance(["C10"], "record-c10", seconds, checkout, command="identifiability x", git=GIT)
    return recorded.write("c10", "m/lee", results, prov, checkout)


def test_a_recorded_run_reads_back_as_written_with_its_provenance(checkout):
    rec = _write(checkout)
    back = recorded.load("c10", "m/lee", "record-c10", checkout)
    assert back == rec and back.results == RESULTS
    p = back.provenance
    assert (p["commit"], p["dirty"], p["command"], p["target"], p["claims"]) == (
        *GIT,
        "identifiability x",
        "record-c10",
        ["C10"],
    )
    assert p["seconds"] == 4000.0 and back.date == p["date"][:10] and back.target == "record-c10"
    assert set(p["machine"]) == {"platform", "cpus", "torch"}
    assert set(p["hashes"]) == {"lock", "rules", "modules", "modules_rule", "unreported"}
    assert p["hashes"]["modules"] == computed_with.imported() and "identifiability.base.paths" in p["hashes"]["modules"]
    files = sorted(f.name for f in (checkout / "data" / "recorded" / "c10" / "m" / "lee").iterdir())
    assert files == ["provenance.json", "results.json"]  # no temporary file left behind
    mode = (checkout / "data/recorded/c10/m/lee/results.json").stat().st_mode & 0o777
    mask = os.umask(0)
    os.umask(mask)
    assert mode == 0o666 & ~mask  # written as the umask allows, not private


def test_a_missing_or_unreadable_run_is_one_line_naming_the_command(checkout):
    assert recorded.find("c10", "m/lee", "record-c10", checkout) is None
    with pytest.raises(recorded.RecordMissing, match=r"no recorded run at .*: run `make record-c10` to compute it"):
        recorded.load("c10", "m/lee", "record-c10", checkout)
    _write(checkout)
    results = checkout / "data/recorded/c10/m/lee/results.json"
    results.write_text(json.dumps({**RESULTS, "seed": 1}))  # results that are not the ones the provenance names
    with pytest.raises(recorded.RecordMissing, match=r"unreadable \(its results do not match .*`make record-c10`") as e:
        recorded.load("c10", "m/lee", "record-c10", checkout)
    assert "\n" not in str(e.value)
    results.write_text("{not json")
    with pytest.raises(recorded.RecordMissing, match="unreadable"):
        recorded.find("c10", "m/lee", "record-c10", checkout)


def test_the_run_hashes_the_package_modules_its_process_imported():
    modules = computed_with.imported()
    assert "identifiability.base.paths" in modules and all(n.startswith("identifiability") for n in modules)
    assert "identifiability.recorded.store" not in modules  # it writes the record, it computes nothing


def test_stale_names_what_changed_since_the_run(checkout, monkeypatch):
    ran = ["identifiability.base.linalg", "identifiability.base.stats"]  # the modules the job computed with
    now = computed_with.on_disk(checkout / "src" / "identifiability")
    monkeypatch.setattr(computed_with, "imported", lambda: {n: now[n] for n in ran})
    rec = _write(checkout)
    assert sorted(rec.provenance["hashes"]["modules"]) == ran
    assert recorded.stale(rec, checkout) == []
    with open(checkout / "data" / "amendments.csv", "a", encoding="utf-8") as f:  # another claim's row: not C10's
        f.write('C99,2,2026-12-04,"a rule","a reason",post hoc\n')
    assert recorded.stale(rec, checkout) == []
    with open(checkout / "data" / "amendments.csv", "a", encoding="utf-8") as f:
        f.write('C10,4,2026-12-04,"a new rule","a reason",post hoc\n')
    assert recorded.stale(rec, checkout) == ["rules"]
    unused = checkout / "src" / "identifiability" / "corpus" / "corpora.py"  # a module the run never imported
    unused.write_text(unused.read_text() + "\nCHANGE = 1\n")
    assert recorded.stale(rec, checkout) == ["rules"]
    source = checkout / "src" / "identifiability" / "base" / "stats.py"
    source.write_text(source.read_text() + "\n# a comment\n")
    assert recorded.stale(rec, checkout) == ["rules"]  # a comment is not code
    source.write_text(source.read_text() + "\nCHANGE = 1\n")
    assert recorded.stale(rec, checkout) == ["code", "rules"]
    assert recorded.changed_modules(rec, checkout) == ["identifiability.base.stats"]
    (checkout / "requirements.txt").write_text("torch==0.0\n")
    assert recorded.stale(rec, checkout) == ["lock", "code", "rules"]


def test_the_caption_names_the_run_and_what_changed_since(checkout, monkeypatch):
    """Issue 53: one short line (no platform string), naming what changed rather than a blanket warning."""
    ran = ["identifiability.base.linalg", "identifiability.base.stats"]  # the modules the job computed with
    now = computed_with.on_disk(checkout / "src" / "identifiability")
    monkeypatch.setattr(computed_with, "imported", lambda: {n: now[n] for n in ran})
    rec = _write(checkout, seconds=2 * 3600 + 7 * 60)
    cpus = rec.provenance["machine"]["cpus"]
    head = f"recorded run of {rec.date}; `make record-c10` recomputes it (2 h 7 min on {cpus} cores)"
    assert recorded.caption(rec, checkout) == head
    assert rec.provenance["machine"]["platform"] not in head
    source = checkout / "src" / "identifiability" / "base" / "stats.py"
    source.write_text(source.read_text() + "\nCHANGE = 1\n")
    (checkout / "requirements.txt").write_text("torch==0.0\n")
    assert recorded.caption(rec, checkout) == (
        f"{head}; computed before a change to base/stats.py; computed with other versions of the locked packages "
        "(requirements.txt)"
    )
    assert [recorded.duration(s) for s in (42, 185, 7320)] == ["42 s", "3 min 5 s", "2 h 2 min"]
    # a run that read some of its sentences from the cache says so beside the time it took for the others
    rec.provenance["cached"] = {"items": 50, "of": 66}
    said = f"(2 h 7 min on {cpus} cores, with 50 of 66 sentences' exact HTA from the cache)"
    assert said in recorded.caption(rec, checkout)


def test_moved_lists_every_value_beyond_the_tolerance_and_nothing_else():
    old = {"share": 0.61, "n": 67, "label": "lee", "rows": [0.5, 0.25], "drop": None, "gone": 1}
    assert recorded.moved(old, dict(old), 1e-9) == []
    assert recorded.moved(old, {**old, "share": 0.61 + 1e-7}, 1e-6) == []  # within the tolerance
    new = {**old, "share": 0.64, "n": 68, "label": "lee_test", "rows": [0.5, 0.3], "added": True}
    del new["gone"]
    assert recorded.moved(old, new, 0.01) == [
        "added: absent -> true",
        "gone: 1 -> absent",
        'label: "lee" -> "lee_test"',
        "n: 67 -> 68",  # whole numbers exactly, whatever the tolerance
        "rows[1]: 0.25 -> 0.3",
        "share: 0.61 -> 0.64",
    ]
    assert recorded.moved({"n": 1}, {"n": 1.0}, 0.0) == []  # 1 and 1.0 are the same number
    assert recorded.moved({"r": [1, 2]}, {"r": [1]}, 0.0) == ["r: 2 entries -> 1"]


def test_moved_never_compares_the_provenance_and_record_reports_before_replacing(checkout):
    first = _write(checkout, seconds=10.0)
    again = _write(checkout, seconds=99.0)  # another date and duration, the same results
    assert first.provenance["seconds"] != again.provenance["seconds"] and recorded.moved(first, again, 0.0) == []
    said: list[str] = []
    prov = recorded.provenance(["C10"], "record-c10", 5.0, checkout, command="x", git=GIT)
    recorded.record("c10", "m/lee", RESULTS, prov, 1e-6, checkout, echo=said.append)
    assert said == [f"identical to the recorded run of {again.date} (tolerance 1e-06)"]
    said.clear()
    rec = recorded.record("c10", "m/lee", {**RESULTS, "seed": 2}, prov, 1e-6, checkout, echo=said.append)
    assert said == [f"1 value(s) moved since the recorded run of {again.date} (tolerance 1e-06):", "  seed: 0 -> 2"]
    assert recorded.load("c10", "m/lee", "record-c10", checkout).results["seed"] == 2 == rec.results["seed"]


def test_the_frozen_rules_cover_every_claim_once_on_the_day_of_the_freeze():
    """The freeze (data/frozen_rules.csv) was written once, before the family was trained, and is never rewritten:
    a claim whose rule changes later no longer matches and shows "not confirmed" (the next test)."""
    fz = recorded.frozen()
    assert set(fz) == {f"C{i}" for i in range(1, 33)} <= set(recorded.claim_hashes())
    assert all(len(v["sha256"]) == 64 for v in fz.values())
    # C1-C21 before the family was trained, C22-C27 (chapter 10's measures, as amended) before lee_test, C28-C32
    # (the re-split family's predictions) before any member was healed
    assert {c for c, v in fz.items() if v["date"] == "2026-12-03"} == {f"C{i}" for i in range(1, 22)}
    assert {c for c, v in fz.items() if v["date"] == "2026-12-07"} == {f"C{i}" for i in range(22, 33)}
    import csv

    with open(recorded.root().parent / recorded.FROZEN, newline="", encoding="utf-8") as f:
        ids = [r["id"] for r in csv.DictReader(f)]
    assert len(ids) == len(set(ids)), "a claim frozen twice: the file is append-only and freezes a claim once"


def test_a_rule_changed_after_the_freeze_is_not_confirmed(checkout):
    shutil.copy(Path(recorded.__file__).resolve().parents[3] / "data" / recorded.FROZEN, checkout / "data")
    before = recorded.claim_hashes(checkout)
    fz = recorded.frozen(checkout)
    # claims amended after the freeze (C1 and C16, issue 54) are not confirmable already; the others are
    later = {a["id"] for a in load_amendments() if a["id"] in fz and a["date"] > fz[a["id"]]["date"]}
    assert later == {"C1", "C16"}
    assert all(v for c, v in recorded.confirmable(before, checkout).items() if c in {f"C{i}" for i in range(22, 28)})
    frozen = set(fz) - later
    assert all(v for c, v in recorded.confirmable(before, checkout).items() if c in frozen)
    assert not any(v for c, v in recorded.confirmable(before, checkout).items() if c in later)
    with open(checkout / "data" / "amendments.csv", "a", encoding="utf-8") as f:
        f.write('C19,2,2026-12-04,"a later rule","a reason written after the numbers were seen",post hoc\n')
    after = recorded.claim_hashes(checkout)
    ok = recorded.confirmable(after, checkout)
    assert ok["C19"] is False and all(v for c, v in ok.items() if c != "C19" and c in frozen)
    assert not any(v for c, v in ok.items() if c not in frozen)  # amended after the freeze
    assert recorded.confirmable({"C99": "0" * 64}, checkout) == {"C99": False}  # never frozen
