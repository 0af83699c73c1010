"""The results comparison: equal numbers pass, changed ones are listed, timings and paths are skipped."""

import json

import pytest

from identifiability import cli
from identifiability.runs.compare import compare_folders


def _write(folder, name, data):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data))


def test_identical_apart_from_timings_and_paths(tmp_path):
    _write(
        tmp_path / "a",
        "03.json",
        {"results": {"x": 1.0, "runtime_s": 5, "rows": [{"layer": 0, "v": 2}]}, "params": {"results_dir": "/a"}},
    )
    _write(
        tmp_path / "b",
        "03.json",
        {
            "results": {"x": 1.0 + 1e-12, "runtime_s": 9, "rows": [{"layer": 1, "v": 2}]},
            "params": {"results_dir": "/b"},
        },
    )
    c = compare_folders(tmp_path / "a", tmp_path / "b")
    assert c.identical and c.renumbered == [("03.json: results.rows[0].layer", 0, 1)]
    assert "identical except layer numbering" in c.report()


def test_a_changed_number_and_a_missing_field_are_reported(tmp_path, capsys):
    _write(tmp_path / "a", "02.json", {"results": {"x": 1.0, "gone": True, "rtol": 1e-10}})
    _write(tmp_path / "b", "02.json", {"results": {"x": 1.1, "new": "y", "rtol": 1e-13}})
    c = compare_folders(tmp_path / "a", tmp_path / "b")
    assert not c.identical
    # no absolute tolerance by default: two tiny tolerances that differ are reported
    assert c.changed == [("02.json: results.rtol", 1e-10, 1e-13), ("02.json: results.x", 1.0, 1.1)]
    assert c.only_old == ["02.json: results.gone"] and c.only_new == ["02.json: results.new"]
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert "DIFFERENT" in capsys.readouterr().out
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "nowhere")]) == 2


def test_results_files_below_the_folders_are_matched_by_their_relative_path(tmp_path, capsys):
    """``compare data/baseline data/results``: the chapters' files lie two folders down (<model>/<corpus>)."""
    lee, polarity = "all-MiniLM-L6-v2/lee", "all-MiniLM-L6-v2/polarity"
    for side in ("a", "b"):
        _write(tmp_path / side / lee, "03.json", {"results": {"x": 1.0, "runtime_s": 3, "by_layer": [0.5, 0.25]}})
        # the same file name under another corpus is another file: its change must not hide behind lee's
        _write(tmp_path / side / polarity, "03.json", {"results": {"x": 2.0 if side == "a" else 2.5}})
    _write(tmp_path / "b" / lee, "04.json", {"results": {"rate": 0.9}})
    # a sweep's unfinished run is not a results file
    _write(tmp_path / "b" / ".partial-run-1234", "03.json", {"results": {"x": 9.0}})
    c = compare_folders(tmp_path / "a", tmp_path / "b")
    assert c.by_file == {f"{lee}/03.json": 3, f"{polarity}/03.json": 1}  # runtime_s is skipped, not compared
    assert c.compared == 4
    assert c.changed == [(f"{polarity}/03.json: results.x", 2.0, 2.5)]
    assert c.only_new == [f"{lee}/04.json"] and c.only_old == []  # a missing file is one line, not its fields
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    assert f"  {lee}/03.json: 3 values" in out and f"  {polarity}/03.json: 1 values" in out
    assert out.splitlines()[0].startswith("4 values compared in 2 results files")
    assert out.rstrip().endswith("DIFFERENT")


def test_identical_trees_compare_every_file(tmp_path):
    for side in ("a", "b"):
        for corpus in ("lee", "polarity"):
            _write(tmp_path / side / "m" / corpus, "02.json", {"results": {"n": 5, "ok": True}, "seconds": 1})
    c = compare_folders(tmp_path / "a", tmp_path / "b")
    assert c.identical and c.by_file == {"m/lee/02.json": 2, "m/polarity/02.json": 2}


