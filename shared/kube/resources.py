"""Which API resource a client talks to, and the REST paths for it."""

from __future__ import annotations

from urllib.parse import quote

import msgspec


class Resource(msgspec.Struct, frozen=True, kw_only=True):
    """One API resource: ``group`` is "" for the core API."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, *, namespace: str = "", name: str = "", subresource: str = "") -> str:
        """The REST path; without ``namespace`` a namespaced resource lists cluster-wide."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            root += f"/namespaces/{quote(namespace, safe='')}"
        path = f"{root}/{self.plural}"
        if name:
            path += f"/{quote(name, safe='')}"
            if subresource:
                path += f"/{subresource}"
        return path


def core(plural: str, kind: str, *, namespaced: bool = True) -> Resource:
    return Resource(group="", version="v1", plural=plural, kind=kind, namespaced=namespaced)


NAMESPACES = core("namespaces", "Namespace", namespaced=False)
NODES = core("nodes", "Node", namespaced=False)
PODS = core("pods", "Pod")
EVENTS = core("events", "Event")
CONFIG_MAPS = core("configmaps", "ConfigMap")
SECRETS = core("secrets", "Secret")
CERTIFICATE_SIGNING_REQUESTS = Resource(
    group="certificates.k8s.io",
    version="v1",
    plural="certificatesigningrequests",
    kind="CertificateSigningRequest",
    namespaced=False,
)
LEASES = Resource(
    group="coordination.k8s.io", version="v1", plural="leases", kind="Lease", namespaced=True
)
DEPLOYMENTS = Resource(
    group="apps", version="v1", plural="deployments", kind="Deployment", namespaced=True
)
REPLICA_SETS = Resource(
    group="apps", version="v1", plural="replicasets", kind="ReplicaSet", namespaced=True
)
STATEFUL_SETS = Resource(
    group="apps", version="v1", plural="statefulsets", kind="StatefulSet", namespaced=True
)
JOBS = Resource(group="batch", version="v1", plural="jobs", kind="Job", namespaced=True)
POD_DISRUPTION_BUDGETS = Resource(
    group="policy",
    version="v1",
    plural="poddisruptionbudgets",
    kind="PodDisruptionBudget",
    namespaced=True,
)
JOB_SETS = Resource(
    group="jobset.x-k8s.io", version="v1alpha2", plural="jobsets", kind="JobSet", namespaced=True
)
LEADER_WORKER_SETS = Resource(
    group="leaderworkerset.x-k8s.io",
    version="v1",
    plural="leaderworkersets",
    kind="LeaderWorkerSet",
    namespaced=True,
)


def resource_api(plural: str, kind: str, *, namespaced: bool) -> Resource:
    return Resource(
        group="resource.k8s.io", version="v1", plural=plural, kind=kind, namespaced=namespaced
    )


DEVICE_CLASSES = resource_api("deviceclasses", "DeviceClass", namespaced=False)
RESOURCE_CLAIMS = resource_api("resourceclaims", "ResourceClaim", namespaced=True)
RESOURCE_CLAIM_TEMPLATES = resource_api(
    "resourceclaimtemplates", "ResourceClaimTemplate", namespaced=True
)
RESOURCE_SLICES = resource_api("resourceslices", "ResourceSlice", namespaced=False)
DEVICE_TAINT_RULES = resource_api("devicetaintrules", "DeviceTaintRule", namespaced=False)
COMPUTE_DOMAINS = Resource(
    group="resource.nvidia.com",
    version="v1beta2",
    plural="computedomains",
    kind="ComputeDomain",
    namespaced=True,
)
"""The ComputeDomain in the version it is stored in, NVIDIA's current ``v1beta2``: what every cdo
service reads and writes, so that none of them depends on the conversion webhook
(:mod:`shared.crds.definitions` has the CRD and the older ``v1beta1``)."""
