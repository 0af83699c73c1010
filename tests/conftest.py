"""Shared fixtures. Tiny random models are built from configs (no download); ``real_lm`` is the embedded
all-MiniLM-L6-v2, loaded once per session."""

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch.set_num_threads(min(2, os.cpu_count() or 1))

ARCHITECTURES = ["bert", "roberta", "electra", "distilbert", "albert", "gpt2"]


@pytest.fixture(scope="session")
def tiny_lm():
    from identifiability.models import random_model

    return random_model("bert", seed=0)


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
        "Hundreds of people have been forced to vacate their homes as strong winds pushed a huge bushfire towards the town.",
        "A new blaze near Goulburn has forced the closure of the Hume Highway.",
    ]