def test_a_side_without_results_files_is_an_error_not_an_identical_comparison(tmp_path, capsys):
    _write(tmp_path / "a" / "m" / "lee", "03.json", {"results": {"x": 1.0}})
    (tmp_path / "empty" / "m" / "lee").mkdir(parents=True)
    (tmp_path / "empty" / "m" / "lee" / "03.ipynb").write_text("{}")  # not a results file
    for old, new in (("a", "empty"), ("empty", "a")):
        assert cli.main(["compare", str(tmp_path / old), str(tmp_path / new)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1
        assert "empty" in err and "no results file" in err


@pytest.mark.parametrize("content", [b'{"results": {"x": ', b"\xff\xfe not text"])
def test_a_truncated_or_unreadable_results_file_is_one_line_naming_it(content, tmp_path, capsys):
    _write(tmp_path / "a", "03_effective_attention.json", {"results": {"x": 1.0}})
    _write(tmp_path / "b", "03_effective_attention.json", {"results": {"x": 1.0}})
    broken = tmp_path / "b" / "03_effective_attention.json"
    broken.write_bytes(content)  # a copy cut short, or not text at all
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: {broken} is not a results file JSON can read (")
    assert err.strip().endswith(
        f"run the chapter that writes it again, or move it out of {tmp_path / 'b'} to compare the rest"
    )


def test_two_sweeps_of_the_same_runs_are_identical_though_they_finished_at_other_times(tmp_path):
    """A sweep's run.json holds when the run finished and how often it was tried; the results are the same."""
    run = "m/lee/03_effective_attention/seed0-0123456789ab"
    for side, finished, attempts in (("a", "2026-01-01T10:00:00Z", 1), ("b", "2026-02-03T11:12:13Z", 2)):
        manifest = {"chapter": "03_effective_attention", "seed": 0, "seconds": 41.5, "finished": finished}
        _write(tmp_path / side / run, "run.json", {**manifest, "attempts": attempts})
        _write(tmp_path / side / run, "03_effective_attention.json", {"results": {"x": 1.0}})
    c = compare_folders(tmp_path / "a", tmp_path / "b")
    assert c.identical, c.report()
    assert c.by_file == {f"{run}/run.json": 2, f"{run}/03_effective_attention.json": 1}


def test_a_key_that_merely_ends_in_s_is_a_value_and_compared(tmp_path):
    """d_s is the input length: a change in it is a change, not a timing."""
    _write(tmp_path / "a", "03.json", {"results": {"rows": [{"d_s": 12, "pearson": 0.9}], "runtime_s": 5}})
    _write(tmp_path / "b", "03.json", {"results": {"rows": [{"d_s": 13, "pearson": 0.9}], "runtime_s": 7}})
    c = compare_folders(tmp_path / "a", tmp_path / "b")
    assert c.changed == [("03.json: results.rows[0].d_s", 12, 13)]


def test_every_timing_a_study_records_is_skipped_by_name():
    """The skipped keys are named one by one: a study field that times something must be among them."""
    import dataclasses
    import importlib
    import pkgutil

    import identifiability.studies as studies
    from identifiability.runs.compare import SKIPPED

    fields = set()
    for module in pkgutil.iter_modules(studies.__path__):
        for obj in vars(importlib.import_module(f"{studies.__name__}.{module.name}")).values():
            if isinstance(obj, type) and dataclasses.is_dataclass(obj):
                fields |= {f.name for f in dataclasses.fields(obj)}
    timings = {name for name in fields if "seconds" in name}
    assert timings and timings <= set(SKIPPED), sorted(timings - set(SKIPPED))
    assert "d_s" in fields and "d_s" not in SKIPPED


@pytest.mark.parametrize("buffering", [1, -1], ids=["line-buffered", "block-buffered"])
def test_a_report_piped_into_a_reader_that_left_ends_quietly(buffering, tmp_path, monkeypatch, capsys):
    """``identifiability compare ... | head`` once head has exited: stdout is a pipe without a reader."""
    import os

    from identifiability.base import stops

    _write(tmp_path / "a", "02.json", {"results": {"x": 1.0}})
    _write(tmp_path / "b", "02.json", {"results": {"x": 1.1}})
    reader, writer = os.pipe()
    os.close(reader)
    with open(writer, "w", buffering=buffering) as pipe:
        monkeypatch.setattr("sys.stdout", pipe)
        assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == stops.EXIT_BROKEN_PIPE
        pipe.write("what the interpreter flushes at exit goes to /dev/null\n")
        pipe.flush()
    assert capsys.readouterr().err == ""


def _a_socket_broke(*args, **kwargs):
    raise BrokenPipeError(32, "Broken pipe")


def test_a_broken_pipe_elsewhere_with_stdout_open_is_not_taken_for_a_reader_that_left(tmp_path, monkeypatch):
    from identifiability.runs import compare

    _write(tmp_path / "a", "02.json", {"results": {"x": 1.0}})
    monkeypatch.setattr(compare, "compare_folders", _a_socket_broke)
    with pytest.raises(BrokenPipeError):
        cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "a")])


