"""Kubernetes resource quantities ("100m", "2Gi", "1.5", "1e3") as integer milli-units.

Every amount the simulated scheduler and the clique allocator add or compare is kept in
milli-units, rounded up, as the API server's own arithmetic does for fractional values; so
"100m" CPU is 100 and "1Gi" of memory is 1073741824000.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>\d+(?:\.\d*)?|\.\d+)"
    r"(?:(?P<exponent>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


class QuantityError(ValueError):
    """Text that is not a Kubernetes quantity."""


@lru_cache(maxsize=4096)
def parse_milli(text: str) -> int:
    """The quantity in milli-units, rounded up; raises QuantityError."""
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise QuantityError(f"not a quantity: {text!r}")
    value = Fraction(match["number"])
    if match["exponent"]:
        value *= Fraction(10) ** int(match["exponent"][1:])
    else:
        suffix = match["suffix"] or ""
        value *= _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    milli = math.ceil(value * 1000)
    return -milli if match["sign"] == "-" else milli


def parse_milli_or_zero(text: str) -> int:
    """Like :func:`parse_milli`, but an unreadable value counts as nothing."""
    try:
        return parse_milli(text)
    except QuantityError:
        return 0


def format_milli(milli: int) -> str:
    """Readable text for a milli-unit amount ("1500m" or "2")."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
