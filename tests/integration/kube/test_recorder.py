"""Kubernetes Events: recorded on the object, repeats aggregated, failures contained."""

from __future__ import annotations

import msgspec

from shared.kube.client import KubeClient
from shared.kube.meta import KubeObject
from shared.kube.recorder import EventRecorder
from shared.kube.resources import CONFIG_MAPS, EVENTS
from shared.metrics import Metrics
from sim.kubeapi import KubeServer


class InvolvedObject(msgspec.Struct, rename="camel"):
    kind: str
    name: str
    uid: str


class CoreEvent(KubeObject, frozen=True, kw_only=True):
    reason: str = ""
    message: str = ""
    type: str = ""
    count: int = 0
    involved_object: InvolvedObject | None = msgspec.field(default=None, name="involvedObject")


class EventList(msgspec.Struct):
    items: list[CoreEvent]


async def events(client: KubeClient) -> list[CoreEvent]:
    return msgspec.json.decode(await client.list(EVENTS, namespace="default"), type=EventList).items


async def test_events_are_recorded_and_repeats_aggregated(kube_client: KubeClient) -> None:
    raw = await kube_client.create(
        CONFIG_MAPS,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "subject"}},
        namespace="default",
    )
    subject = msgspec.json.decode(raw, type=KubeObject)
    recorder = EventRecorder(kube_client, component="domain-controller", instance="pod-1")
    for _ in range(3):
        await recorder.record(
            CONFIG_MAPS, subject, type_="Warning", reason="NameClash", message="taken"
        )
    await recorder.record(CONFIG_MAPS, subject, type_="Normal", reason="Ready", message="ok")
    recorded = sorted(await events(kube_client), key=lambda e: e.reason)
    assert [(e.reason, e.type, e.count) for e in recorded] == [
        ("NameClash", "Warning", 3),
        ("Ready", "Normal", 1),
    ]
    involved = recorded[0].involved_object
    assert involved is not None
    assert (involved.kind, involved.name, involved.uid) == (
        "ConfigMap",
        "subject",
        subject.metadata.uid,
    )


async def test_a_failing_api_does_not_raise(kube_client: KubeClient, emulator: KubeServer) -> None:
    metrics = Metrics()
    recorder = EventRecorder(kube_client, component="c", instance="i", metrics=metrics)
    emulator.faults.fail_next(1, code=500, resource="events")
    subject = KubeObject()
    await recorder.record(CONFIG_MAPS, subject, type_="Normal", reason="R", message="m")
    assert metrics.registry.get_sample_value("cdo_errors_total", {"component": "events"}) == 1
