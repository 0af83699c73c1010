"""How the book prints a number: three significant digits with their trailing zeros, powers of ten written
out, shares as percentages. A leaf: statistics (:class:`identifiability.base.stats.Interval`), verdicts and pages
all print numbers this one way."""

from __future__ import annotations

import math
import numbers

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def fmt(x: float | int | None, integer: bool = False) -> str:
    """Every number a verdict prints: three significant digits with their trailing zeros ('1.00', '0.0395',
    '-0.287'), integers whole, powers of ten written out ('1.23 × 10⁻⁵'), '—' for none or NaN."""
    if x is None or isinstance(x, bool):
        return "—" if x is None else str(x)
    if isinstance(x, float) and not math.isfinite(x):
        return "—"
    if integer or isinstance(x, numbers.Integral):
        return str(int(round(x)))
    rounded = float(f"{x:.3g}")
    if rounded == 0:
        return "0"
    exponent = math.floor(math.log10(abs(rounded)))
    if -3 <= exponent < 6:
        return f"{rounded:.{max(0, 2 - exponent)}f}"
    return times_ten(f"{rounded / 10**exponent:.2f}", exponent)


def times_ten(mantissa: str, exponent: int) -> str:
    """A number in powers of ten as a reader writes it: ('1.23', -5) -> '1.23 × 10⁻⁵'."""
    return f"{mantissa} × 10{str(exponent).translate(_SUPERSCRIPT)}"


def pct(share: float) -> str:
    """A measured share as a percentage with the same three significant digits: '66.7%'."""
    return fmt(100 * share) + "%"
