"""What a result was computed with (identifiability.recorded.computed_with) and how a recorded run judges it
(identifiability.recorded.store): modules keyed by name and fingerprinted by meaning, so that a module that moves
leaves a record fresh, an edit of its code makes it stale and names it, an edit of a docstring or a comment
does not; charts, text, pages, the build and the command line are never part of it; a record from before
modules were fingerprinted is stale with its reason."""

from __future__ import annotations

import json
import shutil
import sys
import types
from pathlib import Path

import pytest

from identifiability.base.fileio import write_json
from identifiability.chapters.contract import by_name
from identifiability.recorded import computed_with
from identifiability.recorded import store as recorded

STATS = '''"""Numbers."""

from .errors import UserError  # where the error comes from


def mean(xs: list[float]) -> float:
    """The mean."""
    if not xs:
        raise UserError("no numbers: give at least one")
    return sum(xs) / len(xs)
'''
MEASURES = '''"""A study."""

from __future__ import annotations

import math

from ..stats import mean


def score(xs):
    return math.sqrt(mean(xs))
'''


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A checkout with a tiny package: ``identifiability.stats``, ``identifiability.studies.measures`` (which
    imports it) and a chart; and what stale() reads besides (the lock, the claims tables)."""
    pkg = tmp_path / "src" / "identifiability"
    files = {
        "__init__.py": "",
        "errors.py": "class UserError(Exception):\n    pass\n",
        "stats.py": STATS,
        "studies/__init__.py": '"""Studies."""\n',
        "studies/measures.py": MEASURES,
        "charts/measures.py": "def chart(xs):\n    return {'mark': 'bar', 'values': xs}\n",
    }
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    real = Path(recorded.__file__).resolve().parents[3]  # the checkout of src/identifiability/recorded/
    (tmp_path / "data").mkdir()
    for name in ("data/claims.csv", "data/amendments.csv", "requirements.txt"):
        shutil.copy(real / name, tmp_path / name)
    return tmp_path


def _record(checkout: Path, names=("identifiability.stats", "identifiability.studies.measures")) -> recorded.Recorded:
    """A record that computed with ``names`` as they are now in ``checkout``."""
    now = computed_with.on_disk(checkout / "src" / "identifiability")
    modules = {n: now[n] for n in names}
    hashes = {**recorded.hashes(checkout, ["C10"]), "modules": modules, "modules_rule": computed_with.RULE}
    prov = {"claims": ["C10"], "target": "record-c10", "hashes": {**hashes, "unreported": []}}
    return recorded.Recorded("c10", "m/lee", {}, prov)


def test_a_module_moved_unedited_leaves_the_record_fresh(checkout):
    rec = _record(checkout)
    pkg = checkout / "src" / "identifiability"
    (pkg / "base").mkdir()
    (pkg / "base" / "__init__.py").write_text("")
    # the move: stats goes to base/, its relative import and those of the modules that import it rewritten
    (pkg / "base" / "stats.py").write_text(STATS.replace("from .errors", "from ..errors"))
    (pkg / "stats.py").unlink()
    measures = pkg / "studies" / "measures.py"
    measures.write_text(MEASURES.replace("from ..stats import mean", "from ..base.stats import mean"))
    assert "identifiability.stats" not in computed_with.on_disk(pkg)  # it is gone under its recorded name
    assert recorded.changed_modules(rec, checkout) == [] and recorded.stale(rec, checkout) == []


def test_an_edit_of_a_computing_modules_code_makes_the_record_stale_and_names_it(checkout):
    rec = _record(checkout)
    stats = checkout / "src" / "identifiability" / "stats.py"
    stats.write_text(STATS.replace("sum(xs) / len(xs)", "sum(xs) / (len(xs) - 1)"))
    assert recorded.changed_modules(rec, checkout) == ["identifiability.stats"]
    assert recorded.stale(rec, checkout) == ["code"] and recorded.code_unknown(rec) is None
    stats.unlink()  # gone, and moved nowhere
    assert recorded.changed_modules(rec, checkout) == ["identifiability.stats"]


def test_an_edit_of_a_docstring_a_comment_or_the_layout_leaves_it_fresh(checkout):
    rec = _record(checkout)
    stats = checkout / "src" / "identifiability" / "stats.py"
    edited = STATS.replace('"""The mean."""', '"""The arithmetic mean,\n    of at least one number."""')
    edited = edited.replace("# where the error comes from", "# a comment that says something else")
    edited = edited.replace("return sum(xs) / len(xs)", "return (\n        sum(xs) / len(xs)\n    )  # same\n")
    stats.write_text(edited)
    assert recorded.changed_modules(rec, checkout) == [] and recorded.stale(rec, checkout) == []


def test_the_fingerprint_keeps_code_and_imports_from_outside_the_package():
    fp = computed_with.fingerprint
    assert fp("import math\nx = math.pi\n") != fp("import cmath as math\nx = math.pi\n")  # not the package's
    assert fp("from . import a\nx = 1\n") == fp("from .b import a\nx = 1\n") == fp("x = 1\n")
    assert fp("def f():\n    '''doc'''\n") == fp("def f():\n    pass\n") != fp("def f():\n    return 1\n")
    assert fp("x = 'a string value'\n") != fp("x = 'another'\n")  # a string that is a value counts
    assert fp("def f(:\n") != fp("def f(:\n ") and fp("def f(:\n").startswith("unparsable-")


def test_charts_text_pages_the_build_and_the_command_line_are_never_part_of_it(checkout, monkeypatch):
    pkg = checkout / "src" / "identifiability"
    never = [
        "identifiability.charts.measures",
        "identifiability.text.measures",
        "identifiability.verdicts.text",
        "identifiability.book.pages",
        "identifiability.book.build",
        "identifiability.book.notebook",
        "identifiability.cli",
        "identifiability.recorded.store",
        "identifiability.recorded.c10",
        "identifiability.recorded.family",
    ]
    counted = [
        "identifiability.studies.measures",
        "identifiability.verdicts.measures",
        "identifiability.pretrain.text",
        "identifiability.recorded.proportional",  # C10's sample: computes, though it lives beside the jobs
    ]
    for name in never + counted:
        module = types.ModuleType(name)
        module.__file__ = str(pkg / "stats.py")
        monkeypatch.setitem(sys.modules, name, module)
    report = computed_with.imported()
    assert not set(never) & set(report) and all(not computed_with.computing(n) for n in never)
    assert set(counted) <= set(report) and report["identifiability.studies.measures"] == computed_with.fingerprint(
        STATS
    )
    assert all(computed_with.computing(n) for n in counted) and not computed_with.computing("numpy")


def test_an_edit_of_a_chart_leaves_a_record_fresh_and_a_module_never_imported_too(checkout):
    rec = _record(checkout, names=("identifiability.stats",))
    chart = checkout / "src" / "identifiability" / "charts" / "measures.py"
    chart.write_text(chart.read_text().replace("bar", "line"))
    measures = checkout / "src" / "identifiability" / "studies" / "measures.py"
    measures.write_text(MEASURES.replace("math.sqrt", "math.exp"))  # a computing module the run never imported
    assert recorded.stale(rec, checkout) == []


def test_an_old_record_reads_and_is_stale_with_its_reason(checkout):
    old = {"claims": ["C10"], "target": "record-c10", "hashes": {"code": "ab", "code_files": {"src/x.py": "cd"}}}
    rec = recorded.Recorded("c10", "m/lee", {}, old)
    assert recorded.code_unknown(rec) == "recorded before modules were fingerprinted"
    assert recorded.changed_modules(rec, checkout) == [] and "code" in recorded.stale(rec, checkout)
    assert "recorded before modules were fingerprinted, so whether its code changed since is not known" in (
        recorded.caption(rec, checkout)
    )


def test_the_committed_records_read_and_are_judged_without_error():
    for prov in sorted(recorded.root().glob("*/**/provenance.json")):
        where = prov.parent.relative_to(recorded.root())
        job, key = where.parts[0], "/".join(where.parts[1:])
        rec = recorded.load(job, key, "x")
        assert "code" in recorded.stale(rec) or recorded.code_unknown(rec) is None, where


def test_a_job_merges_what_its_kernels_reported_and_names_a_file_that_reported_nothing(tmp_path):
    write_json(tmp_path / "a.json", {"results": {}, computed_with.KEY: {"identifiability.stats": "1"}})
    write_json(tmp_path / "b.json", {"results": {}, computed_with.KEY: {"identifiability.hta.kernel_only": "2"}})
    write_json(tmp_path / "old" / "c.json", {"results": {}})
    files = [tmp_path / "a.json", tmp_path / "b.json", tmp_path / "old" / "c.json"]
    got = recorded.computed(files, tmp_path)
    assert {"identifiability.stats": "1", "identifiability.hta.kernel_only": "2"}.items() <= got["modules"].items()
    assert got["unreported"] == ["old/c.json"] and got["modules_rule"] == computed_with.RULE
    jobs = ("identifiability.recorded.store", "identifiability.recorded.computed_with")
    assert not set(jobs) & set(got["modules"])  # the recording plumbing is never what a number was computed with
    rec = recorded.Recorded("c10", "m/lee", {}, {"hashes": got})
    assert recorded.code_unknown(rec) == "1 chapter results it gathered do not say which modules computed them"
    both = computed_with.merged([{"identifiability.base.stats": "1"}, {"identifiability.base.stats": "9"}])
    assert both == {"identifiability.base.stats": computed_with.DIFFERED}  # edited between two kernels: matches nothing


def test_a_chapter_saves_the_modules_its_kernel_computed_with(tmp_path, tiny_model_folder, monkeypatch):
    from identifiability.book import notebook

    monkeypatch.setenv("IDENTIFIABILITY_DATA", str(tmp_path / "data"))
    ch = notebook.setup(by_name("model_and_data").stem, model=str(tiny_model_folder(0, "model0")), corpus="polarity")
    ch.record(corpus_sentences=1)
    report = json.loads(ch.save().read_text())[computed_with.KEY]
    assert {"identifiability.corpus.corpora", "identifiability.models.load"} <= set(report)  # what setup computed with
    assert not any(n.startswith(("identifiability.book.notebook", "identifiability.charts")) for n in report)
    assert all(computed_with.computing(n) for n in report)
    fresh = recorded.Recorded("x", "y", {}, {"hashes": {"modules": report, "modules_rule": computed_with.RULE}})
    assert recorded.changed_modules(fresh) == []


def test_identifiability_compare_skips_the_modules_a_chapter_computed_with(tmp_path):
    from identifiability.runs.compare import compare_folders

    doc = {"results": {"share": 0.5}}
    stem = by_name("token_identity").stem
    write_json(tmp_path / "old" / f"{stem}.json", doc)  # from before kernels reported
    write_json(tmp_path / "new" / f"{stem}.json", {**doc, computed_with.KEY: computed_with.imported()})
    cmp = compare_folders(tmp_path / "old", tmp_path / "new")
    assert (cmp.changed, cmp.only_old, cmp.only_new, cmp.by_file) == ([], [], [], {f"{stem}.json": 1})


def test_a_record_fingerprinted_under_another_rule_or_python_is_stale_with_its_reason(checkout):
    rec = _record(checkout)
    prov = {**rec.provenance, "hashes": {**rec.provenance["hashes"], "modules_rule": "1, Python 2.7"}}
    other = recorded.Recorded(rec.job, rec.key, {}, prov)
    assert recorded.code_unknown(other) == (
        f"its modules were fingerprinted under another rule (1, Python 2.7; now {computed_with.RULE})"
    )
    assert recorded.stale(other, checkout) == ["code"] and recorded.stale(rec, checkout) == []
