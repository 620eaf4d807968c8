"""A ServiceAccount token read from a file on every connect, for NATS auth callout.

On Kubernetes the file is a projected ServiceAccount token: the kubelet writes a fresh one
before the old one expires. nats-py calls :meth:`TokenFile.__call__` for each CONNECT, first
connect and every reconnect, so a connection that the server closes when its user expires comes
back with the token the kubelet wrote meanwhile.
"""

from __future__ import annotations

import logging
from pathlib import Path

from shared.errors import ConfigError

log = logging.getLogger("cdo.bus")


class TokenFile:
    """The token in ``path`` (surrounding whitespace removed); ``variable`` names the setting
    in errors."""

    def __init__(self, path: str, *, variable: str) -> None:
        self.path = Path(path)
        self.variable = variable
        self._last = self._read_checked()

    def _read_checked(self) -> str:
        try:
            token = self.path.read_text().strip()
        except OSError as exc:
            raise ConfigError(f"{self.variable}: cannot read {self.path}: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{self.variable}: {self.path} is not a text token") from exc
        if not token:
            raise ConfigError(f"{self.variable}: {self.path} is empty")
        return token

    def __call__(self) -> str:
        """The current token; the last good one when the file cannot be read right now (the
        server then refuses it once it has expired, and the next reconnect tries again)."""
        try:
            self._last = self._read_checked()
        except ConfigError as exc:
            log.warning("nats token not read", extra={"error": str(exc)})
        return self._last
