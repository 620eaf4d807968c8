"""Which optional API versions a Kubernetes release serves, and ``--runtime-config``.

:data:`OPTIONAL_VERSIONS` lists the resources of ``resource.k8s.io`` by version, with the release
that added each (from each release's published OpenAPI; docs/kubeapi.md cites it). A GA version
is served by default, an alpha or beta one only when ``--runtime-config`` turns it on: since
Kubernetes 1.24 no new beta API is on by default (KEP-3136), and DRA's beta versions
(``v1beta1``, ``v1beta2``) and alpha ``v1alpha3`` need that opt-in on 1.34 and later.

``--runtime-config`` keys, as kube-apiserver takes them: ``api/all``, ``api/ga``, ``api/beta``,
``api/alpha``, ``<group>/<version>`` and ``<group>/<version>/<resource>``, each ``=true`` or
``=false`` (a key alone means true); a more specific key wins. Every other group the emulator
serves has only its GA ``v1`` and cannot be switched here (a setting for it is refused).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import msgspec

from sim.kubeapi.releases.errors import ReleaseError
from sim.kubeapi.releases.flagtext import flag_entries

DRA_GROUP = "resource.k8s.io"

Stage = Literal["GA", "BETA", "ALPHA"]


class OptionalVersion(msgspec.Struct, frozen=True):
    """One resource of an optional group version, and the release that added it."""

    group: str
    version: str
    plural: str
    since: int


_CORE_DRA = ("deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices")

OPTIONAL_VERSIONS: tuple[OptionalVersion, ...] = (
    *(OptionalVersion(DRA_GROUP, "v1", plural, 34) for plural in _CORE_DRA),
    OptionalVersion(DRA_GROUP, "v1", "devicetaintrules", 37),
    *(OptionalVersion(DRA_GROUP, "v1beta1", plural, 32) for plural in _CORE_DRA),
    *(OptionalVersion(DRA_GROUP, "v1beta2", plural, 33) for plural in _CORE_DRA),
    OptionalVersion(DRA_GROUP, "v1beta2", "devicetaintrules", 36),
    OptionalVersion(DRA_GROUP, "v1alpha3", "devicetaintrules", 33),
)

ServedKey = tuple[str, str, str]
"""(group, version, plural)."""


def version_stage(version: str) -> Stage:
    if "alpha" in version:
        return "ALPHA"
    if "beta" in version:
        return "BETA"
    return "GA"


def parse_runtime_config(text: str) -> dict[str, bool]:
    """``key=true,key=false,key`` into key -> bool."""
    settings: dict[str, bool] = {}
    for key, value in flag_entries(text):
        if value is None or value.lower() == "true":
            settings[key] = True
        elif value.lower() == "false":
            settings[key] = False
        else:
            raise ReleaseError(f"invalid value of {key}: {value}, err: expected true or false")
    return settings


def served_resources(minor: int, runtime_config: Mapping[str, bool]) -> frozenset[ServedKey]:
    """The optional resources the release serves with these ``--runtime-config`` settings."""
    known = [entry for entry in OPTIONAL_VERSIONS if entry.since <= minor]
    _check_keys(minor, known, runtime_config)

    def enabled(entry: OptionalVersion) -> bool:
        stage = version_stage(entry.version)
        on = stage == "GA"
        for key in ("api/all", f"api/{stage.lower()}"):
            if key in runtime_config:
                on = runtime_config[key]
        group_version = f"{entry.group}/{entry.version}"
        on = runtime_config.get(group_version, on)
        return runtime_config.get(f"{group_version}/{entry.plural}", on)

    return frozenset((e.group, e.version, e.plural) for e in known if enabled(e))


def _check_keys(
    minor: int, known: list[OptionalVersion], runtime_config: Mapping[str, bool]
) -> None:
    group_versions = {f"{e.group}/{e.version}" for e in known}
    resources = {f"{e.group}/{e.version}/{e.plural}" for e in known}
    for key in runtime_config:
        if key in ("api/all", "api/ga", "api/beta", "api/alpha"):
            continue
        if key in group_versions or key in resources:
            continue
        if not key.startswith(f"{DRA_GROUP}/"):
            raise ReleaseError(
                f"--runtime-config {key}: only {DRA_GROUP} versions can be switched here "
                "(every other group serves its v1 only)"
            )
        versions = ", ".join(sorted(group_versions))
        raise ReleaseError(
            f"--runtime-config {key}: Kubernetes 1.{minor} has no such API (its {DRA_GROUP} "
            f"versions: {versions})"
        )
