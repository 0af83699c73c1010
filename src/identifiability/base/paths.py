"""Where things live: the checkout's sources, and the data folder for results, caches and books.

One rule for every entry point (``run``, ``book``, later ``sweep``):

- sources (``notebooks/``, ``book/``, ``_toc.yml``) come from the checkout: the working directory or a
  folder above it that holds the project, else the checkout the package was installed from (editable);
- results and caches go under the data folder: ``$IDENTIFIABILITY_DATA`` if set, else ``data/`` of the
  checkout the command runs in, else ``./data`` of the working directory (an installed package never
  writes into its own source tree);
- a model's results are filed under its key and a corpus's under its own (:mod:`identifiability.models.keys`,
  which also names each model's results and book folders).

Imports nothing of the package.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# What a reader may type for the embedded default model (the one alias list).
DEFAULT_ALIASES = frozenset({"", "default", DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"})
DEFAULT_CORPUS = "lee"
DATA_ENV = "IDENTIFIABILITY_DATA"


def _is_checkout(path: Path) -> bool:
    return (
        (path / "_toc.yml").is_file() and (path / "notebooks").is_dir() and (path / "src" / "identifiability").is_dir()
    )


def checkout(start: Path | None = None) -> Path | None:
    """The project checkout that holds ``start`` (default: the working directory), or None."""
    here = (start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if _is_checkout(p):
            return p
    return None


def source_root() -> Path:
    """The checkout whose notebooks and book pages are used."""
    found = checkout() or checkout(Path(__file__).resolve().parent)
    if found is None:
        raise FileNotFoundError(
            "the chapter notebooks are not here: run this command inside a checkout of the project "
            "(the folder with _toc.yml and notebooks/)"
        )
    return found


def data_root() -> Path:
    """The data folder (see the module docstring)."""
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV]).expanduser().resolve()
    found = checkout()
    return (found / "data") if found else (Path.cwd() / "data").resolve()


def results_root() -> Path:
    return data_root() / "results"


def cache_root() -> Path:
    return data_root() / "cache"


def build_root() -> Path:
    """Where books and executed notebooks go: ``_build`` of the checkout."""
    return source_root() / "_build"


def sweep_root() -> Path:
    """Where ``identifiability sweep`` files its runs: ``<model>/<corpus>/<chapter>/seed<s>-<run key>/``."""
    return data_root() / "sweeps"


def table_file() -> Path:
    """The results table of every finished run (book builds and sweeps), rebuilt after each sweep."""
    return data_root() / "results.parquet"


def claims_file() -> Path:
    """The claims table ships with the sources, not the data folder."""
    return source_root() / "data" / "claims.csv"


def safe_key(name: str) -> str:
    """A filesystem-safe form of a name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name).strip("/")) or "model"


def is_default_model(name: str | None) -> bool:
    """Whether ``name`` means the embedded default model (None or one of :data:`DEFAULT_ALIASES`)."""
    return name is None or name in DEFAULT_ALIASES
