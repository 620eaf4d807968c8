"""Readiness: a set of named checks that must all pass before a service takes traffic, and the
conditions that say the service works degraded without making it unready."""

from __future__ import annotations

from collections.abc import Callable


class Readiness:
    """Named readiness checks. The service is ready when every check returns True.

    Components register a check for each dependency they need (NATS connected, informer caches
    synced, leadership held ...). ``mark_stopping`` makes the service unready at once when
    shutdown begins, so that traffic drains before the process stops.
    """

    def __init__(self) -> None:
        self._checks: dict[str, Callable[[], bool]] = {}
        self._conditions: dict[str, Callable[[], bool]] = {}
        self._stopping = False

    def add(self, name: str, check: Callable[[], bool]) -> None:
        """Register (or replace) the check called ``name``."""
        self._checks[name] = check

    def add_condition(self, name: str, check: Callable[[], bool]) -> None:
        """Register (or replace) a condition ``name`` that is reported, never required: while
        it does not hold, /readyz lists it under ``degraded`` and still answers ready (NATS,
        the event feed, is one: the service works without it)."""
        self._conditions[name] = check

    def degraded(self) -> list[str]:
        """Names of the conditions that do not hold now."""
        return [name for name, check in self._conditions.items() if not _holds(check)]

    def mark_stopping(self) -> None:
        self._stopping = True

    def failing(self) -> list[str]:
        """Names of the checks that do not pass now."""
        failing = ["stopping"] if self._stopping else []
        failing += [name for name, check in self._checks.items() if not _holds(check)]
        return failing

    @property
    def ready(self) -> bool:
        return not self.failing()


def _holds(check: Callable[[], bool]) -> bool:
    try:
        return bool(check())
    except Exception:  # a broken check means not ready, never a crashed probe
        return False
