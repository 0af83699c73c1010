"""Shared fixtures. Tiny random models are built from configs (no download); ``real_lm`` is the embedded
all-MiniLM-L6-v2, loaded once per session."""

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch.set_num_threads(min(2, os.cpu_count() or 1))

ARCHITECTURES = ["bert", "roberta", "electra", "distilbert", "albert", "gpt2"]
# Test tiers are folders, and this is the one place that marks them: each test gets its tier's name as a
# marker (pytest -m unit, -m "not book"). unit: tiny random models, no kernel, cluster, make or book build
# (tests/unit/conftest.py refuses them); integration: the real model, kernels, clusters, subprocesses;
# book: the chapters executed, the book built and checked in a browser.
TIERS = ("unit", "integration", "book")


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = next((p.name for p in item.path.parents if p.name in TIERS), None)
        if tier is None:
            raise pytest.UsageError(f"{item.nodeid}: every test lives in one tier's folder: {', '.join(TIERS)}")
        item.add_marker(tier)


@pytest.fixture(scope="session")
def tiny_lm():
    from identifiability.models import random_model

    return random_model("bert", seed=0)


@pytest.fixture(scope="session")
def tiny_model_folder(tmp_path_factory):
    """``tiny_model_folder(seed=0, name="tiny-bert")``: the folder of a tiny random BERT saved as a reader's
    model is (safetensors weights, config, tokenizer), made once per (seed, name) in the session. Tests only
    read it; a folder's results are filed under its name plus its content key."""
    from identifiability.models import random_model

    made: dict[tuple[int, str], Path] = {}

    def make(seed: int = 0, name: str = "tiny-bert") -> Path:
        if (seed, name) not in made:
            folder = tmp_path_factory.mktemp("models") / name
            lm = random_model("bert", seed=seed)
            lm.model.save_pretrained(folder, safe_serialization=True)
            lm.tokenizer.save_pretrained(folder)
            made[seed, name] = folder
        return made[seed, name]

    return make


@pytest.fixture(scope="module")
def module_data_folder(tmp_path_factory):
    """A data folder (caches, results) of the test module's own: IDENTIFIABILITY_DATA points at it."""
    with pytest.MonkeyPatch.context() as mp:
        folder = tmp_path_factory.mktemp("data")
        mp.setenv("IDENTIFIABILITY_DATA", str(folder))
        yield folder


@pytest.fixture(scope="session", params=ARCHITECTURES)
def tiny_any(request):
    """A tiny random model of every registered architecture."""
    from identifiability.models import random_model

    return random_model(request.param, seed=0)


@pytest.fixture(scope="session")
def real_lm():
    from identifiability.models import load_model

    return load_model()


@pytest.fixture(scope="session")
def sentences():
    return [
        "The cat sat on the mat.",
        "Hundreds of people have been forced to vacate their homes as strong winds pushed a huge bushfire towards "
        "the town.",
        "A new blaze near Goulburn has forced the closure of the Hume Highway.",
    ]


@pytest.fixture(scope="session")
def chapter_run(tmp_path_factory):
    """chapter_run(stem) executes the chapter once per session, with its quick parameters from the chapter
    contract, and returns its results dict."""

    from identifiability import paths
    from identifiability.chapters import CHAPTERS
    from identifiability.execution import run_notebook
    from identifiability.fileio import read_json

    out = tmp_path_factory.mktemp("chapters")
    done: dict[str, dict] = {}

    def run(stem: str) -> dict:
        if stem not in done:
            params = {"results_dir": str(out / "results"), **CHAPTERS[stem].quick}
            if stem == "09_across_models":  # its table: the chapters run so far, filed as a data folder files them
                import shutil

                filed = out / "data" / "results" / paths.DEFAULT_MODEL / paths.DEFAULT_CORPUS
                filed.mkdir(parents=True, exist_ok=True)
                for f in (out / "results").glob("0*.json"):
                    shutil.copy2(f, filed / f.name)
                params["data_folder"] = str(out / "data")
            run_notebook(CHAPTERS[stem].source, out / "notebooks", params, progress=False)
            done[stem] = read_json(out / "results" / f"{stem}.json")
        return done[stem]

    run.dir = out
    return run


@pytest.fixture(scope="session")
def quick_params():
    """{stem: the small parameters of the chapter's one real execution in the tests} (the chapter contract's
    ``quick``)."""
    from identifiability.chapters import CHAPTERS

    return {stem: spec.quick for stem, spec in CHAPTERS.items()}
