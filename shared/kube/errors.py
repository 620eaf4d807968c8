"""Errors from the Kubernetes API, carrying the Status the server answered with."""

from __future__ import annotations

import msgspec

from shared.errors import CdoError
from shared.kube.meta import Status


class KubeApiError(CdoError):
    """A non-2xx answer from the API server (or none at all: ``code`` 0)."""

    def __init__(self, *, code: int, reason: str, message: str, retry_after_s: float = 0) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.retry_after_s = retry_after_s

    @classmethod
    def from_response(
        cls, *, code: int, body: bytes, retry_after: str | None, what: str
    ) -> KubeApiError:
        try:
            status = msgspec.json.decode(body, type=Status)
        except (msgspec.DecodeError, msgspec.ValidationError):
            status = Status(code=code, message=body[:200].decode(errors="replace"))
        seconds = float(retry_after) if retry_after and retry_after.isdigit() else 0.0
        if not seconds and status.details is not None:
            seconds = float(status.details.retry_after_seconds)
        return cls(
            code=code,
            reason=status.reason or "Unknown",
            message=f"{what}: {status.message or 'no message'}",
            retry_after_s=seconds,
        )

    @property
    def not_found(self) -> bool:
        return self.code == 404

    @property
    def conflict(self) -> bool:
        """Optimistic-concurrency failure (stale resourceVersion): re-read and retry."""
        return self.code == 409 and self.reason == "Conflict"

    @property
    def already_exists(self) -> bool:
        return self.code == 409 and self.reason == "AlreadyExists"

    @property
    def expired(self) -> bool:
        """The resourceVersion is too old for the watch cache (410 Gone): relist."""
        return self.code == 410

    @property
    def retryable(self) -> bool:
        """Worth retrying after a pause: throttling, server trouble, no answer."""
        return self.code in (0, 429) or self.code >= 500
