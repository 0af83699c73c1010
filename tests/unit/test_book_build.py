"""The book build's own steps (identifiability.chapters.executed, .book, .pages, .handout) on small made-up inputs: one
parameters cell with the values used, no stderr, charts stored once, each page's scripts, the generated
pages, and the student versions of the chapters."""

import json
import re

import nbformat
import pytest

from identifiability.base import paths
from identifiability.book import handout, pages
from identifiability.book import render as book
from identifiability.chapters import executed
from identifiability.chapters.contract import chapter_sources

PARAMS_CELL = """model = "all-MiniLM-L6-v2"  # Hugging Face id or local folder
n_sentences = 300  # sentences
lengths = (
    "8,16"  # a value over two lines
)
results_dir = ""  # empty: data/results/<model>/<corpus>
seed = 0
"""
INJECTED = """# Parameters
model = "/models/tiny"
n_sentences = 40
lengths = "8"
results_dir = "/tmp/somewhere/results"
extra = 1.5
"""


def _executed() -> dict:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(PARAMS_CELL, metadata={"tags": ["parameters"]})
    injected = nbformat.v4.new_code_cell(INJECTED, metadata={"tags": ["injected-parameters"], "papermill": {}})
    work = nbformat.v4.new_code_cell(
        "work()", metadata={"execution": {"iopub.status.idle": "t"}, "papermill": {"duration": 1.0}}
    )
    work.outputs = [
        nbformat.v4.new_output("stream", name="stderr", text="progress 10%|█\r"),
        nbformat.v4.new_output("stream", name="stdout", text="result 3\n"),
        nbformat.v4.new_output("display_data", data={"application/vnd.vegalite.v5+json": {"mark": "bar"}}),
    ]
    nb.cells = [nbformat.v4.new_markdown_cell("# A chapter"), params, injected, work]
    nb.metadata["papermill"] = {"input_path": {"cells": []}, "output_path": "/abs/x.ipynb", "duration": 12.5,
                                "parameters": {"model": "/models/tiny"}}  # fmt: skip
    return json.loads(nbformat.writes(nb))


def test_injected_parameters_are_merged_into_the_parameters_cell():
    nb = executed.clean_notebook(_executed())
    tags = [c["metadata"].get("tags", []) for c in nb["cells"]]
    assert ["injected-parameters"] not in tags and sum("parameters" in t for t in tags) == 1
    src = next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))["source"]
    assert 'model = "/models/tiny"  # Hugging Face id or local folder' in src  # the comment stays
    assert "n_sentences = 40  # sentences" in src and "extra = 1.5" in src
    assert 'results_dir = ""' in src  # where the build filed its results is not the reader's business
    ns = {}
    exec(src, ns)  # still valid Python, with the values used
    assert ns["n_sentences"] == 40 and ns["model"] == "/models/tiny" and ns["seed"] == 0 and ns["lengths"] == "8"


def test_cleaning_drops_stderr_and_papermills_bookkeeping_and_keeps_the_run_time():
    nb = executed.clean_notebook(_executed())
    work = nb["cells"][-1]
    assert [o.get("name") for o in work["outputs"]] == ["stdout", None]
    assert "papermill" not in work["metadata"] and "execution" not in work["metadata"]
    assert nb["metadata"]["papermill"] == {"parameters": {"model": "/models/tiny"}, "duration": 12.5}
    assert executed.run_seconds(nb) == 12.5
    assert executed.clean_notebook(json.loads(json.dumps(nb))) == nb  # idempotent


def test_a_notebook_without_an_injected_cell_is_left_as_it_is():
    nb = _executed()
    del nb["cells"][2]
    before = json.dumps(nb["cells"][1])
    executed.merge_parameters(nb)
    assert json.dumps(nb["cells"][1]) == before


