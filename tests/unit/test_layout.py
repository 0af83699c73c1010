"""The package's house rules, checked on its source: computation, charts, text and the registry stay apart
(charts draw, text writes); each chapter's modules carry its name; no import circle, even through an import
inside a function; no private name used outside its module."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import identifiability

SRC = Path(identifiability.__file__).parent
TESTS = Path(__file__).resolve().parents[1]
# Modules that import nothing of the package, so that every other module may import them.
LEAVES = ("identifiability.base.errors", "identifiability.base.fileio", "identifiability.base.paths")
# The role packages: folders named for what their modules do (CONTRIBUTING, "The packages"); each __init__ is
# a docstring that imports nothing, so importing one module never runs its siblings.
ROLES = ("base", "corpus", "models", "effective", "chapters", "runs", "recorded", "book")
TOP_LEVEL_AT_MOST = 20  # entries a newcomer reads as the architecture
FAMILIES = re.compile(r"\b(bert|roberta|electra|distilbert|albert|gpt-?2|xlm-roberta|camembert)\b", re.IGNORECASE)


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(SRC.rglob("*.py")):
        name = ".".join(("identifiability", *p.relative_to(SRC).with_suffix("").parts))
        out[name.removesuffix(".__init__")] = p
    return out


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def _target(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The module an ``import from`` names, relative imports resolved against ``importer``."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")[: len(importer.split(".")) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def _graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Which of ``mods`` each module imports: anywhere in it, at module level or inside a function (a lazy
    import still makes a circle), and with a module the packages above it that Python runs first."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                target = _target(node, name, path.name == "__init__.py")
                found = {f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target for a in node.names}
            elif isinstance(node, ast.Import):
                found = {a.name for a in node.names}
            else:
                continue
            for t in found & set(mods):
                parents = [".".join(t.split(".")[:k]) for k in range(2, t.count(".") + 1)]
                graph[name] |= {t, *(p for p in parents if not name.startswith(p + "."))}
    return graph


def test_only_the_charts_package_imports_altair():
    offenders = [
        n
        for n, p in _modules().items()
        if not n.startswith("identifiability.charts") and any(i.split(".")[0] == "altair" for i in _imports(p))
    ]
    assert offenders == []


def _family_keys(path: Path) -> list[str]:
    """Family names used as code: a string that is a family's key ("bert", "gpt2"), or an identifier naming a
    family. Prose that names a model (a docstring, or a sentence such as "BERT-base's last layer") is not."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and FAMILIES.fullmatch(node.value.strip()):
            out.append(repr(node.value))
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name and any(FAMILIES.fullmatch(part) for part in name.split("_")):
            out.append(name)
    return out


def test_family_names_live_in_the_registry_only():
    offenders = {
        n: k for n, p in _modules().items() if n != "identifiability.models.adapters" and (k := _family_keys(p))
    }
    assert offenders == {}


def test_the_family_check_can_fail(tmp_path):
    code = tmp_path / "m.py"
    code.write_text('"""Prose about BERT-base is fine."""\nif model_type == "roberta":\n    use_bert_layers = 1\n')
    assert _family_keys(code) == ["'roberta'", "use_bert_layers"]


def test_no_module_is_a_grab_bag():
    sizes = {n: len(p.read_text().splitlines()) for n, p in _modules().items()}
    assert max(sizes.values()) <= 600, max(sizes.items(), key=lambda kv: kv[1])


def _cycle(graph: dict[str, set[str]]) -> str | None:
    """One import circle of ``graph`` as "a -> b -> a", or None."""
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> str | None:
        if node in path:
            return " -> ".join((*path[path.index(node) :], node))
        if node in done:
            return None
        for nxt in sorted(graph[node] - {node}):
            found = visit(nxt, (*path, node))
            if found:
                return found
        done.add(node)
        return None

    return next((c for m in sorted(graph) if (c := visit(m, ()))), None)


def test_no_import_cycle_counting_imports_inside_functions():
    assert _cycle(_graph(_modules())) is None


def test_the_cycle_check_sees_an_import_inside_a_function(tmp_path):
    """The check above can fail: two modules that import each other, one of them only inside a function."""
    (tmp_path / "a.py").write_text("from . import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from .a import g\n")
    graph = _graph({"identifiability.a": tmp_path / "a.py", "identifiability.b": tmp_path / "b.py"})
    assert graph == {"identifiability.a": {"identifiability.b"}, "identifiability.b": {"identifiability.a"}}
    assert _cycle(graph) == "identifiability.a -> identifiability.b -> identifiability.a"


