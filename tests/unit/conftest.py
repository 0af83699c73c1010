"""The unit tier's promise, enforced: a unit test starts no kernel, no Dask cluster, no `make`, no book build
(tests that need them belong in tests/integration or tests/book). Each of those entry points raises here."""

from __future__ import annotations

import subprocess

import pytest

FORBIDDEN_PROGRAMS = ("make", "jupyter-book", "jb", "sphinx-build", "dask")


class UnitTierViolation(AssertionError):
    pass


def _refuse(what: str):
    def refuse(*args, **kwargs):
        raise UnitTierViolation(f"the unit tier starts no {what}: move this test to tests/integration")

    return refuse


@pytest.fixture(autouse=True)
def _no_processes_in_the_unit_tier(monkeypatch):
    import distributed
    import jupyter_client
    import papermill

    monkeypatch.setattr(papermill, "execute_notebook", _refuse("kernel (papermill)"))
    monkeypatch.setattr(jupyter_client.KernelManager, "start_kernel", _refuse("kernel"))
    monkeypatch.setattr(distributed, "LocalCluster", _refuse("Dask cluster"))
    popen_init = subprocess.Popen.__init__

    def guarded(self, args, *a, **kw):
        program = (args if isinstance(args, str) else str(args[0])).split()[0].rsplit("/", 1)[-1]
        if program in FORBIDDEN_PROGRAMS:
            raise UnitTierViolation(f"the unit tier runs no {program!r}: move this test to tests/integration")
        popen_init(self, args, *a, **kw)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded)
