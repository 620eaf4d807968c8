"""The simulated kubelet runs a pod of a domain: its claim is prepared by the agent's plugin.

The kubelet registers the node, finds the agent's plugin through its plugins_registry, calls
NodePrepareResources for the pod's claim and records the CDI ids it got on the pod; when the
pod goes, it calls NodeUnprepareResources and the agent removes the channel and the spec.
"""

from __future__ import annotations

import contextlib
import json

import msgspec
import pytest

from shared.crds.names import CLIQUE_LABEL
from shared.kube.client import KubeClient
from shared.kube.informer import InformerSettings
from shared.kube.meta import KubeObject
from shared.kube.resources import PODS, RESOURCE_CLAIMS
from sim.kubeapi import ServerConfig
from sim.kubelet import CDI_DEVICES_ANNOTATION, KubeletSettings, SimulatedKubelet
from tests.integration.imex_agent.harness import ImexCluster, create_claim, create_domain, seat_pod
from tests.support.kubeevents import CoreEvent, events_involving
from tests.support.tasks import running
from tests.support.wait import wait_for

FAST = KubeletSettings(
    lease_duration_s=1,
    heartbeat_interval_s=0.2,
    status_update_interval_s=0.5,
    status_report_interval_s=5.0,
    retry_backoff_s=0.05,
    retry_backoff_max_s=0.5,
    plugin_scan_interval_s=0.05,
    plugin_call_timeout_s=5.0,
)


@pytest.fixture
def emulator_config() -> ServerConfig:
    return ServerConfig(bookmark_interval_s=0.5, pod_graceful_deletion=True)


class _PodStatus(msgspec.Struct, frozen=True):
    phase: str = ""


class _Pod(KubeObject, frozen=True, kw_only=True):
    status: _PodStatus = msgspec.field(default_factory=_PodStatus)


async def get_pod(client: KubeClient, namespace: str, name: str) -> _Pod | None:
    raw = await client.get_or_none(PODS, name, namespace=namespace)
    return None if raw is None else msgspec.json.decode(raw, type=_Pod)


def kubelet_running(kubelet: SimulatedKubelet) -> contextlib.AbstractAsyncContextManager[None]:
    return running(kubelet.run(), name=f"kubelet {kubelet.node.name}")


async def test_a_pod_of_a_domain_gets_its_channel_through_the_kubelet(
    cluster: ImexCluster,
) -> None:
    sim = cluster.node_list()[0]
    client = cluster.client
    clique = sim.topology.clique
    kubelet = SimulatedKubelet(
        sim.topology,
        client=client,
        plugins_dir=sim.kubelet_root / "plugins_registry",
        settings=FAST,
        labels={CLIQUE_LABEL: clique},  # the health monitor's label, set at registration
        informer_settings=InformerSettings(backoff_initial_s=0.05, backoff_max_s=0.5),
    )
    async with kubelet_running(kubelet):
        await cluster.start(sim)
        domain = await create_domain(
            client, namespace="ml", name="train", channel=12, clique=clique
        )
        pod_body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "train-0", "namespace": "ml"},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.test/train:1",
                        "resources": {"claims": [{"name": "channel"}]},
                    }
                ],
                "resourceClaims": [{"name": "channel", "resourceClaimName": "train-0-channel"}],
            },
        }
        pod = msgspec.json.decode(await client.create(PODS, pod_body, namespace="ml"), type=_Pod)
        # Seated by the allocator; reserved below for the real pod, as the scheduler does.
        claim = await create_claim(
            client,
            namespace="ml",
            name="train-0-channel",
            domain=domain,
            node=sim.name,
            pod="train-0",
            uid=pod.metadata.uid,
            reserve=False,
        )
        await client.patch(
            RESOURCE_CLAIMS,
            claim.name,
            {
                "status": {
                    "reservedFor": [
                        {"resource": "pods", "name": "train-0", "uid": pod.metadata.uid}
                    ]
                }
            },
            namespace="ml",
            subresource="status",
        )
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "train-0", "namespace": "ml"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": sim.name},
        }
        await client.request(
            "POST", PODS.path(namespace="ml", name="train-0", subresource="binding"), body=binding
        )

        async def running() -> _Pod | None:
            cluster.check_agents()
            current = await get_pod(client, "ml", "train-0")
            return current if current is not None and current.status.phase == "Running" else None

        current = await wait_for(running, timeout=30, what="the pod running")
        devices = json.loads(current.metadata.annotations[CDI_DEVICES_ANNOTATION])
        assert devices == [f"cdo.dev/imex-channel={claim.uid}"]
        spec = sim.cdi_root / f"cdo.dev-imex-channel_{claim.uid}.json"
        assert (sim.device_root / "channel12").exists()
        (device,) = json.loads(spec.read_text())["devices"]
        env = device["containerEdits"]["env"]
        assert {"CDO_IMEX_CHANNEL=12", "CDO_RANK=0", f"CLIQUE_ID={clique}"} <= set(env)

        await client.delete(PODS, "train-0", namespace="ml")

        async def cleaned() -> bool:
            gone = await get_pod(client, "ml", "train-0") is None
            return gone and not spec.exists() and not (sim.device_root / "channel12").exists()

        await wait_for(cleaned, timeout=30, what="the pod gone and its channel removed")


