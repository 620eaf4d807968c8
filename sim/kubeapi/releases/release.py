"""One Kubernetes release as the emulator presents it: the release, its gates, what it serves.

    release = Release.of("1.36", feature_gates={"DRADeviceTaintRules": True},
                         runtime_config={"resource.k8s.io/v1beta2": True})
    release.enabled("DRADeviceTaints")                                  # True (beta, on)
    release.serves("resource.k8s.io", "v1beta2", "devicetaintrules")     # True

:meth:`Release.of` refuses what kube-apiserver refuses at start (an unknown release, gate or
API; a locked gate set against its lock) with a :class:`ReleaseError` whose message says why.
Only the optional parts are listed in :attr:`Release.served`: every other resource the emulator
has is served by every release.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import msgspec

from sim.kubeapi.releases.apis import ServedKey, served_resources
from sim.kubeapi.releases.errors import ReleaseError
from sim.kubeapi.releases.gates import resolve_gates

SUPPORTED_RELEASES = ("1.34", "1.35", "1.36", "1.37")
NEWEST_RELEASE = SUPPORTED_RELEASES[-1]


def release_minor(version: str) -> int:
    """The minor of ``1.N`` (also ``v1.N`` and ``1.N.P``), one of :data:`SUPPORTED_RELEASES`."""
    match = re.fullmatch(r"v?1\.(\d+)(?:\.\d+)?", version.strip())
    if match is None or f"1.{match.group(1)}" not in SUPPORTED_RELEASES:
        raise ReleaseError(
            f"Kubernetes version {version!r} is not emulated; choose one of "
            + ", ".join(SUPPORTED_RELEASES)
        )
    return int(match.group(1))


class Release(msgspec.Struct, frozen=True, kw_only=True):
    """A release with its feature gates resolved and its optional APIs chosen."""

    minor: int
    gates: dict[str, bool]
    served: frozenset[ServedKey]

    @classmethod
    def of(
        cls,
        version: str = NEWEST_RELEASE,
        *,
        feature_gates: Mapping[str, bool] | None = None,
        runtime_config: Mapping[str, bool] | None = None,
    ) -> Release:
        minor = release_minor(version)
        return cls(
            minor=minor,
            gates=resolve_gates(minor, feature_gates or {}),
            served=served_resources(minor, runtime_config or {}),
        )

    @property
    def version(self) -> str:
        """``1.N``."""
        return f"1.{self.minor}"

    def enabled(self, gate: str) -> bool:
        """The gate's value (False for a gate the release does not have)."""
        return self.gates.get(gate, False)

    def knows(self, gate: str) -> bool:
        return gate in self.gates

    def serves(self, group: str, version: str, plural: str) -> bool:
        """Whether the optional resource is served (see the module docstring)."""
        return (group, version, plural) in self.served

    def served_versions(self, group: str, plural: str) -> list[str]:
        """The versions at which the optional resource is served."""
        return [v for g, v, p in self.served if g == group and p == plural]
