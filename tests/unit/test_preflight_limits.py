"""Every chapter parameter and every place a command writes, checked before anything runs: chapter 7's ratios
and members, chapter 10's sample, measures and sentence count (above what the corpus holds: refused with
the most it holds, as ``hta`` does), ``--out`` and ``results_dir`` that take no file. Each case is one line,
exit 2, no kernel started and nothing written (the shape of tests/unit/test_bad_input.py)."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest

from identifiability import cli
from identifiability.base import paths
from identifiability.base.fileio import write_json
from identifiability.chapters.contract import by_name

from .failing_disk import refuse_new_files

HEAD_WIDTH = by_name("head_width").stem
MEASURES = by_name("measures").stem
MODEL_AND_DATA = by_name("model_and_data").stem

NB = paths.source_root() / "notebooks"


@pytest.fixture(autouse=True)
def data_folder(tmp_path, monkeypatch):
    """Every test writes into its own data folder, and no chapter ever starts."""
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "data"))
    monkeypatch.setattr(cli, "run_notebook", lambda *a, **k: pytest.fail("a chapter started"))
    return tmp_path / "data"


def _files(*roots: Path) -> dict[Path, bytes]:
    return {f: f.read_bytes() for root in roots if root.exists() for f in sorted(root.rglob("*")) if f.is_file()}


def _refused(args: list[str], message: str, capsys, *watched: Path) -> str:
    """``identifiability ARGS`` exits 2 with one line matching ``message`` and writes no file under ``watched``."""
    before = _files(*watched)
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert re.search(message, err), err
    assert _files(*watched) == before
    return err


def _text(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "text.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _file(path: Path) -> Path:
    path.write_text("not a folder", encoding="utf-8")
    return path


def _member(folder: Path, kind: str | None) -> Path:
    """A folder with a provenance.json of ``kind`` (None: no provenance.json)."""
    folder.mkdir(parents=True)
    if kind is not None:
        write_json(folder / "provenance.json", {"kind": kind})
    return folder


# -- chapter 7: ratios and members -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,message",
    [
        ("inf", r"ratios='inf' needs finite numbers"),
        ("1,nan", r"ratios='1,nan' needs finite numbers"),
        ("1000", r"ratios=1000 gives some member no input: .* pass at least one ratio from 0\.1875 to 4\b"),
        ("0.01,0.02", r"ratios=0\.01,0\.02 gives some member no input"),
        ("8,16", r"ratios=8,16 gives some member no input"),  # the widest head (d_v 64) reads 256 positions at most
    ],
)
def test_chapter_7_ratios_that_give_a_member_no_input_are_refused(value, message, tmp_path, data_folder, capsys):
    _refused(["run", str(NB / f"{HEAD_WIDTH}.md"), "-p", f"ratios={value}"], message, capsys, tmp_path)


def test_chapter_7_ratios_with_one_that_every_member_reads_pass():
    from identifiability.chapters.contract import ratios_fit

    assert ratios_fit({"ratios": "0.5,1,1.125,1.25,1.5,2,3,4"}, None) is None  # the chapter's default
    assert ratios_fit({"ratios": "1,16"}, None) is None  # 16 reaches the narrowest head's positions only


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda t: t / "nonexistent", r"members: .*nonexistent does not exist: pass folders identifiability pretrain"),
        (lambda t: _member(t / "plain", None), r"members: .*plain is not a member of the family"),
        (lambda t: _member(t / "tuned", "fine-tuned"), r"members: .*tuned is not a member of the family"),
        (lambda t: _file(t / "a file"), r"members: .*a file is not a folder"),
    ],
    ids=["missing", "no provenance", "another kind", "a file"],
)
def test_chapter_7_members_must_be_folders_of_the_family(make, message, tmp_path, data_folder, capsys):
    folder = make(tmp_path)
    _refused(["run", str(NB / f"{HEAD_WIDTH}.md"), "-p", f"members={folder}"], message, capsys, data_folder)


def test_chapter_7_members_and_their_twins_pass(tmp_path):
    from identifiability.chapters.contract import family_members

    a = _member(tmp_path / "mlm", "pretrained-mlm")
    b = _member(tmp_path / "mlm-init", "random-init twin")
    assert family_members({"members": f"{a}, {b}"}, None) is None
    assert family_members({"members": ""}, None) is None  # the family in data/models


# -- chapter 10: sample, measures, and sentences above what the corpus holds --------------------------------


@pytest.mark.parametrize(
    "param,message",
    [
        (
            "sample=foo",
            rf"{MEASURES}: sample='foo' must be one of short, proportional; pass e\.g\. -p sample=short",
        ),
        (
            "measures=foo",
            rf"{MEASURES}: measures='foo' names unknown measure\(s\) foo: choose from .*alti",
        ),
        ("measures=alti,bar", r"unknown measure\(s\) bar"),
    ],
)
def test_chapter_10_choices_are_checked_before_the_kernel(param, message, tmp_path, data_folder, capsys):
    _refused(["run", str(NB / f"{MEASURES}.md"), "-p", param], message, capsys, tmp_path)


def test_chapter_10_n_sentences_above_the_corpus_is_refused_naming_the_most(tmp_path, capsys):
    # 4, 8 and 9 tokens with [CLS] and [SEP]: two of 6 to 16
    text = _text(tmp_path, ["Yes.", "Another line of text here.", "Yet another line of text here."])
    args = ["run", str(NB / f"{MEASURES}.md"), "--corpus", str(text), "-p", "n_sentences=5"]
    _refused(
        args,
        rf"^error: {MEASURES}: n_sentences=5 is more than the 2 sentences of corpus 'text\.txt' with 6 to 16 tokens: "
        r"pass -p n_sentences=2 or fewer$",
        capsys,
        tmp_path,
    )
    _refused([*args[:-1], "max_tokens=7"], r"no sentence of corpus 'text\.txt' has 6 to 7 tokens", capsys, tmp_path)


@pytest.mark.parametrize(
    "name,param,most",
    [
        ("model_and_data", "n_sentences", 4),
        ("nonidentifiability", "n_sentences", 4),
        ("effective_attention", "n_sentences", 4),
        ("token_identity", "n_sentences", 4),
        ("token_identity", "second_n_sentences", 2),
        ("angle_magnitude", "n_sentences", 4),
        ("context_mixing", "n_sentences", 4),
        ("context_mixing", "n_exact", 4),
        ("context_mixing", "n_second", 2),
    ],
)
def test_chapter_sentence_counts_above_the_corpus_are_refused_naming_the_most(name, param, most, tmp_path, capsys):
    """A count asked for above the lines of the corpus it samples would be computed as fewer (after a long wait
    at -p n_sentences=100000): refused in one line that names how many there are, as hta's --n."""
    long = " ".join(["word"] * 40)  # chapter 3 samples sentences longer than d_v
    text = _text(tmp_path, ["A short line.", "Another line of text here.", "Yet another line of text here.", long])
    second = tmp_path / "second.txt"
    second.write_text("One more line of text.\nAnd the last line of text.\n", encoding="utf-8")
    stem = by_name(name).stem
    args = ["run", str(NB / f"{stem}.md"), "--corpus", str(text), "-p", f"{param}=100000"]
    if param in ("second_n_sentences", "n_second"):
        args += ["-p", f"second_corpus={second}"]
    corpus = "second" if param in ("second_n_sentences", "n_second") else "text"
    _refused(
        args,
        rf"^error: {stem}: {param}=100000 is more than the {most} sentences of corpus '{corpus}\.txt' in all: "
        rf"pass -p {param}={most} or fewer$",
        capsys,
        tmp_path,
    )


