"""What a result was computed with: the package's computing modules, each keyed by its name and fingerprinted
by its meaning, so that a recorded run stays fresh when a module moves and goes stale when one it ran changes.

- :func:`computing` is the one rule of which modules count: every module of the package except those named in
  :data:`NOT_COMPUTING` (what a page shows, the book, the command line, running a chapter's kernel, writing
  results), which cannot change a number.
- :func:`fingerprint` hashes a module's meaning (the rule is in its docstring): an edited docstring, comment or
  layout, or a move that rewrites the module's imports of the package, leaves it unchanged.
- :func:`imported` is what this process computed with (a chapter's kernel reports it when it saves its
  results, :meth:`identifiability.book.notebook.Chapter.save`, under :data:`KEY`); :func:`merged` unites reports.
- :func:`changed` is which recorded modules are no longer in a package on disk, under their name or (a module
  that moved) under another name with the same fingerprint.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

PACKAGE = "identifiability"
KEY = "computed_with"  # a chapter results file's {module name: fingerprint} of what its kernel computed with
# The fingerprint rule's version and the Python whose ast.unparse writes the canonical source (its output may
# differ between Python versions): a record fingerprinted under another rule cannot be compared.
RULE = f"1, Python {sys.version_info.major}.{sys.version_info.minor}"
DIFFERED = "differed between the processes that computed it"  # a module two reports fingerprint differently
# Modules that cannot change a number, as names below the package (a name and everything below it).
NOT_COMPUTING = (
    # what a page shows: charts, generated prose, the words of a verdict
    "charts",
    "text",
    "verdicts.text",
    # the book: its build, pages and handout, the chapters' notebook helper and the results schema it checks
    "book",
    # the command line, running a chapter's kernel and cleaning its notebook, one-line errors
    "cli",
    "chapters.execution",
    "chapters.executed",
    "base.stops",
    "base.errors",
    # writing results and recorded runs, and this module, which fingerprints what they computed with (the
    # recorded package's other module, C10's proportional sample, computes and counts)
    "base.fileio",
    "recorded.computed_with",
    "recorded.store",
    "recorded.c10",
    "recorded.compare",
    "recorded.confirm",
    "recorded.family",
    "recorded.measures",
)


def computing(name: str, package: str = PACKAGE) -> bool:
    """Whether the module ``name`` (``identifiability.studies.measures``) of ``package`` counts in what a
    result was computed with: a module of the package not named, nor below a name, in :data:`NOT_COMPUTING`.
    A new module counts unless it is named there: a module left out that did compute would leave a stale
    record looking fresh."""
    if name != package and not name.startswith(package + "."):
        return False
    below = name.removeprefix(package).removeprefix(".")
    return not any(below == n or below.startswith(n + ".") for n in NOT_COMPUTING)


class _Meaning(ast.NodeTransformer):
    """Drops what cannot change what a module computes: string-only statements (docstrings) and imports of the
    package's own modules."""

    def __init__(self, package: str) -> None:
        self.package = package

    def _own(self, module: str | None) -> bool:
        return module is not None and (module == self.package or module.startswith(self.package + "."))

    def visit_Expr(self, node: ast.Expr) -> ast.AST | None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None
        return self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST | None:
        return None if node.level or self._own(node.module) else node

    def visit_Import(self, node: ast.Import) -> ast.AST | None:
        node.names = [a for a in node.names if not self._own(a.name)]
        return node if node.names else None


def _filled(tree: ast.AST) -> ast.AST:
    """``pass`` in every block left empty (a function that held only its docstring)."""
    for node in ast.walk(tree):
        if isinstance(getattr(node, "body", None), list) and not node.body:
            node.body = [ast.Pass()]
    return tree


def fingerprint(text: str, package: str = PACKAGE) -> str:
    """SHA-256 of a module's meaning, from its source ``text``: the module parsed, every statement that is only
    a string (docstrings) and every import of ``package``'s own modules (relative, or absolute by the package's
    name) left out, and what remains written back as canonical source (``ast.unparse``: no comments, one
    layout). So an edit of a docstring, a comment or the layout, or a move of the module, which rewrites its
    imports of the package (``from .stats import x`` becomes ``from ..base.stats import x``), leaves the
    fingerprint as it was; any edit of code changes it. An import of the package says only where a name comes
    from: that module counts on its own, under its own name. Source that does not parse is fingerprinted by its
    bytes (a half-edited module matches nothing recorded)."""
    try:
        tree = _filled(_Meaning(package).visit(ast.parse(text)))
    except SyntaxError:
        return "unparsable-" + hashlib.sha256(text.encode()).hexdigest()
    return hashlib.sha256(ast.unparse(tree).encode()).hexdigest()


def _file_fingerprint(path: Path, package: str) -> str:
    st = path.stat()
    return _fingerprint_of(str(path.resolve()), st.st_mtime_ns, st.st_size, package)


@functools.lru_cache(maxsize=4096)
def _fingerprint_of(path: str, mtime_ns: int, size: int, package: str) -> str:
    """One file's fingerprint, once per process while the file is unchanged (a page build judges several
    records against the same package)."""
    return fingerprint(Path(path).read_text(encoding="utf-8"), package)


def imported(package: str = PACKAGE) -> dict[str, str]:
    """{module name: :func:`fingerprint`} of the computing modules (:func:`computing`) of ``package`` this
    process has imported, read from the files they were imported from."""
    out = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and file.endswith(".py") and computing(name, package):
            out[name] = _file_fingerprint(Path(file), package)
    return dict(sorted(out.items()))


def merged(reports: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """One {module name: fingerprint} of several processes' reports; a module they fingerprint differently (its
    file was edited between them) is :data:`DIFFERED`, which matches no module."""
    out: dict[str, str] = {}
    for report in reports:
        for name, fp in report.items():
            out[name] = fp if out.get(name, fp) == fp else DIFFERED
    return dict(sorted(out.items()))


def module_name(path: Path, root: Path, package: str = PACKAGE) -> str:
    """The module name of the file ``path`` of the package whose folder is ``root``."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join([package, *(parts[:-1] if parts[-1] == "__init__" else parts)])


def _module_file(name: str, root: Path, package: str) -> Path | None:
    below = name.removeprefix(package).removeprefix(".").split(".") if name != package else []
    base = root.joinpath(*below) if below else root
    for f in (base.with_suffix(".py") if below else None, base / "__init__.py"):
        if f is not None and f.is_file():
            return f
    return None


def on_disk(root: Path, package: str = PACKAGE) -> dict[str, str]:
    """{module name: :func:`fingerprint`} of every module of the package whose folder is ``root``."""
    return {module_name(f, root, package): _file_fingerprint(f, package) for f in sorted(root.rglob("*.py"))}


def changed(recorded: Mapping[str, str], root: Path, package: str = PACKAGE) -> list[str]:
    """The names of ``recorded`` ({module name: fingerprint}) whose meaning is no longer in the package whose
    folder is ``root``: a module is unchanged when the module of its name, or any module of the package (it
    moved), has its fingerprint; one edited or gone is named."""
    missing = []
    for name, fp in recorded.items():
        f = _module_file(name, root, package)
        if f is None or _file_fingerprint(f, package) != fp:
            missing.append(name)
    if not missing:
        return []
    now = set(on_disk(root, package).values())
    return sorted(n for n in missing if recorded[n] not in now)