def test_pages_get_the_chart_html_and_downloads_keep_the_spec_alone(tmp_path):
    notebooks, downloads = tmp_path / "nb", tmp_path / "downloads"
    notebooks.mkdir()
    (notebooks / "01_x.ipynb").write_text(json.dumps(executed.clean_notebook(_executed())))
    used = executed.parameters_used(notebooks / "01_x.ipynb")  # what the build page lists
    assert used == {
        "model": "/models/tiny",
        "n_sentences": 40,
        "lengths": "8",
        "results_dir": "",
        "seed": 0,
        "extra": 1.5,
    }
    assert executed.parameters_used(notebooks / "02_not_run.ipynb") is None
    book.prepare_pages(notebooks, downloads)
    page = json.loads((notebooks / "01_x.ipynb").read_text())
    data = page["cells"][-1]["outputs"][-1]["data"]
    assert 'class="vega-chart"' in data["text/html"] and '"mark": "bar"' in data["text/html"]
    download = json.loads((downloads / "01_x.ipynb").read_text())
    assert "text/html" not in download["cells"][-1]["outputs"][-1]["data"]
    html = tmp_path / "html"
    (html / "_sources" / "notebooks").mkdir(parents=True)
    (html / "_sources" / "notebooks" / "01_x.ipynb").write_text("page version")
    assert book.write_downloads(downloads, html) == [html / "_sources" / "notebooks" / "01_x.ipynb"]
    assert json.loads((html / "_sources" / "notebooks" / "01_x.ipynb").read_text()) == download


class _Js(str):
    def __new__(cls, filename, **attributes):
        obj = super().__new__(cls, filename or "")
        obj.filename, obj.attributes = filename, attributes
        return obj


def test_each_page_loads_the_vega_bundle_only_with_a_chart_the_table_script_with_a_table_and_no_script_twice():
    thebe = "const THEBE_JS_URL = 1"
    base = [_Js("_static/doctools.js"), _Js(None, body="var a = 1"), _Js("", body="var a = 1"), _Js(None, body=thebe),
            _Js("_static/sphinx-thebe.js", **{"async": "async"}), _Js("", body=thebe)]  # fmt: skip

    class App:
        def add_js_file(self, name, **kw):
            context["script_files"].append(_Js(f"_static/{name}", **kw))

    for body, vega, table in (('<div class="vega-chart">', True, False), ("<p>prose</p><table>", False, True)):
        context = {"body": body, "script_files": list(base), "css_files": [_Js("_static/sphinx-thebe.css")]}
        book.page_assets(App(), "page", "page.html", context, doctree=object())
        names = [(j.filename, j.attributes.get("body")) for j in context["script_files"]]
        assert names[:2] == [("_static/doctools.js", None), (None, "var a = 1")]
        assert (("_static/vega-bundle.js", None) in names) == vega and (("_static/book.js", None) in names) == table
        assert len(names) == 3
        assert not context["css_files"]


def test_pruning_keeps_only_the_scripts_some_page_loads(tmp_path):
    (tmp_path / "_static" / "scripts").mkdir(parents=True)
    for name in ("vega-bundle.js", "html-manager.js", "require.min.js", "scripts/fontawesome.js", "other.js"):
        (tmp_path / "_static" / name).write_text("x")
    fa = '\n  <script defer src="../_static/scripts/fontawesome.js?digest=1"></script>'
    table = '<div class="pst-scrollable-table-container"><table></table></div>'
    thebe = '\n    <script type="text/x-thebe-config">\n    {\n requestKernel: true,\n }\n    </script>'
    (tmp_path / "a.html").write_text(
        f'<head>{fa}<script src="_static/vega-bundle.js?v=1"></script></head>{table}{thebe}'
    )
    deleted = book.prune_static(tmp_path)
    assert sorted(deleted) == ["html-manager.js", "require.min.js", "scripts/fontawesome.js"]
    page = (tmp_path / "a.html").read_text()
    assert "fontawesome" not in page and "thebe" not in page and 'role="region"' in page and "aria-label=" in page
    assert (tmp_path / "_static" / "vega-bundle.js").exists() and (tmp_path / "_static" / "other.js").exists()


def test_pruning_drops_every_source_map_and_the_comments_that_point_at_them(tmp_path):
    static = tmp_path / "_static" / "scripts"
    static.mkdir(parents=True)
    (static / "theme.js").write_text("var a = 1;\n//# sourceMappingURL=theme.js.map\n")
    (static / "theme.js.map").write_text("{}")
    (static / "theme.css").write_text("a{}\n/*# sourceMappingURL=theme.css.map */\n")
    (static / "theme.css.map").write_text("{}")
    (static / "plain.js").write_text("var sourceMappingURL = 2;\n")  # a name in code, not a link: kept
    deleted = book.prune_static(tmp_path)
    assert sorted(deleted) == ["scripts/theme.css.map", "scripts/theme.js.map"]
    assert not list(tmp_path.rglob("*.map"))
    assert (static / "theme.js").read_text() == "var a = 1;\n" and (static / "theme.css").read_text() == "a{}\n"
    assert (static / "plain.js").read_text() == "var sourceMappingURL = 2;\n"