def test_a_chapter_default_sentence_count_is_its_up_to_on_a_short_corpus(tmp_path, monkeypatch, capsys):
    """The book's defaults (chapter 1's 300 sentences) take what a short text holds: not refused."""
    ran = []
    monkeypatch.setattr(cli, "run_notebook", lambda *a, **k: ran.append(a) or "ran")
    text = _text(tmp_path, ["A short line.", "Another line of text here.", "Yet another line of text here."])
    assert cli.main(["run", str(NB / f"{MODEL_AND_DATA}.md"), "--corpus", str(text)]) == 0, capsys.readouterr().err
    assert len(ran) == 1


def test_record_measures_n_above_the_corpus_is_refused_before_its_exact_hta(tmp_path, monkeypatch, capsys):
    from identifiability.recorded import measures as record_measures

    monkeypatch.setattr(record_measures, "record_measures", lambda *a, **k: pytest.fail("record-measures started"))
    text = _text(tmp_path, ["A short line.", "Another line of text here.", "Yet another line of text here."])
    _refused(
        ["record-measures", "--corpus", str(text), "--n", "100000"],
        r"^error: record-measures: --n 100000 is more than the \d sentences of corpus 'text\.txt' that C10's "
        r"proportional sample draws from \(at most \d tokens\): pass --n \d or fewer$",
        capsys,
        tmp_path,
    )


@pytest.mark.parametrize("job", ["record-confirm", "record-measures"])
@pytest.mark.parametrize(
    "option,message",
    [
        ("--model", r"^error: cannot load model 'nosuch': not a local folder"),
        ("--corpus", r"^error: unknown corpus 'nosuch': use one of lee"),
    ],
)
def test_no_run_with_an_unknown_model_or_corpus_names_it(job, option, message, tmp_path, monkeypatch, capsys):
    """--no-run records results already there: with none there, a typo in a name is the line, not "no results"."""
    from identifiability.recorded import confirm, measures

    for module, name in ((confirm, "record_confirm"), (measures, "record_measures")):
        monkeypatch.setattr(module, name, lambda *a, **k: pytest.fail(f"{job} started"))
    _refused([job, "--no-run", option, "nosuch"], message, capsys, tmp_path)


# -- where a run writes: --out and results_dir ------------------------------------------------------------


def test_out_on_a_file_or_a_read_only_place_is_one_line_before_any_chapter(tmp_path, monkeypatch, capsys):
    a_file = tmp_path / "a file"
    a_file.write_text("not a folder")
    chapter = str(NB / f"{MODEL_AND_DATA}.md")
    _refused(
        ["run", chapter, "--out", str(a_file)], r"^error: --out .*a file is a file, not a folder: pass --out", capsys
    )
    _refused(
        ["run", chapter, "--out", str(a_file / "run")], r"--out .*a file/run cannot be written \(Not a dir", capsys
    )
    refuse_new_files(monkeypatch, tmp_path / "ro", errno.EROFS)
    _refused(
        ["run", chapter, "--out", str(tmp_path / "ro")],
        r"^error: --out .*ro cannot be written \(Read-only file system\): make it writable, or pass --out a folder",
        capsys,
    )


@pytest.mark.parametrize("code,fix", [(errno.EROFS, "make it writable"), (errno.ENOSPC, "free space there")])
def test_a_results_dir_that_takes_no_file_is_one_line_before_any_chapter(code, fix, tmp_path, monkeypatch, capsys):
    refuse_new_files(monkeypatch, tmp_path / "results", code)
    _refused(
        ["run", str(NB / f"{MODEL_AND_DATA}.md"), "-p", f"results_dir={tmp_path / 'results'}"],
        rf"^error: {MODEL_AND_DATA}: results_dir .*results cannot be written \({os.strerror(code)}\): {fix}, or "
        r"pass -p results_dir= for the data folder's$",
        capsys,
    )
