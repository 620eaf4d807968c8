"""The exceptions cdo code raises on purpose.

CdoError
├── ConfigError          settings or input that cannot be used; names the field
├── FatalError           the process cannot continue; the supervisor exits non-zero
│   ├── BusClosedError   the NATS connection closed for good
│   └── LeadershipLostError  the leader Lease was lost; only a new process may lead again
├── BusUnavailableError  NATS is not connected now; what needs it is skipped or waits
├── EventError           an incoming message that cannot become an event; it is dropped
│   ├── MalformedEventError   headers or payload do not decode
│   └── UnknownEventTypeError a ce-type this build does not know
├── TerminalError        a reconcile that retrying cannot fix; recorded as a condition, not retried
├── QueueShutDownError   the work queue is shut down; workers stop taking keys
├── KubeApiError         a non-2xx answer from the Kubernetes API (shared/kube/errors.py)
└── KubeletApiError      kubelet gRPC failures (shared/kubeletapi/errors.py)
"""

from __future__ import annotations


class CdoError(Exception):
    """Base of every exception cdo raises on purpose."""


class ConfigError(CdoError):
    """Settings or input that cannot be used. The message names the offending field."""


class FatalError(CdoError):
    """The process cannot continue; the supervisor stops everything and exits non-zero."""


class BusClosedError(FatalError):
    """A short-lived client's NATS connection could not be made or closed for good (its
    reconnect budget ran out). A service's connection never closes by itself."""


class BusUnavailableError(CdoError):
    """NATS is not connected now (it may be later): reading history or snapshots is skipped,
    events wait in the outbox. Never a reason to stop."""


class LeadershipLostError(FatalError):
    """This process lost its leader Lease. It exits so that it never writes as a stale leader."""


class EventError(CdoError):
    """An incoming message that cannot be turned into an event.

    ``reason`` is a short, low-cardinality label used in the dropped-messages metric.
    """

    reason = "invalid"


class MalformedEventError(EventError):
    """Headers or payload of a message do not decode into the announced event type."""

    def __init__(self, message: str, *, reason: str = "malformed") -> None:
        super().__init__(message)
        self.reason = reason


class UnknownEventTypeError(EventError):
    """A message whose ce-type this build does not know."""

    reason = "unknown_type"


class TerminalError(CdoError):
    """A reconcile failed in a way that retrying the same state cannot fix.

    The reconciler records why (a condition on the object, an Event) before raising; the reconcile
    runner then logs and counts it and does not retry. A later change of the object queues it
    again. ``reason`` is a short CamelCase label (the condition's reason), low-cardinality.
    """

    def __init__(self, message: str, *, reason: str = "Terminal") -> None:
        super().__init__(message)
        self.reason = reason


class QueueShutDownError(CdoError):
    """The work queue is shut down: no key will be handed out any more."""
