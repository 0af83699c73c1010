"""The record every benchmark leaves (``benchmarks/records.py``): its fields and their types, each ratio
against the baseline it names, the refusals, and the record of a benchmark that does not apply."""

import importlib.util
import json
import sys

import pytest

from identifiability.base import paths

ROOT = paths.source_root()
_spec = importlib.util.spec_from_file_location("records", ROOT / "benchmarks" / "records.py")
records = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(records)


def _read(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _check_header(doc: dict, script: str) -> None:
    assert doc["script"] == script
    sha, dirty = doc["commit"]["sha"], doc["commit"]["dirty"]
    assert (sha is None and dirty is None) or (len(sha) == 40 and isinstance(dirty, bool))
    assert doc["date"].endswith("+00:00")  # UTC
    m = doc["machine"]
    assert isinstance(m["logical_cores"], int) and m["logical_cores"] >= 1
    assert m["cpu"] is None or isinstance(m["cpu"], str)
    assert m["python"].count(".") == 2
    if "torch" in sys.modules:
        assert isinstance(m["torch"], str) and isinstance(m["torch_threads"], int)
    assert len(m["load_average_1min"]) == 2
    assert isinstance(doc["command"], str) and doc["command"]


def test_a_record_holds_the_run_and_each_ratio_against_its_named_baseline(tmp_path):
    rec = records.Record("benchmarks/bench_demo.py", settings={"repeats": 1, "html": tmp_path})
    rec.figure("forward", 2.0, "s")
    assert rec.figure("batched", 0.5, "s", baseline="forward") == 0.25
    rec.figure("matmul", 40.0, "GFLOP/s")
    path = rec.write(tmp_path)
    assert path == tmp_path / "bench_demo.json"
    doc = _read(path)
    _check_header(doc, "bench_demo")
    assert doc["applies"] is True and doc["settings"] == {"repeats": 1, "html": str(tmp_path)}
    assert doc["figures"] == [
        {"name": "forward", "value": 2.0, "unit": "s", "baseline": None, "ratio": None},
        {"name": "batched", "value": 0.5, "unit": "s", "baseline": "forward", "ratio": 0.25},
        {"name": "matmul", "value": 40.0, "unit": "GFLOP/s", "baseline": None, "ratio": None},
    ]


def test_a_new_run_replaces_the_scripts_record(tmp_path):
    for value in (1.0, 3.0):
        rec = records.Record("bench_demo.py")
        rec.figure("step", value, "s")
        rec.write(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["bench_demo.json"]
    assert _read(tmp_path / "bench_demo.json")["figures"][0]["value"] == 3.0


@pytest.mark.parametrize(
    "baseline, unit, value, says",
    [
        ("eager", "s", 1.0, "which this run has not recorded: record the baseline first"),
        ("zero", "s", 1.0, "is 0, so there is no ratio"),
        ("rate", "s", 1.0, "its baseline 'rate' in 'GFLOP/s'"),
        (None, "s", float("nan"), "record a finite number"),
        (None, "s", 1.0, "recorded twice"),
    ],
)
def test_a_figure_without_a_usable_baseline_is_refused_in_one_line(tmp_path, baseline, unit, value, says):
    rec = records.Record("bench_demo.py")
    rec.figure("zero", 0.0, "s")
    rec.figure("rate", 9.0, "GFLOP/s")
    name = "zero" if says == "recorded twice" else "fused"
    with pytest.raises(ValueError) as e:
        rec.figure(name, value, unit, baseline=baseline)
    assert says in str(e.value) and "\n" not in str(e.value)
    assert [f["name"] for f in rec.figures] == ["zero", "rate"]  # nothing half-added


def test_a_benchmark_that_does_not_apply_records_why(tmp_path, capsys):
    path = records.not_applicable("/x/benchmarks/bench_gpu.py", "no CUDA device here", results=tmp_path)
    doc = _read(path)
    _check_header(doc, "bench_gpu")
    assert doc["applies"] is False and doc["reason"] == "no CUDA device here" and doc["figures"] == []
    assert "does not apply here: no CUDA device here" in capsys.readouterr().out
    with pytest.raises(ValueError, match="must say why"):
        records.not_applicable("bench_gpu.py", " ", results=tmp_path)


def test_only_a_bench_script_has_a_record():
    with pytest.raises(ValueError, match="pass the script's __file__"):
        records.Record("records.py")


def test_every_benchmark_script_writes_its_record():
    """`make bench` leaves one record per script: each one builds a Record or says it does not apply."""
    scripts = sorted((ROOT / "benchmarks").glob("bench_*.py"))
    assert len(scripts) >= 8
    silent = [p.name for p in scripts if "Record(__file__" not in p.read_text(encoding="utf-8")]
    assert not silent, f"{silent} write no record (benchmarks/records.py)"


def _bench_commands():
    spec = importlib.util.spec_from_file_location("bench_commands", ROOT / "benchmarks" / "bench_commands.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("records", records)  # the script imports its helper by name, as when run
    spec.loader.exec_module(module)
    return module


def test_the_readmes_figures_are_the_commands_record():
    """The README's times, memory and disk are generated from the committed record, never typed: its block is
    what the record renders (or says there is no record)."""
    bench = _bench_commands()
    doc = _read(bench.RECORD) if bench.RECORD.exists() else None
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split(bench.BEGIN, 1)[1].split(bench.END, 1)[0]
    assert block.strip() == bench.readme_block(doc), "rerun: python benchmarks/bench_commands.py --readme"


def test_the_readme_block_renders_a_record_and_refuses_a_readme_without_markers(tmp_path):
    bench = _bench_commands()
    doc = {
        "figures": [
            {"name": "make test", "value": 420.0},
            {"name": "pytest", "value": 360.0},
            {"name": "make test: peak memory of one process", "value": 2.5},
        ],
        "details": {
            "matmul_gflops": {"1 thread": 110.0, "all threads": 200.0},
            "make test: disk after (GiB)": {".venv": 2.0, "_build": 0.3},
        },
        "machine": {"cpu": "a CPU", "logical_cores": 2},
        "commit": {"sha": "abcdef1234"},
        "date": "2026-12-07T10:00:00+00:00",
    }
    block = bench.readme_block(doc)
    assert "| 7.0 min | – |" in block and "| 6.0 min |" in block and "2.5 GiB" in block and "2.3 GiB" in block
    assert "a CPU, 2 cores" in block and "abcdef1" in block and "110.0 GFLOP/s" in block
    readme = tmp_path / "README.md"
    readme.write_text(f"a\n{bench.BEGIN}\nold\n{bench.END}\nb\n")
    bench.write_readme(doc, readme)
    assert readme.read_text() == f"a\n{bench.BEGIN}\n{block}\n{bench.END}\nb\n"
    readme.write_text("no markers\n")
    with pytest.raises(SystemExit, match="markers"):
        bench.write_readme(doc, readme)
