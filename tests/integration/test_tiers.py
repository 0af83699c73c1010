"""The tier markers select what the Makefile's targets say they do (tests/conftest.py marks each tier)."""

from __future__ import annotations

import re
import subprocess
import sys

from identifiability.base import paths


def test_the_unit_marker_selects_the_unit_tier_and_no_other():
    """make test-fast runs `-m unit tests/unit`: it once selected 5 of 1,269 tests (none of this module's unit
    file), the marker being added after `-m` had chosen. A unit module and this one, collected with -m unit:
    every test of the first, none of this one (the whole unit tier would take seconds more to collect)."""
    unit = "tests/unit/test_verdicts.py"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "unit", unit, __file__],
        capture_output=True,
        text=True,
        cwd=paths.source_root(),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    selected = [line for line in proc.stdout.splitlines() if "::" in line]
    assert selected and all(line.startswith(f"{unit}::") for line in selected), selected[:5]
    counts = re.search(r"(\d+)/(\d+) tests collected \((\d+) deselected\)", proc.stdout)
    assert counts and counts.groups() == (str(len(selected)), str(len(selected) + 1), "1"), proc.stdout[-300:]
