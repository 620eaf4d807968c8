"""``bench.e2e``'s stage watch against the API emulator over HTTP: a pod taken through the writes
that mark its milestones (created with the placement gate, ungated, bound through the binding
subresource, its CDI ids annotated, Running) is seen at each one, in order; and the histogram
totals it reads from a service's /metrics text. The breakdown itself is tested in
tests/unit/bench."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from bench._e2e_stages import CDI_DEVICES_ANNOTATION, SEEN, filled, pod_stages
from bench._e2e_stagewatch import PodWatch, Totals, histogram_totals
from shared.crds.names import PLACEMENT_GATE
from shared.kube.client import KubeClient
from shared.kube.resources import NAMESPACES, PODS
from sim.kubeapi import serve
from tests.support.wait import wait_for

NAMESPACE = "stages"


async def test_the_watch_sees_each_milestone_of_a_pod_in_order(tmp_path: Path) -> None:
    async with serve(kubeconfig=tmp_path / "kubeconfig") as server:
        client = await KubeClient.connect(kubeconfig=server.kubeconfig)
        try:
            await client.create(
                NAMESPACES,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            )
            async with PodWatch(client, NAMESPACE) as watch:
                origin = time.perf_counter()
                await walk_a_pod(client, watch)
        finally:
            await client.close()
    (times,) = watch.sightings.first.values()
    assert list(times) == list(SEEN), "each milestone seen on its own version, in order"
    assert filled(times) == times
    assert list(times.values()) == sorted(times.values())
    (stages,) = pod_stages(watch.sightings, origin=origin, webhook_s=0.0, prepare_s={"n1": 0.0})
    assert (stages.name, stages.node) == ("p", "n1")
    assert 0 < stages.to_running_s < time.perf_counter() - origin


async def walk_a_pod(client: KubeClient, watch: PodWatch) -> None:
    """Each write the system makes on the way to Running, each once the watch has seen the last."""

    async def seen(milestone: str) -> None:
        async def there() -> bool:
            return any(milestone in times for times in watch.sightings.first.values())

        await wait_for(there, what=f"the watch to see {milestone}")

    await client.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": NAMESPACE},
            "spec": {
                "schedulingGates": [{"name": PLACEMENT_GATE}],
                "containers": [{"name": "c", "image": "example.com/c:1"}],
            },
        },
        namespace=NAMESPACE,
    )
    await seen("admitted")
    await client.patch(PODS, "p", {"spec": {"schedulingGates": []}}, namespace=NAMESPACE)
    await seen("placed")
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": NAMESPACE},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
    await client.create(PODS, binding, namespace=NAMESPACE, name="p", subresource="binding")
    await seen("bound")
    annotations = {"metadata": {"annotations": {CDI_DEVICES_ANNOTATION: '["cdo.dev/channel=x"]'}}}
    await client.patch(PODS, "p", annotations, namespace=NAMESPACE)
    await seen("prepared")
    running = {"status": {"phase": "Running"}}
    await client.patch(PODS, "p", running, namespace=NAMESPACE, subresource="status")
    await seen("running")


def test_histogram_totals_are_read_from_the_exposition_text() -> None:
    registry = CollectorRegistry()
    histogram = Histogram("cdo_dra_prepare_seconds", "prepare", registry=registry)
    for seconds in (0.1, 0.3):
        histogram.observe(seconds)
    before = Totals(seconds=0.1, count=1)
    totals = histogram_totals(generate_latest(registry).decode(), "cdo_dra_prepare_seconds")
    assert (round(totals.seconds, 6), totals.count) == (0.4, 2)
    assert totals.mean_since(before) == pytest.approx(0.3)
    assert totals.mean_since(totals) is None
    assert histogram_totals("", "cdo_dra_prepare_seconds") == Totals()
