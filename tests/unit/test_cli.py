"""Parameters reach the notebooks with the right types, or the user is told what to type; the chapter
contract agrees with the book's table of contents."""

import pytest
import yaml

from identifiability import cli
from identifiability.base import paths
from identifiability.book import build
from identifiability.chapters import contract as chapters
from identifiability.chapters import parameters
from identifiability.chapters.contract import by_name
from identifiability.models import keys

NB = paths.source_root() / "notebooks" / f"{by_name('model_and_data').stem}.md"


def test_declared_parameters_read_from_the_parameters_cell():
    p = parameters.declared_parameters(NB)
    assert p["n_sentences"] == 300 and p["corpus"] == "lee" and p["seed"] == 0


def test_values_are_converted_to_the_declared_type():
    p = chapters.coerce_parameters(NB, {"n_sentences": "25", "seed": 3.0, "not_declared_here": 1}, strict=False)
    assert p == {"n_sentences": 25, "seed": 3}


def test_an_unknown_parameter_names_the_closest_declared_one():
    with pytest.raises(parameters.ParameterError, match="no parameter 'n_sentence' .*did you mean 'n_sentences'"):
        chapters.coerce_parameters(NB, {"n_sentence": "25"})


def test_a_parameter_no_chapter_declares_stops_the_book_before_anything_runs(capsys, tmp_path):
    assert cli.main(["book", "-p", "n_sentnces=5", "--only", by_name("model_and_data").stem]) == 2
    assert "did you mean 'n_sentences'" in capsys.readouterr().err
    assert cli.main(["run", str(NB), "-p", "lyer=3", "--out", str(tmp_path)]) == 2
    assert "no parameter 'lyer'" in capsys.readouterr().err and not list(tmp_path.iterdir())
    # declared by one chapter of the book only: fine for the book (the others leave it out)
    chapters.check_parameters(chapters.chapter_sources(), {"layer": "3"})


def test_a_parameter_not_set_by_default_takes_its_contract_type():
    ch2 = chapters.CHAPTERS[by_name("nonidentifiability").stem].source
    assert parameters.declared_parameters(ch2)["layer"] is None  # not set: the chapter picks the middle layer
    assert chapters.coerce_parameters(ch2, {"layer": "3"}) == {"layer": 3}
    assert chapters.coerce_parameters(ch2, {"layer": "none"}) == {"layer": None}
    with pytest.raises(parameters.ParameterError, match=f"'layer' of {by_name('nonidentifiability').stem} must be int"):
        chapters.coerce_parameters(ch2, {"layer": "top"})


@pytest.mark.parametrize("name,value", [("n_sentences", "many"), ("seed", 1.5), ("max_tokens", "12x")])
def test_wrong_type_is_a_one_line_error(name, value):
    with pytest.raises(parameters.ParameterError, match=f"parameter '{name}' .* must be int") as e:
        chapters.coerce_parameters(NB, {name: value})
    assert "\n" not in str(e.value)


def test_command_line_reports_bad_parameter_and_exits_2(capsys):
    assert cli.main(["run", str(NB), "-p", "n_sentences=lots", "--out", "/tmp/unused"]) == 2
    assert "must be int" in capsys.readouterr().err


def test_malformed_parameter_pair():
    with pytest.raises(parameters.ParameterError, match="name=value"):
        cli.parse_params(["n_sentences"])


def test_every_chapter_in_the_toc_has_a_source_and_declares_the_common_parameters():
    sources = chapters.chapter_sources()
    assert [s.stem for s in sources][:1] == [by_name("model_and_data").stem]
    assert len(sources) == 10 and all(s.is_file() for s in sources)
    for s in sources:
        declared = parameters.declared_parameters(s)
        # chapter 9 reads the results table, not sentences, and chapter 7 cuts texts of fixed lengths for each
        # model of the family (n_sources): neither has a sample size or length limit of the book's model
        common = ("model", "corpus", "seed", "device", "results_dir")
        per_model = (
            ("n_sentences", "max_tokens")
            if s.stem not in (by_name("head_width").stem, by_name("across_models").stem)
            else ()
        )
        for name in common + per_model:
            assert name in declared, f"{s.name} lacks parameter {name}"


