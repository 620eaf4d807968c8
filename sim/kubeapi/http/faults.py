"""Fault injection for tests: the failures a controller must survive on a real cluster.

All methods are safe to call from another thread than the server's (tests driving the
emulator through a ``ServerThread``).

- ``expire_next_watch()``: the next watch(es) answer one ``ERROR`` event with 410 Expired;
- ``drop_watches()``: end every open watch stream now (clients see the stream close);
- ``fail_next(n, code=409|429|500|503|504)``: the next ``n`` matching requests fail with
  that status (429 carries ``Retry-After``, 503 too when ``retry_after`` is given, as the real
  server's overload answers do);
- ``set_latency(seconds)``: delay every matching request;
- ``compact()`` lives on the store handle: it forgets history, so old resourceVersions 410.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass

from sim.kubeapi.machinery import errors


@dataclass
class _Failure:
    remaining: int
    code: int
    retry_after: int | None  # None: the code's usual (1 s for 429 and 504, none for 503)
    verbs: frozenset[str] | None
    resource: str | None
    message: str | None


@dataclass
class _Latency:
    seconds: float
    verbs: frozenset[str] | None
    resource: str | None


def _matches(verbs: frozenset[str] | None, resource: str | None, verb: str, plural: str) -> bool:
    return (verbs is None or verb in verbs) and (resource is None or resource == plural)


class Faults:
    """Pending injected faults; consulted by the HTTP layer on every API request."""

    def __init__(self, *, drop: Callable[[str | None], None]) -> None:
        self._lock = threading.Lock()
        self._failures: list[_Failure] = []
        self._expire: list[tuple[int, str | None]] = []
        self._latency: list[_Latency] = []
        self._drop = drop

    def fail_next(
        self,
        count: int = 1,
        *,
        code: int = 500,
        retry_after: int | None = None,
        verbs: Collection[str] | None = None,
        resource: str | None = None,
        message: str | None = None,
    ) -> None:
        """Make the next ``count`` requests (optionally only these verbs / this resource
        plural) fail with ``code``: 409 Conflict, 429 TooManyRequests, 500, 503 or 504."""
        with self._lock:
            self._failures.append(
                _Failure(
                    count,
                    code,
                    retry_after,
                    frozenset(verbs) if verbs else None,
                    resource,
                    message,
                )
            )

    def expire_next_watch(self, count: int = 1, *, resource: str | None = None) -> None:
        with self._lock:
            self._expire.append((count, resource))

    def drop_watches(self, resource_storage: str | None = None) -> None:
        """Close open watch streams (of one stored resource, e.g. ``"pods"`` or
        ``"apps/deployments"``, or all)."""
        self._drop(resource_storage)

    def set_latency(
        self, seconds: float, *, verbs: Collection[str] | None = None, resource: str | None = None
    ) -> None:
        with self._lock:
            self._latency.append(_Latency(seconds, frozenset(verbs) if verbs else None, resource))

    def clear(self) -> None:
        with self._lock:
            self._failures.clear()
            self._expire.clear()
            self._latency.clear()

    # -- consulted by the server ----------------------------------------------------------------

    def latency(self, verb: str, plural: str) -> float:
        with self._lock:
            return sum(
                d.seconds for d in self._latency if _matches(d.verbs, d.resource, verb, plural)
            )

    def take_failure(self, verb: str, plural: str, group: str, name: str) -> errors.ApiError | None:
        with self._lock:
            for failure in self._failures:
                if failure.remaining > 0 and _matches(
                    failure.verbs, failure.resource, verb, plural
                ):
                    failure.remaining -= 1
                    break
            else:
                return None
            self._failures = [f for f in self._failures if f.remaining > 0]
        return _error(failure, plural, group, name)

    def take_expired_watch(self, plural: str) -> bool:
        with self._lock:
            for i, (count, resource) in enumerate(self._expire):
                if resource is None or resource == plural:
                    if count <= 1:
                        del self._expire[i]
                    else:
                        self._expire[i] = (count - 1, resource)
                    return True
        return False


def _error(failure: _Failure, plural: str, group: str, name: str) -> errors.ApiError:
    code = failure.code
    if code == 409:
        if failure.message:
            return errors.conflict(plural, group, name, failure.message)
        return errors.conflict(plural, group, name)
    if code == 429:
        return errors.too_many_requests(
            failure.message
            or "the server has received too many requests and has asked us to try again later",
            1 if failure.retry_after is None else failure.retry_after,
        )
    if code == 503:
        seconds = failure.retry_after
        return errors.ApiError(
            code=503,
            reason="ServiceUnavailable",
            message=failure.message or "the server is currently unable to handle the request",
            details={"retryAfterSeconds": seconds} if seconds else None,
            headers={"Retry-After": str(seconds)} if seconds else None,
        )
    if code == 504:
        return errors.timeout(
            failure.message or "request did not complete within requested timeout",
            1 if failure.retry_after is None else failure.retry_after,
        )
    return errors.internal_error(failure.message or "injected failure")