def test_a_folder_from_before_the_renumbering_pairs_its_chapters_with_their_stems_of_now(tmp_path, capsys):
    """An older build filed the comparison across models as 08_across_models.json and the explorer as
    07_explore.json; since the head-width chapter (07) came in they are 09_across_models and 08_explore
    (chapters.RENAMED). Compared with a newer build, each old file pairs with its chapter's new one and its
    numbers are compared (a change is found), instead of two files each on one side only."""
    lee = "all-MiniLM-L6-v2/lee"
    _write(tmp_path / "old" / lee, "08_across_models.json", {"results": {"models": 2, "runtime_s": 1}})
    _write(tmp_path / "old" / lee, "07_explore.json", {"results": {"tokens": 9}})
    _write(tmp_path / "new" / lee, "09_across_models.json", {"results": {"models": 3, "runtime_s": 2}})
    _write(tmp_path / "new" / lee, "08_explore.json", {"results": {"tokens": 9}})
    _write(tmp_path / "new" / lee, "07_head_width.json", {"results": {"members": 5}})  # no file of old: new
    c = compare_folders(tmp_path / "old", tmp_path / "new")
    assert c.by_file == {f"{lee}/08_explore.json": 1, f"{lee}/09_across_models.json": 1}
    assert c.changed == [(f"{lee}/09_across_models.json: results.models", 2, 3)]
    assert c.only_old == [] and c.only_new == [f"{lee}/07_head_width.json"]
    assert sorted(c.renamed) == [
        (f"{tmp_path / 'old'}/{lee}/07_explore.json", f"{lee}/08_explore.json"),
        (f"{tmp_path / 'old'}/{lee}/08_across_models.json", f"{lee}/09_across_models.json"),
    ]
    # the other way round (new folder first) pairs them too
    back = compare_folders(tmp_path / "new", tmp_path / "old")
    assert back.changed == [(f"{lee}/09_across_models.json: results.models", 3, 2)] and back.only_old == [
        f"{lee}/07_head_width.json"
    ]
    assert cli.main(["compare", str(tmp_path / "old"), str(tmp_path / "new")]) == 1
    out = capsys.readouterr().out
    assert f"{lee}/08_across_models.json as {lee}/09_across_models.json" in out


def test_a_file_under_an_old_stem_beside_its_new_one_is_not_paired_twice(tmp_path):
    """A data folder that holds both a chapter's old-stem file (an older build) and its new one: the new one
    pairs with the other folder's, the old one stays under its own name, reported on its side only."""
    for side in ("a", "b"):
        _write(tmp_path / side, "09_across_models.json", {"results": {"models": 2}})
    _write(tmp_path / "a", "08_across_models.json", {"results": {"models": 1}})
    c = compare_folders(tmp_path / "a", tmp_path / "b")
    assert c.by_file == {"09_across_models.json": 1} and c.only_old == ["08_across_models.json"] and not c.renamed