def test_the_contract_lists_the_chapters_of_the_table_of_contents_in_its_order():
    toc = yaml.safe_load((paths.source_root() / "_toc.yml").read_text())
    files = [ch.get("file", "") for part in toc.get("parts", [toc]) for ch in part.get("chapters", [])]
    assert [f.removeprefix("notebooks/") for f in files if f.startswith("notebooks/")] == list(chapters.CHAPTERS)


def test_each_chapters_quick_parameters_are_declared_by_it_with_their_types():
    for spec in chapters.CHAPTERS.values():
        assert chapters.coerce_parameters(spec.source, spec.quick) == spec.quick, spec.stem  # strict: names its own


def test_each_model_gets_its_own_build_folder():
    assert keys.target(None, "lee").build_dir == paths.source_root() / "_build"
    assert keys.target("bert-base-uncased", "lee").build_dir != keys.target("roberta-base", "lee").build_dir
    assert keys.target("bert-base-uncased", "lee").build_dir != keys.target("bert-base-uncased", "polarity").build_dir


def test_two_models_results_do_not_collide(tmp_path, tiny_model_folder, monkeypatch):
    from identifiability.book import notebook

    monkeypatch.setenv("IDENTIFIABILITY_DATA", str(tmp_path / "data"))
    dirs = []
    for seed in (0, 1):
        path = tiny_model_folder(seed, f"model{seed}")
        ch = notebook.setup(by_name("model_and_data").stem, model=str(path), corpus="polarity")
        ch.record(corpus_sentences=seed)
        dirs.append(ch.save())
    assert dirs[0] != dirs[1] and dirs[0].parent.parent.name.startswith("model0-")  # name + content key
    assert dirs[0].is_relative_to(tmp_path / "data" / "results")
    assert notebook.load_results(dirs[1].parent, by_name("model_and_data").stem)["results"]["corpus_sentences"] == 1


def test_the_chapter_header_fits_a_pages_output_box(tmp_path, tiny_model_folder, monkeypatch):
    """What every chapter prints first (Chapter.describe) stays within 72 columns, the width of a page's output
    box at 1280 px, and a wrapped row keeps the column of its values."""
    from identifiability.book import notebook

    monkeypatch.setenv("IDENTIFIABILITY_DATA", str(tmp_path / "data"))
    path = tiny_model_folder()
    lengths = "8,16,24,dv-1,dv,dv+1,dv+2,dv+4,48,64,96,128,256,512"
    ch = notebook.setup(
        by_name("nonidentifiability").stem, model=str(path), corpus="polarity", lengths=lengths, steps=30, layer=None
    )
    lines = ch.describe().splitlines()
    assert all(len(line) <= 72 for line in lines if " " in line.strip()), lines
    assert all(line[:12].strip() == "" or line[10:12] == "  " for line in lines), lines
    text = " ".join(line[12:] for line in lines)
    assert f"lengths={lengths!r}" in text and "steps=30" in text
    assert "layer not set" in text and "None" not in text  # no raw None on the page


def test_launch_buttons_only_with_a_public_repository(tmp_path):
    build.stage_config(tmp_path, None)
    plain = yaml.safe_load((tmp_path / "_config.yml").read_text())
    assert "binderhub_url" not in plain.get("launch_buttons", {}) and "repository" not in plain
    url = build.repository_url("https://github.com/someone/identifiability-book.git")
    assert url == "https://github.com/someone/identifiability-book"
    build.stage_config(tmp_path, url, "dev")
    cfg = yaml.safe_load((tmp_path / "_config.yml").read_text())
    assert cfg["repository"] == {"url": url, "branch": "dev", "path_to_book": ""}
    assert cfg["launch_buttons"]["binderhub_url"] == build.BINDERHUB
    assert cfg["sphinx"]["config"]["mathjax_path"] == plain["sphinx"]["config"]["mathjax_path"]  # the rest kept


