"""The results comparison: equal numbers pass, changed ones are listed, timings and paths are skipped."""

import json

from identifiability import cli
from identifiability.compare import compare_folders


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
