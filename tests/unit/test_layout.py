"""The package's house rules, checked on its source: computation, charts and the registry stay apart."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import identifiability

SRC = Path(identifiability.__file__).parent
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


def test_only_the_charts_package_imports_altair():
    offenders = [
        n
        for n, p in _modules().items()
        if not n.startswith("identifiability.charts") and any(i.split(".")[0] == "altair" for i in _imports(p))
    ]
    assert offenders == []


def test_family_names_live_in_the_registry_only():
    offenders = [n for n, p in _modules().items() if n != "identifiability.adapters" and FAMILIES.search(p.read_text())]
    assert offenders == []


def test_no_module_is_a_grab_bag():
    sizes = {n: len(p.read_text().splitlines()) for n, p in _modules().items()}
    assert max(sizes.values()) <= 600, max(sizes.items(), key=lambda kv: kv[1])


def test_no_import_cycle_at_module_level():
    mods = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.parse(path.read_text()).body:  # top level only: imports inside functions are lazy
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
                graph[name] |= {t for t in (target, *(f"{target}.{a.name}" for a in node.names)) if t in mods}
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, " -> ".join((*path[path.index(node) :], node))
        if node not in done:
            for nxt in graph[node] - {node}:
                visit(nxt, (*path, node))
            done.add(node)

    for m in mods:
        visit(m, ())