@pytest.mark.parametrize("bad", ["git@github.com:someone/book.git", "/srv/git/book", "https://example.org/a/b"])
def test_a_repository_binder_cannot_build_is_a_clear_error(bad, capsys):
    with pytest.raises(parameters.ParameterError, match="https://github.com/<owner>/<repo>"):
        build.repository_url(bad)
    assert cli.main(["book", "--repository", bad, "--only", by_name("model_and_data").stem]) == 2
    assert "Binder" in capsys.readouterr().err


def test_binder_environment_makes_the_notebooks_the_buttons_open():
    post = (paths.source_root() / ".binder" / "postBuild").read_text()
    assert "--no-deps -r requirements.txt" in post and "jupytext --to ipynb notebooks/*.md" in post
    assert "download.pytorch.org/whl/cpu" in post  # PyPI's torch is the multi-GB CUDA build
    assert (paths.source_root() / ".binder" / "runtime.txt").read_text().strip() == "python-3.11"


def test_a_comment_with_an_equals_sign_does_not_hide_a_parameter(tmp_path):
    src = tmp_path / "nb.md"
    src.write_text(
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "kernelspec:\n  name: python3\n"
        "  display_name: Python 3\n---\n\n```{code-cell} ipython3\n:tags: [parameters]\n\n"
        "n_sentences = 40  # sentences (n = 40 takes a minute)\nexact_all: bool = False\n"
        "model = None\n```\n"
    )
    assert parameters.declared_parameters(src) == {"n_sentences": 40, "exact_all": False, "model": None}
    assert chapters.coerce_parameters(src, {"n_sentences": "7"}) == {"n_sentences": 7}


def test_a_chapter_is_parsed_once_per_version_of_its_file(tmp_path, monkeypatch):
    import jupytext

    src, reads, read = tmp_path / "nb.md", [], jupytext.read
    monkeypatch.setattr(jupytext, "read", lambda *a, **k: reads.append(1) or read(*a, **k))
    cell = "```{{code-cell}} ipython3\n:tags: [parameters]\n\nn_sentences = {}\n```\n"
    src.write_text(cell.format(40))
    first = parameters.declared_parameters(src)
    first["n_sentences"] = 1  # the caller's copy: the next caller still gets the file's value
    assert parameters.declared_parameters(src) == {"n_sentences": 40} and len(reads) == 1
    src.write_text(cell.format(400))  # a reader edits the chapter: the new default counts at once
    assert parameters.declared_parameters(src) == {"n_sentences": 400} and len(reads) == 2
    with pytest.raises(FileNotFoundError):
        parameters.declared_parameters(tmp_path / "missing.md")


@pytest.mark.parametrize(
    "error",
    [
        "chapters.parameters.ParameterError",
        "chapters.preflight.PreflightError",
        "models.fingerprint.ModelNotAvailable",
        "models.adapters.UnsupportedArchitecture",
        "corpus.corpora.CorpusError",
        "base.errors.SweepError",
        "corpus.tasks.FinetuneError",
    ],
)
def test_every_user_error_is_one_line_and_exit_code_2(error, monkeypatch, capsys):
    import importlib

    module, name = error.rsplit(".", 1)
    kind = getattr(importlib.import_module(f"identifiability.{module}"), name)

    def fail(a):
        raise kind("what to pass instead\nand a second line nobody needs")

    monkeypatch.setitem(cli.COMMANDS, "compare", fail)
    assert cli.main(["compare", "old", "new"]) == 2
    assert capsys.readouterr().err == "error: what to pass instead\n"


def test_the_lock_leaves_out_the_grammar_that_slows_every_kernels_start():
    """jsonschema imports rfc3987-syntax, where installed, whenever altair loads, and it builds a grammar with
    lark at import (0.8 s per kernel and worker, measured); nothing here needs its "iri" format check."""
    lock = (paths.source_root() / "requirements.txt").read_text().splitlines()
    pinned = {line.split("==")[0].lower() for line in lock if line and not line.startswith("#")}
    assert not pinned & {"rfc3987-syntax", "lark"}
    assert "jsonschema" in pinned and "altair" in pinned