async def run_pod(client: KubeClient, *, namespace: str, name: str, claim: str, node: str) -> str:
    """A pod using ResourceClaim ``claim``, bound to ``node``; its uid."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.test/train:1",
                    "resources": {"claims": [{"name": "channel"}]},
                }
            ],
            "resourceClaims": [{"name": "channel", "resourceClaimName": claim}],
        },
    }
    pod = msgspec.json.decode(await client.create(PODS, body, namespace=namespace), type=_Pod)
    return pod.metadata.uid


async def bind(client: KubeClient, *, namespace: str, name: str, node: str) -> None:
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    await client.request(
        "POST", PODS.path(namespace=namespace, name=name, subresource="binding"), body=binding
    )


async def test_a_forged_claims_pod_gets_the_refusal_in_its_events_and_a_late_seat_runs(
    cluster: ImexCluster,
) -> None:
    """A claim copying the domain's labels, used by a pod the allocator never placed, is
    refused: the pod stays Pending with a FailedPrepareDynamicResources Warning naming it. A
    member whose seat is written after the kubelet first asks runs on the kubelet's retry."""
    sim = cluster.node_list()[0]
    client = cluster.client
    clique = sim.topology.clique
    kubelet = SimulatedKubelet(
        sim.topology,
        client=client,
        plugins_dir=sim.kubelet_root / "plugins_registry",
        settings=FAST,
        labels={CLIQUE_LABEL: clique},
        informer_settings=InformerSettings(backoff_initial_s=0.05, backoff_max_s=0.5),
    )
    async with kubelet_running(kubelet):
        await cluster.start(sim)
        domain = await create_domain(client, namespace="ml", name="train", channel=8, clique=clique)
        pods = {"intruder": "forged-channel", "train-0": "train-0-channel"}
        uids = {
            pod: await run_pod(client, namespace="ml", name=pod, claim=claim, node=sim.name)
            for pod, claim in pods.items()
        }
        for pod, claim in pods.items():
            # Neither pod is seated yet; the scheduler allocated both claims here.
            await create_claim(
                client, namespace="ml", name=claim, domain=domain, node=sim.name, pod=pod,
                uid=uids[pod], seat=False, device="attach-0" if pod == "train-0" else "attach-1",
            )  # fmt: skip
            await bind(client, namespace="ml", name=pod, node=sim.name)

        async def warned(pod: str) -> CoreEvent | None:
            """The pod's Warning with the agent's refusal (earlier ones may say the plugin was
            not registered yet)."""
            cluster.check_agents()
            events = await events_involving(client, pod, namespace="ml")
            return next(
                (
                    event
                    for event in events
                    if event.reason == "FailedPrepareDynamicResources"
                    and f"pod {pod} (uid {uids[pod]}) is not a member of ComputeDomain ml/train"
                    in event.message
                ),
                None,
            )

        event = await wait_for(lambda: warned("intruder"), timeout=30, what="the refusal")
        assert event.type == "Warning"
        assert "ResourceClaim ml/forged-channel gets no channel" in event.message
        await wait_for(lambda: warned("train-0"), timeout=30, what="the member's first refusal")
        await seat_pod(client, domain, pod="train-0", node=sim.name, uid=uids["train-0"])

        async def running() -> _Pod | None:
            cluster.check_agents()
            current = await get_pod(client, "ml", "train-0")
            return current if current is not None and current.status.phase == "Running" else None

        await wait_for(running, timeout=30, what="the member running after a retry")
        intruder = await get_pod(client, "ml", "intruder")
        assert intruder is not None and intruder.status.phase == "Pending"
        assert {int(p.name.removeprefix("channel")) for p in sim.device_root.glob("channel*")} == {
            8
        }
        assert [p.name for p in sim.cdi_root.glob("*.json")] == [
            f"cdo.dev-imex-channel_{await claim_uid(client, 'ml', 'train-0-channel')}.json"
        ]


async def claim_uid(client: KubeClient, namespace: str, name: str) -> str:
    raw = await client.get(RESOURCE_CLAIMS, name, namespace=namespace)
    return msgspec.json.decode(raw, type=KubeObject).metadata.uid
