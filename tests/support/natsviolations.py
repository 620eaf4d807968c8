"""The permission violations nats-server reports to one connection."""

from __future__ import annotations


class Violations:
    """The subjects the server refused one connection, in order, as nats-py reports them to
    its ``error_cb`` (lowercased): pass :meth:`on_error` as the connection's ``error_cb``."""

    def __init__(self) -> None:
        self.subjects: list[str] = []

    async def on_error(self, exc: Exception) -> None:
        text = str(exc)
        if "permissions violation" in text.lower():
            self.subjects.append(text.rsplit(" to ", 1)[-1].strip().strip('"'))

    def count(self, expected: int) -> bool:
        """Whether exactly ``expected`` refusals came (for a bounded wait)."""
        return len(self.subjects) == expected
