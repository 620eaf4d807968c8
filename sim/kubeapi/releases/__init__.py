"""Kubernetes releases as the emulator presents them: which optional APIs each serves, its
feature gates (``--feature-gates``) and API switches (``--runtime-config``), and the fields a
disabled gate drops on write. docs/kubeapi.md has the tables and where each fact comes from."""

from sim.kubeapi.releases.errors import ReleaseError
from sim.kubeapi.releases.release import NEWEST_RELEASE, SUPPORTED_RELEASES, Release

__all__ = ["NEWEST_RELEASE", "SUPPORTED_RELEASES", "Release", "ReleaseError"]
