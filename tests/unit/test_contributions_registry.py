"""The registry of context-mixing measures: one shape, one name each, a source the book's references hold."""

import pytest
import torch
from pybtex.database import parse_file

from identifiability.base import paths
from identifiability.contributions import MEASURES, register, rollout
from identifiability.contributions.registry import KINDS


def test_every_measure_cites_an_entry_of_the_books_references():
    entries = parse_file(paths.source_root() / "references.bib").entries  # a syntax error fails here
    assert {m.reference for m in MEASURES.values()} <= set(entries)
    assert all(m.kind in KINDS and m.label for m in MEASURES.values())


def test_a_name_is_registered_once_and_a_kind_must_be_known():
    with pytest.raises(ValueError, match="twice"):
        register("raw", "again", "x", True, "attention")(lambda lm, tr: None)
    with pytest.raises(ValueError, match="kind must be one of"):
        register("new", "new", "x", True, "vibes")


def test_rollout_composes_layers_in_order():
    a = torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=torch.float64)
    b = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    c = torch.stack([torch.eye(2, dtype=torch.float64), a, b])
    r = rollout(c)
    assert torch.equal(r[0], torch.eye(2, dtype=torch.float64)) and torch.equal(r[1], a) and torch.equal(r[2], b @ a)