@pytest.mark.parametrize(
    "value,shown",
    [(None, "—"), ("", "—"), (True, "yes"), (2.954154097014546e-07, "2.95 × 10⁻⁷"), (0.123456789, "0.123"),
     (4.0, "4"), (float("nan"), "—"), (300, "300"), ([1, 2.5], "1, 2.5"), ("lee", "lee")],
)  # fmt: skip
def test_values_are_formatted_for_people(value, shown):
    assert pages.format_value(value) == shown


def test_the_build_page_lists_each_chapters_parameters_and_the_model(tmp_path):
    (tmp_path / "book").mkdir()
    results = tmp_path / "results"
    results.mkdir()
    provenance = {"name": "m", "source": "embedded", "sha256": "53aa51172d142c89" + "0" * 48, "revision": None,
                  "content_key": "ab" * 32, "model_type": "bert", "rebuild_rel_error": 2.9541540e-07}  # fmt: skip
    (results / "01_model_and_data.json").write_text(
        json.dumps({"provenance": provenance, "corpus": {"name": "lee", "sentences": 2676}})
    )
    chapters = {"01_model_and_data": {"model": "m", "n_sentences": 40, "thorough": False, "ratio": 0.333333333},
                "02_nonidentifiability": None}  # fmt: skip
    text = pages.write_run_page(tmp_path, {"model": "m", "corpus": "lee"}, results, chapters).read_text()
    assert "None" not in text and "0.333333333" not in text and "| `ratio` | `0.333` |" in text
    assert "| `thorough` | no |" in text and "53aa51172d142c89" in text and "2.95 × 10⁻⁷" in text
    assert "### The model and the data" in text and "Not run in this build" in text
    assert "| `model` |" not in text  # shown once, above


def test_the_build_page_reads_a_renumbered_chapters_file_of_an_older_build(tmp_path):
    """A build with ``--only`` in a data folder whose only results file is the explorer's of a build before the
    head-width chapter (``07_explore.json``, now 08_explore: chapters.RENAMED): the page still names the model."""
    (tmp_path / "book").mkdir()
    results = tmp_path / "results"
    results.mkdir()
    provenance = {"name": "m", "source": "embedded", "sha256": "77bb" + "0" * 60, "content_key": "cd" * 32}
    (results / "07_explore.json").write_text(json.dumps({"provenance": provenance, "corpus": {"name": "lee"}}))
    text = pages.write_run_page(tmp_path, {"model": "m"}, results, {"08_explore": None}).read_text()
    assert "77bb0000" in text


def test_the_build_page_gives_each_parameters_help_from_its_cell_comments(tmp_path):
    """The help for a parameter is written once, as the comment of the chapter's parameters cell; the page
    shows it beside the value, with the least value the contract allows, escaped for Markdown."""
    cell = '# the head shown in detail\nlayer = None  # 1..L\nhead = 0\nx = (\n    "a"  # inner\n)  # a | b <c>\n'
    assert executed.cell_comments(cell) == {"layer": "the head shown in detail; 1..L", "x": "a | b <c>"}
    (tmp_path / "book").mkdir()
    values = {"n_sentences": 40, "corpus": "lee", "seed": 3, "example_index": 1}
    text = pages.write_run_page(tmp_path, {}, tmp_path, {"01_model_and_data": values}).read_text()
    assert "| `n_sentences` | `40` | sentences for the corpus statistics; at least 1 |" in text
    assert "| `example_index` | `1` | which sampled sentence to show in detail; at least 0 |" in text
    help_ = pages.parameter_help("01_model_and_data")
    assert help_["corpus"].startswith(r"lee \| lee\_test \|") and r"glue/\<task\>" in help_["corpus"]


