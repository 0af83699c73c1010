"""The book's one rank rule, and the thread setting that small-matrix work runs under."""

import torch

from identifiability.base import linalg


def test_rank_rule_counts_structure_not_rounding():
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        # rank 5 by construction, formed in ``dtype``: rounding noise sits near eps, far below the tolerance
        m = torch.randn(40, 5, generator=g, dtype=torch.float64) @ torch.randn(5, 32, generator=g, dtype=torch.float64)
        m = m.to(dtype)
        s = torch.linalg.svdvals(m)
        assert int(linalg.numerical_rank(s, linalg.matrix_rtol(m))) == 5
        assert linalg.matrix_rtol(m) == 40 * torch.finfo(dtype).eps
        # an absolute tolerance of 1e-10 counts float32 rounding noise as rank (the trap the rule avoids)
        if dtype == torch.float32:
            assert int((s > 1e-10).sum()) > 5


def test_one_thread_restores_the_setting():
    before = torch.get_num_threads()

    @linalg.one_thread
    def inner():
        return torch.get_num_threads()

    assert inner() == 1 and torch.get_num_threads() == before
    with linalg.one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
