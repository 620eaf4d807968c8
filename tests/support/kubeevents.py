"""Reading the Kubernetes Events (``core/v1`` Event) a service recorded, for the harnesses."""

from __future__ import annotations

import msgspec

from shared.kube.client import KubeClient
from shared.kube.meta import KubeObject
from shared.kube.resources import EVENTS


class CoreEvent(KubeObject, frozen=True, kw_only=True):
    reason: str = ""
    message: str = ""
    type: str = ""


class _EventList(msgspec.Struct):
    items: list[CoreEvent]


async def events_involving(
    client: KubeClient, involving: str, *, namespace: str
) -> list[CoreEvent]:
    """The Events of ``namespace`` about the object named ``involving`` (the recorder names an
    Event ``<object>.<suffix>``)."""
    raw = await client.list(EVENTS, namespace=namespace)
    items = msgspec.json.decode(raw, type=_EventList).items
    return [event for event in items if event.metadata.name.startswith(f"{involving}.")]