def test_the_teachers_page_gets_the_measured_run_times(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "teachers.md").write_text(f"# T\n\n{pages.RUN_TIMES_MARKER}\n{pages.LAUNCH_MARKER}\n")
    (tmp_path / "nb").mkdir()
    nb = _executed()
    nb["metadata"]["papermill"]["duration"] = 150.0
    (tmp_path / "nb" / "01_a.ipynb").write_text(json.dumps(nb))
    text = pages.write_teachers_page(tmp_path, tmp_path / "nb", ["01_a", "02_b"], 2, "cpu").read_text()
    assert "| {doc}`../notebooks/01_a` | 2.5 min |" in text and "not run in this build" in text
    assert "2 CPU cores" in text and pages.RUN_TIMES_MARKER not in text
    (tmp_path / "book" / "teachers.md").write_text("# T\n")
    with pytest.raises(ValueError, match="marker"):
        pages.write_teachers_page(tmp_path, tmp_path / "nb", ["01_a"], 2, "cpu")


def _teachers_page(tmp_path, repository: str | None) -> str:
    """The teachers' page of this checkout as a build with or without a repository address writes it."""
    (tmp_path / "book").mkdir(exist_ok=True)
    (tmp_path / "book" / "teachers.md").write_text((paths.source_root() / "book" / "teachers.md").read_text())
    stems = [s.stem for s in chapter_sources()]
    return pages.write_teachers_page(tmp_path, tmp_path, stems, 2, "cpu", repository=repository).read_text()


def test_the_teachers_page_promises_launch_buttons_only_when_the_build_has_a_repository(tmp_path):
    without = _teachers_page(tmp_path, None)
    promises = re.compile(r"(each|every) chapter page (also )?has a launch button", re.I)
    assert "no launch button" in without and not promises.search(without)
    assert "REPO_URL=" in without  # and says how a copy gets them
    with_repo = _teachers_page(tmp_path, "https://github.com/o/r")
    assert promises.search(with_repo) and "https://github.com/o/r" in with_repo and "no launch button" not in with_repo
    for text in (without, with_repo):
        assert pages.LAUNCH_MARKER not in text and pages.RUN_TIMES_MARKER not in text


