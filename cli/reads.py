"""Reading lists and objects from the Kubernetes API for the commands, with their errors:
an API that does not answer is :class:`UnreachableError` (exit 3), a refusal a CommandError."""

from __future__ import annotations

import msgspec

from cli.connection import Endpoints, kube_unreachable
from shared.command_errors import CommandError
from shared.crds import PLACEMENTS, ComputeDomain, Placement
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.models import Node, Pod
from shared.kube.resources import NODES, Resource


class Pods(msgspec.Struct):
    items: list[Pod]


class Nodes(msgspec.Struct):
    items: list[Node]


class Domains(msgspec.Struct):
    items: list[ComputeDomain]


class Placements(msgspec.Struct):
    items: list[Placement]


async def list_raw(
    client: KubeClient, endpoints: Endpoints, resource: Resource, namespace: str = ""
) -> bytes:
    """The list, as bytes; an empty list for a kind the cluster does not serve."""
    try:
        return await client.list(resource, namespace=namespace)
    except KubeApiError as exc:
        if exc.code == 0:
            raise kube_unreachable(endpoints, exc) from exc
        if exc.not_found:
            return b'{"items": []}'
        raise CommandError(f"listing {resource.plural} failed: {exc}") from exc


async def get_raw(
    client: KubeClient, endpoints: Endpoints, resource: Resource, *, ns: str, name: str
) -> bytes | None:
    try:
        return await client.get_or_none(resource, name, namespace=ns)
    except KubeApiError as exc:
        if exc.code == 0:
            raise kube_unreachable(endpoints, exc) from exc
        raise CommandError(f"reading {resource.kind} {ns}/{name} failed: {exc}") from exc


async def list_nodes(client: KubeClient, endpoints: Endpoints) -> list[Node]:
    return msgspec.json.decode(await list_raw(client, endpoints, NODES), type=Nodes).items


async def list_placements(client: KubeClient, endpoints: Endpoints) -> list[Placement]:
    raw = await list_raw(client, endpoints, PLACEMENTS)
    return msgspec.json.decode(raw, type=Placements).items
