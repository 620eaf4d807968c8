"""The exceptions of the kubelet gRPC plumbing.

    CdoError (shared.errors)
    └── KubeletApiError              something went wrong between a kubelet and a DRA plugin
        ├── PluginNotRegisteredError no registered plugin serves the driver (any more)
        ├── PluginCallError          a DRA call to a registered plugin failed as a whole
        └── RegistrationRejectedError the kubelet side refused a plugin's registration

A socket path that does not fit a unix socket address raises ``shared.errors.ConfigError``.
"""

from __future__ import annotations

from shared.errors import CdoError


class KubeletApiError(CdoError):
    """Base of the errors raised by ``shared.kubeletapi``."""


class PluginNotRegisteredError(KubeletApiError):
    """No registered plugin serves this DRA driver, or the one that did has gone away."""

    def __init__(self, driver_name: str) -> None:
        super().__init__(f"DRA driver {driver_name!r} has no registered kubelet plugin")
        self.driver_name = driver_name


class PluginCallError(KubeletApiError):
    """A gRPC call to a plugin failed as a whole (the kubelet retries such calls).

    ``code`` is the gRPC status code name (``"UNAVAILABLE"``, ``"DEADLINE_EXCEEDED"`` ...).
    Failures of single claims are not errors: they come back inside the per-claim results.
    """

    def __init__(self, *, driver_name: str, method: str, code: str, details: str) -> None:
        super().__init__(f"{method} on DRA driver {driver_name!r} failed: {code}: {details}")
        self.driver_name = driver_name
        self.method = method
        self.code = code
        self.details = details


class RegistrationRejectedError(KubeletApiError):
    """The kubelet side refused a plugin; the message is what the plugin is told."""
