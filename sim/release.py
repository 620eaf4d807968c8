"""What the simulated cluster's own components do at the Kubernetes release they simulate.

A real cluster's kube-scheduler, kube-controller-manager and DRA drivers run at the cluster's
release with the gates a platform team set, alike on every component; the simulated ones take
the same :class:`~sim.kubeapi.releases.Release` the API emulator presents and decide from it,
never from what cdo's services find (the simulator judges independently):

- device taints (KEP-5055) are honoured only while ``DRADeviceTaints`` is on: the scheduler
  allocates no device with an untolerated NoSchedule/NoExecute taint, the device taint eviction
  controller runs, and NVIDIA's GPU driver publishes its XID taints (on a server that drops
  them it would only be told so on every sync);
- DeviceTaintRules count, and are watched, only where the release serves them and their gate
  is on (``DRADeviceTaintRules`` from 1.35, ``DRADeviceTaints`` alone in 1.34), at the newest
  version served (v1alpha3 in 1.34-1.35, v1beta2 in 1.36, v1 in 1.37); their status (the
  eviction controller's ``EvictionInProgress``) exists from 1.35.
"""

from __future__ import annotations

import msgspec

from shared.kube.resources import DEVICE_TAINT_RULES, Resource
from sim.kubeapi.kinds.devicetaints import STATUS_SINCE as TAINT_RULE_STATUS_SINCE
from sim.kubeapi.releases import Release
from sim.kubeapi.storage.resources import version_priority


class DeviceTaintSupport(msgspec.Struct, frozen=True, kw_only=True):
    """How the simulated components treat DRA device taints; the defaults are the newest
    release's."""

    taints: bool = True
    """Slice taints and claim tolerations count; the eviction controller runs."""
    rules: Resource | None = DEVICE_TAINT_RULES
    """Where DeviceTaintRules are read (None: not used, not watched)."""
    rule_status: bool = True
    """Rules have a status the eviction controller keeps."""

    @classmethod
    def of(cls, release: Release) -> DeviceTaintSupport:
        taints = release.enabled("DRADeviceTaints")
        rules_gate = (
            "DRADeviceTaintRules" if release.knows("DRADeviceTaintRules") else "DRADeviceTaints"
        )
        versions = sorted(
            release.served_versions(DEVICE_TAINT_RULES.group, DEVICE_TAINT_RULES.plural),
            key=version_priority,
        )
        rules = (
            msgspec.structs.replace(DEVICE_TAINT_RULES, version=versions[0])
            if taints and release.enabled(rules_gate) and versions
            else None
        )
        return cls(
            taints=taints,
            rules=rules,
            rule_status=rules is not None and release.minor >= TAINT_RULE_STATUS_SINCE,
        )
