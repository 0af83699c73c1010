"""The tier markers select what the Makefile's targets say they do (tests/conftest.py marks each tier)."""

from __future__ import annotations

import subprocess
import sys

from identifiability import paths


def test_the_unit_marker_selects_the_unit_tier_and_no_other():
    """make test-fast runs `-m unit tests/unit`: it once selected 5 of 1,269 tests, the marker being added after
    `-m` had chosen."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "unit", "tests/unit", __file__],
        capture_output=True,
        text=True,
        cwd=paths.source_root(),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    selected = [line for line in proc.stdout.splitlines() if "::" in line]
    assert len(selected) > 1000 and all(line.startswith("tests/unit/") for line in selected), selected[:5]
