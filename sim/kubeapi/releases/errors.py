"""The one error of release settings."""

from __future__ import annotations


class ReleaseError(ValueError):
    """A release, feature gate or runtime-config setting kube-apiserver would refuse at start;
    the message is the line it prints."""
