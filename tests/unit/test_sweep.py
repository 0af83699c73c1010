"""The sweep's plan, keys and bad input, and the results table, without a cluster (the runs on a real
LocalCluster are in tests/book/test_sweep.py)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from identifiability.base import cluster, paths
from identifiability.base.errors import SweepError
from identifiability.base.fileio import write_json
from identifiability.chapters.parameters import ParameterError
from identifiability.cli import main
from identifiability.runs import aggregate, corpus_hta, sweep


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "data"))
    return tmp_path / "data"


def _run(**changes) -> sweep.Run:
    base = dict(
        model="m",
        model_key="m-1",
        content_key="abc",
        corpus="lee",
        corpus_key="lee",
        chapter="03_effective_attention",
        seed=0,
        params={"n_sentences": 4},
        source_hash="s",
    )
    return sweep.Run(**{**base, **changes})


def test_run_key_is_the_content_not_the_name():
    r = _run()
    assert _run(model="another/name", model_key="x").key == r.key  # same weights under another name
    for change in (
        {"content_key": "abd"},
        {"seed": 1},
        {"params": {"n_sentences": 5}},
        {"source_hash": "t"},
        {"corpus_key": "lee:0123"},
        {"chapter": "06_context_mixing"},
    ):
        assert _run(**change).key != r.key, change


def test_the_longest_runs_start_first(tmp_path):
    """Hints first (chapter 6 before the others); then what finished runs of the chapter on the corpus took."""
    runs = [
        _run(chapter="03_effective_attention"),
        _run(chapter="06_context_mixing"),
        _run(chapter="04_token_identity"),
        _run(chapter="03_effective_attention", corpus="lee_pairs", corpus_key="lee_pairs"),
        _run(chapter="06_context_mixing", corpus="lee_pairs", corpus_key="lee_pairs"),
    ]
    label = [(r.chapter[:2], r.corpus) for r in sweep.longest_first(runs, tmp_path / "none")]
    assert label == [("06", "lee"), ("06", "lee_pairs"), ("03", "lee"), ("04", "lee"), ("03", "lee_pairs")]
    for i, (chapter, corpus, seconds) in enumerate(
        [
            ("06_context_mixing", "lee", 170.0),
            ("06_context_mixing", "lee_pairs", 320.0),
            ("04_token_identity", "lee", 900.0),
        ]
    ):
        write_json(tmp_path / f"r{i}" / sweep.RUN_FILE, {"chapter": chapter, "corpus": corpus, "seconds": seconds})
    label = [(r.chapter[:2], r.corpus) for r in sweep.longest_first(runs, tmp_path)]
    assert label == [("04", "lee"), ("06", "lee_pairs"), ("06", "lee"), ("03", "lee"), ("03", "lee_pairs")]


def test_chapters_by_stem_or_number_and_unknown_ones_named():
    assert [s.stem for s in sweep.resolve_chapters(["03", "06_context_mixing"])] == [
        "03_effective_attention",
        "06_context_mixing",
    ]
    default = [s.stem for s in sweep.resolve_chapters(None)]
    assert "03_effective_attention" in default and not {"08_explore", "09_across_models"} & set(default)
    with pytest.raises(ParameterError, match="did you mean '03_effective_attention'"):
        sweep.resolve_chapters(["03_effective_atention"])


def test_a_model_that_cannot_load_is_reported_and_the_others_planned(data, tmp_path, tiny_model_folder):
    good = tiny_model_folder(0, "tiny")
    bad = tmp_path / "no-weights"
    bad.mkdir()
    (bad / "config.json").write_text((good / "config.json").read_text())
    runs, problems = sweep.plan([str(good), str(bad)], ["lee"], [0, 1], ["03"], {"n_sentences": 4})
    assert len(runs) == 2 and {r.seed for r in runs} == {0, 1}
    assert runs[0].params == {"n_sentences": 4} and runs[0].content_key
    assert len(problems) == 1 and str(bad) in problems[0][0] and "\n" not in problems[0][1]


def test_a_parameter_for_one_chapter_overrides_the_shared_one(data, tmp_path, tiny_model_folder):
    folder = tiny_model_folder(0, "tiny")
    params = {"n_sentences": "40", "06:n_sentences": "12", "06_context_mixing:n_exact": "2"}
    runs, problems = sweep.plan([str(folder)], ["lee"], [0], ["03", "04", "06"], params)
    assert not problems
    own = {r.chapter: r.params for r in runs}
    assert own["03_effective_attention"]["n_sentences"] == 40 and own["04_token_identity"]["n_sentences"] == 40
    assert own["06_context_mixing"]["n_sentences"] == 12 and own["06_context_mixing"]["n_exact"] == 2
    assert "n_exact" not in own["03_effective_attention"]


def test_the_checks_read_a_chapters_own_parameters(data, tiny_model_folder):
    """A value given to one chapter is the one its checks see (make family's 03:viewer_max_tokens=72 was once
    checked as the default 48, and the d_v = 64 member's chapters were all left out)."""
    folder = str(tiny_model_folder(0, "tiny"))
    _, problems = sweep.plan([folder], ["lee"], [0], ["03", "04"], {"03:viewer_max_tokens": "3"})
    assert len(problems) == 1 and "viewer_max_tokens=3 is too small" in problems[0][1]
    _, problems = sweep.plan(
        [folder], ["lee"], [0], ["03", "04"], {"viewer_max_tokens": "3", "03:viewer_max_tokens": "64"}
    )
    assert not problems


@pytest.mark.parametrize(
    "args, message",
    [
        (["--chapters", "99"], "no chapter '99'"),
        (["--seeds", "0,x"], "--seeds must be whole numbers"),
        (["-p", "seed=3"], "the seed is a sweep dimension"),
        (["-p", "n_sentence=3"], "did you mean 'n_sentences'"),
        (["-p", "03:n_exact=3"], "n_exact"),  # chapter 6's parameter scoped to chapter 3
        (["-p", "06:n_sentences=3"], "chapter 06_context_mixing is not in this sweep's chapters"),
        (["-p", "03:seed=3"], "the seed is a sweep dimension"),
        (["--scheduler", "tcp://127.0.0.1:9"], "cannot reach the Dask scheduler at tcp://127.0.0.1:9"),
    ],
)
def test_bad_sweep_input_gets_one_line(args, message, data, capsys):
    assert main(["sweep", "--chapters", "03", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (data / "sweeps").exists()  # nothing was run or written


def _doc(seed: int, estimate: float, verdict: str) -> dict:
    return {
        "chapter": "03_effective_attention",
        "params": {"model": "m", "corpus": "lee", "seed": seed, "n_sentences": 4, "results_dir": "x"},
        "provenance": {"key": "m-1", "content_key": "abc"},
        "results": {
            "claims": {
                "C4": {
                    "estimate": estimate,
                    "ci95": [estimate - 0.1, estimate + 0.1],
                    "baseline": 0.5,
                    "verdict": verdict,
                    "parts": [{"claim": "C4.part", "estimate": None, "ci95": None, "verdict": "holds", "parts": []}],
                }
            },
            "per_layer": [0.1, None, 0.3],
            "nested": {"a": 2, "flag": True, "name": "text"},
        },
    }


def test_rows_of_a_results_file():
    rows = pd.DataFrame(aggregate.rows_of(_doc(0, 0.7, "holds"), "sweep", "r"))
    claim = rows[rows.quantity == "C4"].iloc[0]
    assert (claim.kind, claim.verdict) == ("claim", "holds")
    assert [claim.value, claim.low, claim.high] == pytest.approx([0.7, 0.6, 0.8])
    assert rows[rows.quantity == "C4.part"].iloc[0].verdict == "holds"
    layer = rows[rows.quantity == "per_layer"]
    assert list(layer["index"]) == [0, 2] and list(layer.value) == [0.1, 0.3]  # None is missing, not 0
    assert list(rows[rows.quantity == "nested.a"].value) == [2.0]
    assert "nested.flag" not in set(rows.quantity)  # booleans and text are not numbers
    assert rows.params_key.nunique() == 1 and rows.model_key.iloc[0] == "m-1"


def test_table_reads_finished_runs_only_and_spread_over_seeds(data):
    root = data / "sweeps" / "m-1" / "lee" / "03_effective_attention"
    for seed, est, verdict in [(0, 0.7, "holds"), (1, 0.9, "holds"), (2, 0.2, "fails")]:
        run = root / f"seed{seed}-000"
        write_json(run / "03_effective_attention.json", _doc(seed, est, verdict))
        write_json(run / "run.json", {"chapter": "03_effective_attention"})
    write_json(root / "seed3-000" / "03_effective_attention.json", _doc(3, 5.0, "fails"))  # unfinished
    write_json(root / ".partial-seed4-000-1" / "03_effective_attention.json", _doc(4, 5.0, "fails"))
    write_json(root / ".partial-seed4-000-1" / "run.json", {"chapter": "03_effective_attention"})
    path = aggregate.write_table()
    table = aggregate.read_table(path)
    assert path == data / "results.parquet" and set(table.seed) == {0, 1, 2}
    spread = aggregate.seed_spread(table)
    c4 = spread[spread.quantity == "C4"].iloc[0]
    assert c4.seeds == 3 and c4["min"] == 0.2 and c4["max"] == 0.9
    assert c4["mean"] == pytest.approx(0.6) and c4.own_low == pytest.approx(0.5)
    assert c4.verdicts == "holds ×2, fails ×1"
    assert json.loads(json.dumps(table.columns.tolist())) == aggregate.COLUMNS


def test_the_table_reads_an_older_builds_results_under_the_chapters_stem_of_now(data):
    """A data folder from before the head-width chapter (07_head_width) holds the comparison across models as
    08_across_models.json (chapters.RENAMED): its rows are filed under 09_across_models. Where a newer build
    wrote 09_across_models.json beside it, only the newer file is read (no chapter twice)."""
    folder = data / "results" / "m" / "lee"
    write_json(folder / "08_across_models.json", {**_doc(0, 0.7, "holds"), "chapter": "08_across_models"})
    write_json(folder / "07_explore.json", {**_doc(0, 0.7, "holds"), "chapter": "07_explore"})
    table = aggregate.build_table(data)
    assert set(table.chapter) == {"09_across_models", "08_explore"}
    write_json(folder / "09_across_models.json", {**_doc(0, 0.2, "fails"), "chapter": "09_across_models"})
    table = aggregate.build_table(data)
    c4 = table[(table.chapter == "09_across_models") & (table.quantity == "C4")]
    assert list(c4.verdict) == ["fails"] and set(table.run) == {
        "results/m/lee/07_explore.json",
        "results/m/lee/09_across_models.json",
    }


def test_the_command_line_entry_point_gives_one_line(data):
    """`python -m identifiability.cli` runs cli.py as __main__: errors raised by the package's own cli module
    must still be caught there (they once came out as a traceback)."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "identifiability.cli", "sweep", "--chapters", "04", "-p", "n_exact=3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and out.stderr.strip().startswith("error: no parameter 'n_exact'")
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "page, shown",
    [(b"<p>Dask needs bokeh>=3.1.0 for the dashboard.</p><p>Install with pip: ...</p>", False), (b"<html>ok", True)],
)
def test_the_dashboard_address_is_printed_only_when_a_dashboard_answers(page, shown):
    import http.server
    import threading
    from types import SimpleNamespace

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        link = f"http://127.0.0.1:{server.server_port}/status"
        assert cluster.dashboard(SimpleNamespace(dashboard_link=link)) == (link if shown else None)
    finally:
        server.shutdown()
    assert cluster.dashboard(SimpleNamespace(dashboard_link="http://127.0.0.1:9/status")) is None  # nothing there


@pytest.mark.parametrize("kwargs", [{"n": 0}, {"max_tokens": 0}, {"group": 0}])
def test_hta_job_takes_0_as_a_value_and_refuses_it(kwargs):
    """0 is not "not given": the library refuses it before any sentence is read, as the command line does."""
    with pytest.raises(SweepError, match="must be at least 1, got 0"):
        corpus_hta.hta_job(paths.DEFAULT_MODEL, "lee", **kwargs, progress=False)


def _result(chapter: str = "03_effective_attention") -> dict:
    doc = {"chapter": chapter, "params": {"results_dir": "/on/the/worker/.partial-x"}, "results": {"claims": {}}}
    files = {f"{chapter}.json": json.dumps(doc).encode(), f"{chapter}.ipynb": b'{"cells": []}'}
    return {"files": files, "seconds": 1.5, "finished": "2026-01-01T00:00:00Z"}


def test_a_run_a_worker_sent_back_is_filed_whole_over_a_failed_attempt(tmp_path):
    """The client writes what a worker returned into its own folder: a failed attempt's notebook and attempts
    count go, the results file names the folder it lives in, and no private folder is left."""
    run, root = _run(), tmp_path / "sweeps"
    why = sweep.file_failure(
        run, root, sweep.RunFailed("03 stopped: boom (full traceback in /w/x.ipynb)", b"{}", "/w/x.ipynb"), 2
    )
    kept = run.folder(root) / "03_effective_attention.failed.ipynb"
    assert why == f"03 stopped: boom (full traceback in {kept})" and kept.read_bytes() == b"{}"
    assert json.loads((run.folder(root) / "attempts.json").read_text()) == {"attempts": 2}
    assert not sweep.is_finished(run, root)

    manifest = sweep.file_run(run, root, _result(), attempts=3)
    folder = run.folder(root)
    assert sorted(p.name for p in folder.iterdir()) == [
        "03_effective_attention.ipynb",
        "03_effective_attention.json",
        "run.json",
    ]
    assert json.loads((folder / "03_effective_attention.json").read_text())["params"]["results_dir"] == str(folder)
    assert manifest["attempts"] == 3 and manifest["key"] == run.key and sweep.is_finished(run, root)
    assert not list(root.rglob(".partial-*"))
    again = _result()
    again["files"]["03_effective_attention.ipynb"] = b"other"
    assert sweep.file_run(run, root, again, attempts=4) == manifest  # a finished run is never overwritten
    assert (folder / "03_effective_attention.ipynb").read_bytes() == b'{"cells": []}'


def test_cache_entries_a_worker_sent_back_are_written_and_kept_inside_the_cache(tmp_path):
    corpus_hta.file_entries({"hta/m/a.json": b"{}", "hta/m/a.safetensors": b"x"}, tmp_path)
    assert (tmp_path / "hta/m/a.safetensors").read_bytes() == b"x" and (tmp_path / "hta/m/a.json").is_file()
    for bad in ("../outside.safetensors", "/etc/outside"):
        with pytest.raises(ValueError, match="outside the cache folder"):
            corpus_hta.file_entries({bad: b"x"}, tmp_path / "cache")
    assert not (tmp_path / "outside.safetensors").exists()


class _Client:
    """A client of one worker that starts each run as :func:`sweep.execute` does, in a private folder beside
    the run's folder, and never finishes it."""

    cluster = None

    def __init__(self, root):
        self.root = root

    def nthreads(self) -> dict:
        return {"worker": 1}

    def submit(self, fn, run, *args, **kwargs) -> object:
        folder = run.folder(self.root)
        (folder.parent / f".partial-{folder.name}-0123abcd").mkdir(parents=True)
        return object()


class _Stopped:
    """``distributed.as_completed`` for a sweep stopped while it waits for its runs (``stop``)."""

    stop: type[BaseException] = KeyboardInterrupt

    def __init__(self):
        self.futures = []

    def count(self) -> int:
        return len(self.futures)

    def add(self, future) -> None:
        self.futures.append(future)

    def __iter__(self):
        raise self.stop()


@pytest.mark.parametrize(
    "stop,closing",
    [(KeyboardInterrupt, None), (RuntimeError, None), (KeyboardInterrupt, KeyboardInterrupt)],
    ids=["Ctrl-C", "an error", "a second Ctrl-C while the cluster closes"],
)
def test_a_stopped_sweep_removes_its_runs_private_folders(stop, closing, data, monkeypatch):
    import distributed

    root = paths.sweep_root()
    run = _run()

    def close(client, own: bool) -> None:
        if closing is not None:
            raise closing

    monkeypatch.setattr(sweep, "plan", lambda *a, **k: ([run], []))
    monkeypatch.setattr(cluster, "connect", lambda *a, **k: _Client(root))
    monkeypatch.setattr(cluster, "dashboard", lambda client: None)
    monkeypatch.setattr(cluster, "close", close)
    monkeypatch.setattr(distributed, "as_completed", type("Stopped", (_Stopped,), {"stop": stop}))
    with pytest.raises(stop):
        sweep.sweep(["m"], ["lee"], [0], ["03"], progress=False)
    assert (root / "m-1" / "lee" / "03_effective_attention").is_dir()  # the worker had begun the run
    assert not list(root.rglob(".partial-*"))


def test_a_refused_scheduler_address_is_found_without_the_clients_retries():
    """Dask's client retries a refused address for its whole timeout; cluster.refused answers at once, and
    only for a tcp address where nothing listens."""
    import socket

    from identifiability.base import cluster

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert not cluster.refused(f"tcp://127.0.0.1:{port}")
        assert not cluster.refused(f"127.0.0.1:{port}")  # Dask reads a bare host:port as tcp
    assert cluster.refused(f"tcp://127.0.0.1:{port}")  # closed now: nothing listens
    assert not cluster.refused(f"tls://127.0.0.1:{port}")  # another scheme: left to the client
    assert not cluster.refused("tcp://127.0.0.1:notaport")
