"""Which Kubernetes APIs cdo needs, which it can do without, and what a server serves.

cdo runs on every release from :data:`MINIMUM_RELEASE` on. What it cannot run without is
:data:`REQUIRED_APIS`: a service started against a server that lacks one of them exits with a
message naming the API and the minimum release (:func:`missing_required_message`). What it uses
where the server has it is :data:`OPTIONAL_APIS`, each with the release that serves it by
default, how an older release turns it on, and what cdo does without it; the services, the
``cdo preflight`` checks and docs/install.md all read this one table.

What a server serves is asked through discovery (``GET /apis/<group>/<version>``, the
APIResourceList), as kubectl and client-go do: :func:`served_resources`.
"""

from __future__ import annotations

import msgspec

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.resources import (
    DEVICE_CLASSES,
    DEVICE_TAINT_RULES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Resource,
)

MINIMUM_RELEASE = "1.34"
"""The oldest Kubernetes release cdo runs on: the first to serve DRA as ``resource.k8s.io/v1``."""

REQUIRED_APIS: tuple[Resource, ...] = (
    DEVICE_CLASSES,
    RESOURCE_CLAIMS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_SLICES,
)
"""DRA's ``resource.k8s.io/v1`` resources: the channel claims are DRA claims."""


class OptionalApi(msgspec.Struct, frozen=True, kw_only=True):
    """An API cdo uses where the server serves it, and does without elsewhere."""

    resource: Resource
    since: str
    """The first release that serves it by default."""
    enable: str
    """How an older release serves it, or "" when no older one can."""
    without: str
    """What cdo does on a server that does not serve it."""
    users: tuple[str, ...]
    """The services that use it."""

    @property
    def name(self) -> str:
        """``<plural>.<group>/<version>``, as the logs, metrics and checks name it."""
        return f"{self.resource.plural}.{self.resource.group}/{self.resource.version}"


DEVICE_TAINT_RULES_API = OptionalApi(
    resource=DEVICE_TAINT_RULES,
    since="1.37",
    enable=(
        "not served at resource.k8s.io/v1 before 1.37 (1.36 serves it only as v1beta2, off by "
        "default); upgrade to 1.37"
    ),
    without=(
        "a fault of one GPU that NVIDIA's GPU DRA driver publishes cannot be marked on that GPU "
        "alone: the health monitor taints the whole node instead, and the allocator counts the "
        "node's GPUs as taken"
    ),
    users=("clique-allocator", "health-monitor"),
)

OPTIONAL_APIS: tuple[OptionalApi, ...] = (DEVICE_TAINT_RULES_API,)


class _ApiResource(msgspec.Struct, frozen=True):
    name: str


class _ApiResourceList(msgspec.Struct, frozen=True):
    resources: list[_ApiResource] = msgspec.field(default_factory=list)


_RESOURCE_LIST = msgspec.json.Decoder(_ApiResourceList)


def group_version(resource: Resource) -> str:
    """``<group>/<version>`` of the resource (``v1`` for the core group), as an object's
    ``apiVersion`` and discovery name it."""
    return f"{resource.group}/{resource.version}" if resource.group else resource.version


def group_version_path(resource: Resource) -> str:
    """The discovery path of the resource's group and version."""
    if resource.group:
        return f"/apis/{resource.group}/{resource.version}"
    return f"/api/{resource.version}"


async def served_resources(client: KubeClient, resource: Resource) -> frozenset[str]:
    """The resources (and subresources, as ``pods/status``) the server serves in the group and
    version of ``resource``; empty when it does not serve that group version at all (404).
    Any other error is raised: an unreachable server is not a server without the API."""
    try:
        body = await client.request("GET", group_version_path(resource))
    except KubeApiError as exc:
        if exc.not_found:
            return frozenset()
        raise
    return frozenset(entry.name for entry in _RESOURCE_LIST.decode(body).resources)


async def serves(client: KubeClient, resource: Resource) -> bool:
    """Whether the server serves ``resource`` at its group and version."""
    return resource.plural in await served_resources(client, resource)


async def missing_required(client: KubeClient) -> list[Resource]:
    """The required APIs the server does not serve."""
    return [resource for resource in REQUIRED_APIS if not await serves(client, resource)]


def missing_required_message(missing: list[Resource]) -> str:
    """One line naming the missing APIs and the release that serves them."""
    names = ", ".join(f"{r.plural}.{r.group}/{r.version}" for r in missing)
    return (
        f"the API server does not serve {names}: cdo needs DRA's resource.k8s.io/v1, served "
        f"from Kubernetes {MINIMUM_RELEASE} on"
    )
