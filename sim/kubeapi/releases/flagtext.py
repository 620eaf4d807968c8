"""The text of a ``key=value,key=value`` flag, as kube-apiserver's map flags are written."""

from __future__ import annotations


def flag_entries(text: str) -> list[tuple[str, str | None]]:
    """(key, value) per comma-separated entry, blanks around both removed; value None where
    the entry has no ``=``; empty entries skipped."""
    entries: list[tuple[str, str | None]] = []
    for entry in text.split(","):
        if entry.strip():
            key, sep, value = entry.partition("=")
            entries.append((key.strip(), value.strip() if sep else None))
    return entries
