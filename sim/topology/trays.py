"""Tray sets written as ranges: ``"0-8"``, ``"0-3,9,12-17"`` or a single ``5``."""

from __future__ import annotations


def parse_trays(text: str | int) -> tuple[int, ...]:
    """The tray indices ``text`` names, ascending. ValueError says what is wrong."""
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"tray {text} is negative")
        return (text,)
    trays: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            low = int(first)
            high = int(last) if dash else low
        except ValueError:
            raise ValueError(f"{part.strip()!r} is not a tray or a range like 0-8") from None
        if low > high:
            raise ValueError(f"range {low}-{high} runs backwards")
        overlap = trays.intersection(range(low, high + 1))
        if overlap:
            raise ValueError(f"tray {min(overlap)} is listed twice")
        trays.update(range(low, high + 1))
    return tuple(sorted(trays))
