"""Plain-text tables and ages, as kubectl prints them (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns two spaces apart, the header first; no trailing blanks."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=False)]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (headers, *rows)
    ]


def age(moment: datetime, now: datetime) -> str:
    """``45s``, ``12m``, ``3h``."""
    seconds = max(0, int((now - moment).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"
