"""Feature gates of the DRA family, per Kubernetes release, and ``--feature-gates`` as
kube-apiserver reads it.

:data:`GATE_HISTORY` is each gate's versioned spec: from which release on it had which stage,
default and lock (the form of kube-apiserver's own versioned feature table; docs/kubeapi.md
cites where each row was checked). :func:`gate_specs` is the table at one release,
:func:`resolve_gates` applies overrides to its defaults as kube-apiserver does, with its errors:
a gate the release does not know is ``unrecognized feature gate: <name>``, a gate locked to its
default cannot be set to the other value. ``AllAlpha`` and ``AllBeta`` set every alpha (beta)
gate of the release, explicit settings of single gates win over them.

Only the gates of dynamic resource allocation are modelled: every other gate of kube-apiserver
is refused as unrecognized here (docs/kubeapi.md says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import msgspec

from sim.kubeapi.releases.errors import ReleaseError
from sim.kubeapi.releases.flagtext import flag_entries

Stage = Literal["ALPHA", "BETA", "GA"]

ALL_ALPHA = "AllAlpha"
ALL_BETA = "AllBeta"


class GateSpec(msgspec.Struct, frozen=True):
    """A gate's stage, default and lock at some release."""

    stage: Stage
    default: bool
    locked: bool = False


def _alpha() -> GateSpec:
    return GateSpec("ALPHA", False)


def _beta(default: bool = True) -> GateSpec:
    return GateSpec("BETA", default)


def _ga(*, locked: bool) -> GateSpec:
    return GateSpec("GA", True, locked)


GATE_HISTORY: dict[str, tuple[tuple[int, GateSpec], ...]] = {
    "DynamicResourceAllocation": ((34, _ga(locked=False)), (35, _ga(locked=True))),
    "DRAAdminAccess": ((34, _beta()), (36, _ga(locked=True))),
    "DRAPrioritizedList": ((34, _beta()), (36, _ga(locked=False)), (37, _ga(locked=True))),
    "DRAResourceClaimDeviceStatus": ((33, _beta()), (37, _ga(locked=True))),
    "DRASchedulerFilterTimeout": ((34, _beta()),),
    "DRADeviceTaints": ((33, _alpha()), (36, _beta()), (37, _ga(locked=False))),
    "DRADeviceTaintRules": ((35, _alpha()), (36, _beta(default=False)), (37, _ga(locked=False))),
    "DRAConsumableCapacity": ((34, _alpha()), (36, _beta())),
    "DRAPartitionableDevices": ((33, _alpha()), (36, _beta())),
    "DRADeviceBindingConditions": ((34, _alpha()), (36, _beta())),
    "DRAExtendedResource": ((34, _alpha()), (36, _beta()), (37, _ga(locked=True))),
    "DRAListTypeAttributes": ((36, _alpha()),),
    "DRANodeAllocatableResources": ((36, _alpha()),),
    "DRAWorkloadResourceClaims": ((36, _alpha()), (37, _beta(default=False))),
}
"""Gate -> ((first minor release, spec from then on), ...), oldest first."""


def gate_specs(minor: int) -> dict[str, GateSpec]:
    """Every modelled gate the release knows, with its spec there."""
    specs: dict[str, GateSpec] = {}
    for name, history in GATE_HISTORY.items():
        current = [spec for since, spec in history if since <= minor]
        if current:
            specs[name] = current[-1]
    return specs


def parse_feature_gates(text: str) -> dict[str, bool]:
    """``A=true,B=false`` (the flag's form; blanks around names and values are allowed)."""
    gates: dict[str, bool] = {}
    for name, value in flag_entries(text):
        if value is None:
            raise ReleaseError(f"missing bool value for {name}")
        gates[name] = _parse_bool(name, value)
    return gates


def _parse_bool(name: str, value: str) -> bool:
    """As Go's strconv.ParseBool, which kube-apiserver uses for gate values."""
    if value in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if value in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise ReleaseError(
        f"invalid value of {name}={value}, err: strconv.ParseBool: parsing "
        f'"{value}": invalid syntax'
    )


def resolve_gates(minor: int, overrides: Mapping[str, bool]) -> dict[str, bool]:
    """Each known gate's value at the release with ``overrides`` applied."""
    specs = gate_specs(minor)
    enabled = {name: spec.default for name, spec in specs.items()}
    for special, stage in ((ALL_ALPHA, "ALPHA"), (ALL_BETA, "BETA")):
        if special in overrides:
            for name, spec in specs.items():
                if spec.stage == stage:
                    enabled[name] = overrides[special]
    for name, value in overrides.items():
        if name in (ALL_ALPHA, ALL_BETA):
            continue
        known = specs.get(name)
        if known is None:
            raise ReleaseError(f"unrecognized feature gate: {name}")
        if known.locked and value != known.default:
            raise ReleaseError(
                f"cannot set feature gate {name} to {_go_bool(value)}, feature is locked to "
                f"{_go_bool(known.default)}"
            )
        enabled[name] = value
    return enabled


def _go_bool(value: bool) -> str:
    return "true" if value else "false"