def _toc_chapters() -> list[str]:
    import yaml

    toc = yaml.safe_load((paths.source_root() / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    return [f.split("/", 1)[1] for f in files if f.startswith("notebooks/")]


@pytest.mark.parametrize("page", ["intro", "teachers"])
def test_the_intro_and_the_session_plan_list_every_chapter_of_the_toc(page):
    """The intro's table of chapters and the teachers' full course (which the build writes): one row per chapter,
    in the toc's order."""
    from identifiability.book import course

    text = (paths.source_root() / "book" / f"{page}.md").read_text()
    if page == "teachers":
        text = course.course_text({}).split("### The full course", 1)[1].split("###", 1)[0]
    rows = re.findall(r"^\|.*?\{doc\}`\.\./notebooks/(\w+)`", text, re.M)
    assert _toc_chapters() and rows == _toc_chapters()


# A date written out or a matrix-product rate in prose is a measurement of one day's machine: those live in the
# benchmark records (benchmarks/results/), which the README and the pages name instead.
DATED = re.compile(
    r"\b\d{1,2} (January|February|March|April|May|June|July|August|September|October|November|December) \d{4}"
    r"|GFLOP/s|TFLOP/s|machine of the day before"
)
README_LINES = 160  # a newcomer reads it to the end; reference material goes to the book's pages


def test_the_readme_is_short_undated_and_names_pages_the_toc_builds():
    """The README stays an introduction: short, with no dated measurements, and every book page it sends the
    reader to (`book/<page>.md`) exists and is in the table of contents, as is every prose page of book/."""
    import yaml

    root = paths.source_root()
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_LINES
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = {c["file"] for part in toc["parts"] for c in part["chapters"]} | {toc["root"]}
    named = re.findall(r"`(book/\w+)\.md`", readme)
    assert named and set(named) <= files, set(named) - files
    assert {f"book/{p.stem}" for p in (root / "book").glob("*.md")} <= files
    for path in [root / "README.md", *sorted((root / "book").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        # the README's figures block is written from the benchmark record by bench_commands.py (whose test checks
        # that the two agree): generated from the record, not typed
        text = re.sub(r"<!-- bench_commands:.*?<!-- /bench_commands -->", "", text, flags=re.S)
        dated = DATED.search(text)
        assert dated is None, f"{path.name}: {dated[0]!r} (a measurement: name its benchmark record instead)"


def test_the_book_loads_the_page_scripts_extension():
    config = (paths.source_root() / "_config.yml").read_text()
    assert "extra_extensions: [identifiability.book.render]" in config and "html_js_files" not in config
    assert hasattr(book, "setup")


EXERCISE = re.compile(r"^\s*(?:\*\*\d+\.|\d+\. \*\*)", re.M)  # "**1. Title.**" or "1. **Title.**"


# --- student versions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", chapter_sources(), ids=lambda s: s.stem)
def test_student_versions_drop_the_solutions_and_check_every_exercise(source):
    import jupytext

    full = jupytext.read(source)
    solutions = [c for c in full.cells if "solution" in c.metadata.get("tags", [])]
    student = handout.student_version(full, source.stem)
    cells = student.cells
    assert not [c for c in cells if "solution" in c.metadata.get("tags", [])]
    answers = [i for i, c in enumerate(cells) if "answer" in c.metadata.get("tags", [])]
    assert len(answers) == len(solutions)
    for i in answers:
        check = next(c for c in cells[i + 1 :] if c.cell_type == "code")
        assert "check" in check.metadata["tags"] and "remove-cell" not in check.metadata["tags"]
        names = handout.needed_names(check.source)
        assert names and all(n in cells[i].source for n in names)  # the answer cell names what is checked
        assert "passed(" in check.source
    if solutions:  # every exercise of the chapter has a solution, so every exercise gets a check
        exercises = [e for c in full.cells if c.cell_type == "markdown" for e in EXERCISE.findall(c.source)]
        assert len(exercises) == len(solutions), (
            f"{source.stem}: {len(exercises)} exercises, {len(solutions)} solutions"
        )


def test_a_solution_without_a_check_is_refused():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["solution"]}), nbformat.v4.new_code_cell("y")]
    with pytest.raises(ValueError, match="not followed by a check cell"):
        handout.student_version(nb, "x")


def test_check_helpers_say_what_is_wrong(capsys):
    with pytest.raises(handout.CheckFailed, match="define h, key_token in your answer cell"):
        handout.needs({"x": 1}, "h", "key_token")
    with pytest.raises(handout.CheckFailed, match="rows must sum to 1"):
        handout.check(False, "rows must sum to 1")
    handout.check(True, "unused")
    handout.passed("exercise 1")
    assert "exercise 1" in capsys.readouterr().out


def test_make_handout_writes_one_student_notebook_per_chapter_with_exercises(tmp_path):
    written = handout.write_handouts(tmp_path, chapter_sources())
    with_exercises = [s for s in chapter_sources() if re.search(r":tags: \[.*\bsolution\b", s.read_text())]
    students = [w for w in written if w.parent == tmp_path]
    assert [w.stem for w in students] == [s.stem for s in with_exercises] and len(students) >= 6
    assert [w for w in written if w not in students] == [tmp_path / "teacher" / w.name for w in students]
    nb = nbformat.read(written[0], as_version=4)
    assert "Student version" in nb.cells[1].source


def _simulate(jobs: dict, workers: int) -> tuple[dict, float]:
    """The book's schedule (build.next_job on build.start_order) played with each job taking its expected
    seconds: ({job: (start, end)}, the time the last ends)."""
    from identifiability.book.build import next_job, start_order

    order, pending, done, running, times, now = start_order(jobs), set(jobs), set(), {}, {}, 0.0
    while pending or running:
        while len(running) < workers and (name := next_job(pending, done, jobs, order)) is not None:
            pending.discard(name)
            running[name] = now + jobs[name][0]
            times[name] = (now, running[name])
        now = min(running.values())
        for name in [n for n, end in running.items() if end == now]:
            del running[name]
            done.add(name)
    return times, now


def test_every_chapter_waits_for_the_chapters_it_reads_and_chapter_9_for_its_control_runs():
    from identifiability.book.build import CONTROL, book_jobs
    from identifiability.chapters.contract import CHAPTERS

    jobs = book_jobs(chapter_sources())
    assert list(jobs) == [*list(CHAPTERS)[:8], CONTROL, *list(CHAPTERS)[8:]]  # book order, control runs before 9
    # chapter 5 reads chapter 4's cache, 9 the others' results, 10 chapter 6's attributions
    assert jobs["05_angle_magnitude"][1] == {"04_token_identity"}
    assert jobs["09_across_models"][1] == {*list(CHAPTERS)[:8], CONTROL}
    assert jobs["10_measures"][1] == {"06_context_mixing"}
    for spec in CHAPTERS.values():  # what a chapter reads comes before it in the book
        assert all(list(CHAPTERS).index(r) < list(CHAPTERS).index(spec.stem) for r in spec.reads), spec.stem
    # a chapter read but not in this build is not waited for; without chapter 9 there are no control runs
    five, nine = CHAPTERS["05_angle_magnitude"].source, CHAPTERS["09_across_models"].source
    assert book_jobs([five]) == {"05_angle_magnitude": (CHAPTERS["05_angle_magnitude"].book_seconds, frozenset())}
    assert book_jobs([nine])["09_across_models"][1] == {CONTROL}


def test_the_longest_chains_start_first_and_the_short_chapters_fill_in():
    from identifiability.book.build import next_job, start_order

    jobs = {"a": (10.0, frozenset()), "b": (100.0, frozenset()), "c": (60.0, frozenset()), "d": (50.0, {"c"})}
    order = start_order(jobs)
    assert order == {"a": 10.0, "b": 100.0, "c": 110.0, "d": 50.0}  # c's chain (c then d) is the longest
    assert next_job(set(jobs), set(), jobs, order) == "c"
    assert next_job({"a", "b", "d"}, set(), jobs, order) == "b"  # d waits for c
    assert next_job({"a", "d"}, {"c"}, jobs, order) == "d"
    assert next_job({"d"}, set(), jobs, order) is None
    times, end = _simulate(jobs, 2)
    assert end == 110.0 and times["d"] == (60.0, 110.0) and times["a"] == (100.0, 110.0)
    assert _simulate(jobs, 1)[1] == 220.0  # one worker: one after the other


def test_the_books_schedule_on_two_cores_ends_near_the_bound_its_expected_seconds_allow():
    from identifiability.book.build import book_jobs, book_threads

    jobs = book_jobs(chapter_sources())
    times, end = _simulate(jobs, 2)
    for name, (_, after) in jobs.items():  # nothing starts before what it waits for has ended
        assert all(times[a][1] <= times[name][0] for a in after), name
    total = sum(seconds for seconds, _ in jobs.values())
    assert end <= 1.03 * total / 2  # within 3% of the two workers never idling
    assert book_threads(2) == (2, 1) and book_threads(1) == (1, 1) and book_threads(3) == (3, 1)
    assert book_threads(16) == (2, 8)


def test_the_teachers_page_says_which_chapters_ran_beside_another_and_on_how_many_threads(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "teachers.md").write_text(f"# T\n\n{pages.RUN_TIMES_MARKER}\n{pages.LAUNCH_MARKER}\n")
    (tmp_path / "nb").mkdir()
    for stem, seconds in (("01_a", 50.0), ("02_b", 150.0)):
        nb = _executed()
        nb["metadata"]["papermill"]["duration"] = seconds
        (tmp_path / "nb" / f"{stem}.ipynb").write_text(json.dumps(nb))
    page = pages.write_teachers_page(tmp_path, tmp_path / "nb", ["01_a", "02_b"], 2, "cpu", beside={"01_a": 1})
    text = page.read_text()
    assert "| {doc}`../notebooks/01_a` | 50 s (one thread, beside another chapter) |" in text
    assert "| {doc}`../notebooks/02_b` | 2.5 min |" in text
    assert "| all chapters, one after the other | 3.3 min |" in text
    assert "ran its chapters side by side, so it took less than that sum" in text
    (tmp_path / "book" / "teachers.md").write_text(f"# T\n\n{pages.RUN_TIMES_MARKER}\n{pages.LAUNCH_MARKER}\n")
    page = pages.write_teachers_page(tmp_path, tmp_path / "nb", ["01_a", "02_b"], 16, "cpu", beside={"02_b": 8})
    assert "| {doc}`../notebooks/02_b` | 2.5 min (8 threads, beside another chapter) |" in page.read_text()
    (tmp_path / "book" / "teachers.md").write_text(f"# T\n\n{pages.RUN_TIMES_MARKER}\n{pages.LAUNCH_MARKER}\n")
    alone = pages.write_teachers_page(tmp_path, tmp_path / "nb", ["01_a", "02_b"], 1, "cpu").read_text()
    assert "side by side" not in alone  # one after the other: the sum is the build's time


def test_a_chapter_that_stops_on_a_worker_returns_its_line_instead_of_raising(monkeypatch, tmp_path):
    """A task that raises makes its Dask worker log a traceback of its own; the book raises the line itself
    once every side-by-side chapter has ended (build.execute_chapters)."""
    from identifiability.base.errors import ChapterFailed
    from identifiability.book import build

    def stops(*args, **kwargs):
        raise ChapterFailed("01_a stopped: ValueError: no (full traceback in x.ipynb)")

    monkeypatch.setattr(build, "run_notebook", stops)
    seconds, line = build.timed_run(tmp_path / "01_a.md", tmp_path, {})
    assert line == "01_a stopped: ValueError: no (full traceback in x.ipynb)" and seconds >= 0
    monkeypatch.setattr(build, "run_notebook", lambda *a, **k: None)
    assert build.timed_run(tmp_path / "01_a.md", tmp_path, {})[1] is None


class _DoneAtOnce:
    """A Dask client stand-in whose tasks run when submitted (the book's loop reads done() and result())."""

    def __init__(self):
        self.started = []

    def submit(self, fn, *args, key, pure):
        from concurrent.futures import Future

        self.started.append(key.removeprefix("book-"))
        f = Future()
        f.set_result(fn(*args))
        return f


def _book_on_a_stand_in(monkeypatch, tmp_path, stops: set[str]):
    from identifiability.base import cluster
    from identifiability.book import build

    client = _DoneAtOnce()
    monkeypatch.setattr(cluster, "connect", lambda **kw: client)
    monkeypatch.setattr(cluster, "close", lambda client, own: None)
    monkeypatch.setattr(build, "book_threads", lambda cores: (2, 1))
    monkeypatch.setattr(build, "_control", lambda *a: client.started.append(build.CONTROL))

    def run(source, out, params, progress, strict):
        if source.stem in stops:
            raise build.ChapterFailed(f"{source.stem} stopped: ValueError: no (full traceback in x.ipynb)")

    monkeypatch.setattr(build, "run_notebook", run)
    return client


def test_the_book_starts_each_chapter_after_what_it_reads_and_says_which_ran_beside_another(monkeypatch, tmp_path):
    from identifiability.book import build

    client = _book_on_a_stand_in(monkeypatch, tmp_path, set())
    beside = build.execute_chapters(chapter_sources(), tmp_path, {"model": "m"})
    jobs = build.book_jobs(chapter_sources())
    assert sorted(client.started) == sorted(jobs)
    for name, (_, after) in jobs.items():
        assert all(client.started.index(a) < client.started.index(name) for a in after), name
    assert client.started[:2] == ["06_context_mixing", "04_token_identity"]  # the longest chains first
    assert beside == {stem: 1 for stem in jobs if stem != build.CONTROL}


def test_the_books_progress_bar_counts_jobs_and_promises_no_time_left(monkeypatch, tmp_path, capsys):
    """Jobs differ a hundredfold in length: a rate or a time left from them is noise (after chapter 4, one
    build's bar said 41 minutes were left; the rest took 3)."""
    import re

    from identifiability.book import build

    _book_on_a_stand_in(monkeypatch, tmp_path, set())
    build.execute_chapters(chapter_sources(), tmp_path, {"model": "m"})
    err = capsys.readouterr().err
    n = len(build.book_jobs(chapter_sources()))
    assert f"{n}/{n} jobs [" in err
    assert "job/s" not in err and "s/job" not in err and not re.search(r"\d\d:\d\d<", err), err[-300:]


def test_after_a_chapter_stops_the_book_starts_no_other_and_raises_its_line(monkeypatch, tmp_path):
    from identifiability.base.errors import ChapterFailed
    from identifiability.book import build

    client = _book_on_a_stand_in(monkeypatch, tmp_path, {"04_token_identity"})
    with pytest.raises(ChapterFailed, match=r"^04_token_identity stopped: ValueError: no \(full traceback"):
        build.execute_chapters(chapter_sources(), tmp_path, {"model": "m"})
    # the two it had started (both workers busy) ended; nothing started after the failure was seen
    assert client.started == ["06_context_mixing", "04_token_identity"]