def _packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` seen from the top: which top-level packages (or modules) each imports."""
    top = lambda m: ".".join(m.split(".")[:2])  # noqa: E731
    out: dict[str, set[str]] = defaultdict(set)
    for a, targets in graph.items():
        out[top(a)] |= {top(b) for b in targets if top(b) != top(a) and b != "identifiability"}
    return out


def test_no_two_packages_import_each_other():
    assert _cycle(_packages(_graph(_modules()))) is None


def test_the_package_check_sees_a_circle_through_two_modules(tmp_path):
    """The check above can fail: a.x imports b.y and b.z imports a.w (no module circle, a package circle)."""
    for f, text in {"ax.py": "from ..b import y\n", "bz.py": "from ..a import w\n", "e.py": ""}.items():
        (tmp_path / f).write_text(text)
    mods = {
        "identifiability.a.x": tmp_path / "ax.py",
        "identifiability.a.w": tmp_path / "e.py",
        "identifiability.b.y": tmp_path / "e.py",
        "identifiability.b.z": tmp_path / "bz.py",
    }
    assert _cycle(_graph(mods)) is None
    assert _cycle(_packages(_graph(mods))) == "identifiability.a -> identifiability.b -> identifiability.a"


def test_the_top_level_is_a_short_list_of_packages():
    entries = sorted(p.name for p in SRC.iterdir() if p.name != "__pycache__")
    assert len(entries) <= TOP_LEVEL_AT_MOST, entries
    assert [e for e in entries if e.endswith(".py")] == ["__init__.py", "cli.py"], entries
    assert set(ROLES) <= set(entries)


def test_a_role_package_init_is_a_docstring_that_imports_nothing():
    for role in ROLES:
        tree = ast.parse((SRC / role / "__init__.py").read_text())
        assert ast.get_docstring(tree), f"{role}/__init__.py: say what the package is for"
        assert len(tree.body) == 1, f"{role}/__init__.py holds more than its docstring"


def test_the_leaf_modules_import_nothing_of_the_package():
    graph = _graph(_modules())
    assert {m: graph[m] for m in LEAVES if graph[m]} == {}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_reaches() -> set[tuple[str, str, str]]:
    """(file, module, name) for every private name of a package module that another file imports
    (``from m import _name``) or reads off an imported module (``m._name``), in src/ and tests/."""
    mods = _modules()
    files = {**mods, **{str(p.relative_to(TESTS.parent)): p for p in sorted(TESTS.rglob("*.py"))}}
    found = set()
    for name, path in files.items():
        tree = ast.parse(path.read_text())
        bound: dict[str, str] = {}  # local name -> the package module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _target(node, name, path.name == "__init__.py") if name in mods else node.module or ""
                for a in node.names:
                    if target in mods and _private(a.name):
                        found.add((name, target, a.name))
                    if f"{target}.{a.name}" in mods:
                        bound[a.asname or a.name] = f"{target}.{a.name}"
            elif isinstance(node, ast.Import):
                bound |= {a.asname: a.name for a in node.names if a.asname and a.name in mods}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr):
                if node.value.id in bound:
                    found.add((name, bound[node.value.id], node.attr))
    return found


def test_no_private_name_is_used_across_modules():
    reaches = _private_reaches()
    assert sorted(reaches) == [], "make these names public in their package"


# --------------------------------------------------------------------------------------------------
# the chapter contract is the one place that spells a chapter's file stem
# --------------------------------------------------------------------------------------------------


def test_no_module_but_the_contract_spells_a_chapters_file_stem():
    from identifiability.chapters.contract import CHAPTERS

    stems = re.compile("|".join(re.escape(s) for s in CHAPTERS))
    found = [
        f"{p.relative_to(SRC)}: {m.group(0)}"
        for p in sorted(SRC.rglob("*.py"))
        if p.relative_to(SRC).as_posix() != "chapters/contract.py"
        for m in stems.finditer(p.read_text())
    ]
    assert not found, f"chapter stems outside identifiability.chapters.contract (use chapters.by_name): {found}"


def _names_a_chapter(source: str, names: set[str]) -> list[str]:
    """Where ``source`` finds a chapter by spelling its name: ``by_name("x")``, ``x.name == "x"``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "by_name":
            found += [a.value for a in node.args if isinstance(a, ast.Constant) and a.value in names]
        elif isinstance(node, ast.Compare) and getattr(node.left, "attr", None) == "name":
            found += [c.value for c in node.comparators if isinstance(c, ast.Constant) and c.value in names]
        elif isinstance(node, ast.Compare) and any(getattr(c, "attr", None) == "name" for c in node.comparators):
            found += [node.left.value] if isinstance(node.left, ast.Constant) and node.left.value in names else []
    return found


def test_no_module_but_the_contract_finds_a_chapter_by_its_name():
    """A chapter other modules need is found by its role in the contract (``by_role``), so that renaming or
    replacing a chapter touches the contract alone."""
    from identifiability.chapters.contract import CHAPTERS

    names = {c.name for c in CHAPTERS.values()}
    found = {
        p.relative_to(SRC).as_posix(): hits
        for p in sorted(SRC.rglob("*.py"))
        if p.relative_to(SRC).as_posix() != "chapters/contract.py" and (hits := _names_a_chapter(p.read_text(), names))
    }
    assert not found, f"give these chapters a role in the contract and find them with by_role: {found}"


def test_the_chapter_name_check_can_fail():
    names = {"context_mixing", "across_models"}
    code = 'a = by_name("context_mixing")\nb = spec.name == "across_models"\nc = by_name(n)\nd = {"x": 1}\n'
    assert _names_a_chapter(code, names) == ["context_mixing", "across_models"]


def test_every_role_is_one_chapters_or_more_and_by_role_finds_the_one():
    from identifiability.chapters.contract import CHAPTERS, ROLES, by_role, with_role

    assert all(with_role(r) for r in ROLES) and {r for c in CHAPTERS.values() for r in c.roles} <= set(ROLES)
    singles = [r for r in ROLES if len(with_role(r)) == 1]
    assert all(by_role(r) is with_role(r)[0] for r in singles)
    several = [r for r in ROLES if len(with_role(r)) > 1]
    for r in several:
        try:
            by_role(r)
        except KeyError as e:
            assert "exactly one" in str(e)
        else:
            raise AssertionError(f"by_role({r!r}) picked one of several chapters")


def _setup_call(source: Path) -> ast.Call:
    import jupytext

    for cell in jupytext.read(source).cells:
        if cell.cell_type != "code" or "notebook.setup(" not in cell.source:
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "notebook.setup":
                return node
    raise AssertionError(f"{source.name} never calls notebook.setup")


def test_each_chapter_calls_setup_with_its_stem_and_passes_every_parameter_it_declares():
    from identifiability.chapters.contract import CHAPTERS
    from identifiability.chapters.parameters import declared_parameters

    for spec in CHAPTERS.values():
        call = _setup_call(spec.source)
        assert [ast.literal_eval(a) for a in call.args] == [spec.stem], f"{spec.source.name}: setup's first argument"
        passed = {k.arg: ast.unparse(k.value) for k in call.keywords}
        declared = declared_parameters(spec.source)
        assert set(passed) == set(declared), f"{spec.source.name}: setup lacks {set(declared) - set(passed)}"
        assert all(v == k for k, v in passed.items()), f"{spec.source.name}: pass each parameter as name=name"


def test_one_place_maps_layer_numbers_to_indices_and_forms_t():
    """The paper numbers layers 1..L (0: the embeddings); only trace.layer_index turns a number into an index of
    the per-layer tensors, and only trace.transform forms T = V_h W_O^h, in the package and in the chapters."""
    from identifiability.chapters.contract import CHAPTERS

    texts = {p.relative_to(SRC).as_posix(): p.read_text() for p in SRC.rglob("*.py") if p.name != "trace.py"}
    texts |= {spec.source.name: spec.source.read_text() for spec in CHAPTERS.values()}
    shifted = [name for name, text in texts.items() if re.search(r"\blayer\s*-\s*1\b", text)]
    assert not shifted, f"a layer number turned into an index outside trace.layer_index: {shifted}"
    formed = [name for name, text in texts.items() if re.search(r"values\[[^\]]*\][^\n]*@ *w_o\b", text)]
    assert not formed, f"T formed outside trace.transform: {formed}"


# Each chapter's one name (chapters.ChapterSpec.name) names its module in every package of its layers; beside
# those, a layer package holds only the modules several chapters share.
LAYERS = ("studies", "charts", "text", "evidence", "verdicts")
SHARED = {
    "studies": (),  # Study and data() are in studies/__init__.py
    # the offline renderer with the axes and menus several charts share; the narrow-page layout; verdict charts
    "charts": ("render", "narrow", "verdicts"),
    "text": (),
    "evidence": (),
    "verdicts": ("core", "claims", "text"),  # Verdict and interval rules; data/claims.csv; how verdicts read
}


def _layer_problems(src: Path, chapters) -> list[str]:
    """What breaks the rule above, one line per file: a chapter's module missing from a package of its layers,
    or a module in a layer package that is neither a chapter's (of a chapter that lists the layer) nor shared."""
    out = []
    for layer in LAYERS:
        have = {p.stem for p in (src / layer).glob("*.py")} - {"__init__"}
        names = {c.name for c in chapters if layer in c.layers}
        for c in chapters:
            if layer in c.layers and c.name not in have:
                out.append(f"{layer}/{c.name}.py is missing: {c.stem} lists {layer} in its layers")
        for stem in sorted(have - names - set(SHARED[layer])):
            owner = next((c.stem for c in chapters if c.name == stem), None)
            out.append(
                f"{layer}/{stem}.py: {owner} does not list {layer} in its layers"
                if owner
                else f"{layer}/{stem}.py is no chapter's name ({', '.join(sorted(names))}) nor shared "
                f"({', '.join(SHARED[layer]) or 'none'})"
            )
    return out


def test_every_chapter_has_a_module_of_its_name_in_each_of_its_layers_and_no_other():
    from identifiability.chapters.contract import CHAPTERS

    assert _layer_problems(SRC, list(CHAPTERS.values())) == []


def test_the_layer_check_names_a_missing_and_a_misnamed_file(tmp_path):
    from identifiability.chapters.contract import ChapterSpec

    for layer, stems in {
        "studies": ("one", "two"),
        "charts": ("one", "render"),
        "text": ("one_text",),
        "evidence": (),
        "verdicts": (),
    }.items():
        (tmp_path / layer).mkdir()
        for stem in ("__init__", *stems):
            (tmp_path / layer / f"{stem}.py").write_text("")
    chapters = [ChapterSpec("01_one", layers=("studies", "charts", "text")), ChapterSpec("02_two", layers=("studies",))]
    assert _layer_problems(tmp_path, chapters) == [
        "text/one.py is missing: 01_one lists text in its layers",
        "text/one_text.py is no chapter's name (one) nor shared (none)",
    ]
    chapters[1] = ChapterSpec("02_two", layers=())
    assert _layer_problems(tmp_path, chapters)[0] == "studies/two.py: 02_two does not list studies in its layers"


def test_no_text_module_imports_altair_or_a_chart():
    mods = _modules()
    graph = _graph(mods)
    text = [n for n in mods if n.startswith("identifiability.text")]
    assert len(text) >= 8
    offenders = {
        n: sorted(
            i
            for i in _imports(mods[n]) | graph[n]
            if i.split(".")[0] == "altair" or i.startswith("identifiability.charts")
        )
        for n in text
    }
    assert {n: v for n, v in offenders.items() if v} == {}


# What a chart function may return besides a chart: Vega expressions, HTML and chart text that render.py makes
# for charts, and two verdict sentences of chapter 2 that are to become claim rows (left in place meanwhile).
RETURNS_TEXT = {
    "render.plain_notation",
    "render.chart_html",
    "render.sentence_label_expr",
    "render.token_tooltip",
    "nonidentifiability.null_space_verdict_text",
    "nonidentifiability.search_text",
}
TEXT_TYPES = {"str", "DataFrame", "Series", "Styler", "Markdown"}


def _outer_types(annotation: ast.expr) -> set[str]:
    """The types an annotation names at its top ('str | None' -> str, None; 'dict[str, int]' -> dict)."""
    if isinstance(annotation, ast.BinOp):
        return _outer_types(annotation.left) | _outer_types(annotation.right)
    if isinstance(annotation, ast.Subscript):
        return _outer_types(annotation.value)
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return _outer_types(ast.parse(annotation.value, mode="eval").body)
    return {ast.unparse(annotation).rsplit(".", 1)[-1]}


def _text_returns(folder: Path) -> list[str]:
    """'module.function' for each public function of the modules in ``folder`` that returns text (a str, a
    table) or does not say what it returns, less :data:`RETURNS_TEXT`."""
    out = []
    for p in sorted(folder.glob("*.py")):
        for node in ast.parse(p.read_text()).body:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            name = f"{p.stem}.{node.name}"
            if node.returns is None:
                out.append(f"{name} (no return annotation)")
            elif _outer_types(node.returns) & TEXT_TYPES and name not in RETURNS_TEXT:
                out.append(f"{name} -> {ast.unparse(node.returns)}")
    return out


def test_charts_draw_and_text_writes():
    """No function left in charts/ returns a string or a table: those are text functions (text/<chapter>.py)."""
    assert _text_returns(SRC / "charts") == []


def test_the_return_check_can_fail(tmp_path):
    (tmp_path / "m.py").write_text(
        "def a() -> str: ...\ndef b() -> alt.Chart: ...\ndef c(): ...\ndef d() -> pd.DataFrame | None: ...\n"
        "def e() -> dict[str, int]: ...\ndef _f() -> str: ...\ndef g() -> 'Styler': ...\n"
    )
    assert _text_returns(tmp_path) == [
        "m.a -> str",
        "m.c (no return annotation)",
        "m.d -> pd.DataFrame | None",
        "m.g -> 'Styler'",
    ]


# --------------------------------------------------------------------------------------------------
# verdicts are called one way: studies build evidence, one entry point per claim judges it
# --------------------------------------------------------------------------------------------------


def _reached(graph: dict[str, set[str]], module: str) -> set[str]:
    """Every package module ``module`` imports, directly or through the modules it imports."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        for t in graph[todo.pop()] - seen:
            seen.add(t)
            todo.append(t)
    return seen


def test_no_study_reaches_verdicts_and_evidence_reaches_neither_side():
    """Studies build evidence and never depend on a rule, not even through another module (``across``);
    the evidence types depend on neither the studies nor the verdicts."""
    graph = _graph(_modules())
    found = {
        m: sorted(t for t in _reached(graph, m) if t.startswith(sides))
        for m in list(graph)
        for prefix, sides in (
            ("identifiability.studies", ("identifiability.verdicts",)),
            ("identifiability.evidence", ("identifiability.verdicts", "identifiability.studies")),
        )
        if m == prefix or m.startswith(prefix + ".")
    }
    assert {m: ts for m, ts in found.items() if ts} == {}, "build evidence in the study, judge it in verdicts"


def test_the_study_check_sees_a_relative_import_of_verdicts(tmp_path):
    (tmp_path / "a.py").write_text("def f():\n    from ..verdicts.core import Rules\n")
    mods = {"identifiability.studies.a": tmp_path / "a.py", "identifiability.verdicts.core": tmp_path / "a.py"}
    assert "identifiability.verdicts.core" in _graph(mods)["identifiability.studies.a"]


def test_every_claim_has_one_entry_point_of_the_shared_shape():
    """Claim CN of a chapter is judged by ``verdicts.<chapter name>.cN(evidence, rules) -> Verdict`` and by no
    other module's ``cN``; its evidence type lives in the chapter's evidence module (what the study builds)."""
    import importlib
    import inspect
    import typing

    from identifiability.chapters.contract import CHAPTERS
    from identifiability.verdicts import Rules, Verdict
    from identifiability.verdicts.claims import load_claims

    judging = {stem: spec for stem, spec in CHAPTERS.items() if "verdicts" in spec.layers}
    modules = {stem: importlib.import_module(spec.module("verdicts")) for stem, spec in judging.items()}
    for claim in load_claims():
        name = claim["id"].lower()
        assert claim["chapter"] in judging, f"{claim['id']}: chapter {claim['chapter']} has no verdicts module"
        owners = [stem for stem, m in modules.items() if inspect.isfunction(getattr(m, name, None))]
        assert owners == [claim["chapter"]], f"{claim['id']}: entry point {name} in {owners}"
        fn = getattr(modules[claim["chapter"]], name)
        assert list(inspect.signature(fn).parameters) == ["evidence", "rules"], f"{name}: (evidence, rules)"
        hints = typing.get_type_hints(fn)
        assert hints["rules"] is Rules and hints["return"] is Verdict, name
        evidence = judging[claim["chapter"]].module("evidence")
        assert hints["evidence"].__module__ == evidence, f"{name} reads {hints['evidence']}, not a type of {evidence}"


def test_the_chapter_contract_imports_without_torch():
    """The pre-flight and every command's argument checks read the contract in a fraction of a second: torch
    loads with a model, not with the contract (the registry's rows need no tensors)."""
    import subprocess
    import sys

    code = "import sys, identifiability.chapters.contract; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_base_imports_nothing_of_the_package_but_base():
    """Every band may import ``base``, so ``base`` imports no other package of ours (a circle otherwise)."""
    graph = _graph(_modules())
    found = {
        m: sorted(t for t in targets if not t.startswith("identifiability.base") and t != "identifiability")
        for m, targets in graph.items()
        if m.startswith("identifiability.base")
    }
    assert not {m: t for m, t in found.items() if t}, found
