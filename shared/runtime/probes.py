"""Readiness: a set of named checks that must all pass before a service takes traffic."""

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
        self._stopping = False

    def add(self, name: str, check: Callable[[], bool]) -> None:
        """Register (or replace) the check called ``name``."""
        self._checks[name] = check

    def mark_stopping(self) -> None:
        self._stopping = True

    def failing(self) -> list[str]:
        """Names of the checks that do not pass now."""
        failing = ["stopping"] if self._stopping else []
        for name, check in self._checks.items():
            try:
                ok = check()
            except Exception:  # a broken check means not ready, never a crashed probe
                ok = False
            if not ok:
                failing.append(name)
        return failing

    @property
    def ready(self) -> bool:
        return not self.failing()
