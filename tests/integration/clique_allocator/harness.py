"""Driving the API around a clique allocator, as the other writers would.

The tests play the cluster's other writers through the API: kubelets registering GPU nodes with
their clique labels, the domain controller labelling a domain's claim template, workload
controllers creating ReplicaSets and their pods, the node lifecycle marking nodes NotReady, the
health monitor tainting faulty nodes. The allocator runs as a real subprocess.
"""

from __future__ import annotations

import asyncio
import base64
import re
import urllib.error
import urllib.request
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from services.clique_allocator.webhook.configuration import webhook_configuration
from shared.bus import EventBus
from shared.crds import COMPUTE_DOMAINS, PLACEMENTS, ComputeDomain, Placement, install_crds
from shared.crds.definitions import compute_domain_crd, conversion
from shared.crds.names import (
    CLIQUE_LABEL,
    DOMAIN_LABEL,
    DOMAIN_UID_LABEL,
    GPU_FAULT_TAINT,
    HOSTNAME_LABEL,
    PLACED_CONDITION,
    PLACEMENT_GATE,
)
from shared.crds.placement import PlacementSpec, SliceMember
from shared.events import CliqueCapacity
from shared.events.subjects import CLIQUE_CAPACITY, CLIQUE_SNAPSHOT
from shared.kube.client import KubeClient
from shared.kube.meta import KubeObject
from shared.kube.models import Pod
from shared.kube.resources import (
    NAMESPACES,
    NODES,
    PODS,
    REPLICA_SETS,
    RESOURCE_CLAIM_TEMPLATES,
)
from sim.kubeapi.admission.certificates import CertificateAuthority
from sim.podgate import install_pod_gate
from tests.support.eventlog import EventLog
from tests.support.kubeevents import CoreEvent, events_involving
from tests.support.processes import ProgramProcess
from tests.support.wait import wait_for

NAMESPACE = "default"
WEBHOOK_ENABLED = "CDO_CLIQUE_ALLOCATOR_WEBHOOK_ENABLED"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def clique_id(rack: int) -> str:
    return f"{uuid.UUID(int=0x0F6D1C1E_8C1D_4BB7_9D49_3F1E0F0C2A00 + rack)}.1"


class PodList(msgspec.Struct):
    items: list[Pod]


class Tls:
    """A CA and the allocator's serving certificate, written as a mounted Secret would be."""

    def __init__(self, directory: Path) -> None:
        self.ca = CertificateAuthority()
        pair = self.ca.issue(["cdo-clique-allocator.cdo-system.svc", "127.0.0.1"])
        directory.mkdir(parents=True, exist_ok=True)
        self.cert_file = directory / "tls.crt"
        self.key_file = directory / "tls.key"
        self.cert_file.write_bytes(pair.cert_pem)
        self.key_file.write_bytes(pair.key_pem)


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, ""


class Allocator:
    """One allocator process, its probe port and its webhook port."""

    def __init__(self, process: ProgramProcess, *, port: int) -> None:
        self.process = process
        self.port = port
        self.webhook_port = 0
        """The port the webhook listens on, from its log (it may be asked for any free one)."""

    @property
    def instance(self) -> str:
        return self.process.env["CDO_INSTANCE"]

    async def metrics(self) -> str:
        status, body = await asyncio.to_thread(http_get, self.port, "/metrics")
        return body if status == 200 else ""

    async def counter(self, name: str, /, **labels: str) -> float:
        """Sum of a metric's samples whose labels include ``labels``."""
        total = 0.0
        for line in (await self.metrics()).splitlines():
            if not line.startswith((name + "{", name + " ")):
                continue
            found = dict(re.findall(r'(\w+)="([^"]*)"', line.split(" ")[0]))
            if all(found.get(k) == v for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    async def ready(self) -> bool:
        status, _ = await asyncio.to_thread(http_get, self.port, "/readyz")
        return status == 200

    async def wait_ready(self, within_s: float = 20.0) -> None:
        async def probe() -> bool:
            if self.process.returncode is not None:
                raise AssertionError(
                    f"{self.instance} exited with {self.process.returncode}:\n"
                    + self.process.stderr_text()[-3000:]
                )
            if not await self.ready():
                return False
            serving = [
                r for r in self.process.log_records() if r.get("message") == "webhook serving"
            ]
            if serving:
                self.webhook_port = int(serving[-1]["port"])
            return bool(serving) or self.process.env.get(WEBHOOK_ENABLED) == "false"

        await wait_for(probe, timeout=within_s, interval=0.05, what=f"{self.instance} ready")

    async def wait_idle(self, within_s: float = 15.0) -> None:
        """Until the queue is empty, nothing runs, and no key was added since the last look."""
        seen: list[float] = []

        async def probe() -> bool:
            depth = await self.counter("workqueue_depth", name="placements")
            busy = await self.counter("workqueue_unfinished_work_seconds", name="placements")
            adds = await self.counter("workqueue_adds_total", name="placements")
            idle = depth == 0 and busy == 0 and bool(seen) and seen[-1] == adds
            seen.append(adds)
            return idle

        await wait_for(probe, timeout=within_s, interval=0.1, what=f"{self.instance} idle")

    def kill(self) -> None:
        self.process.process.kill()
        self.process.process.wait(10)

    def stop(self) -> None:
        self.process.stop()


class Api:
    """The other writers' API calls, through cdo's own client."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    # -- webhook registration ----------------------------------------------------------------

    async def register_webhook(self, tls: Tls, port: int) -> None:
        """The webhook and the admission policy beside it, as deploy/ installs them."""
        body = webhook_configuration(ca_bundle=tls.ca.cert_pem, url=f"https://127.0.0.1:{port}")
        await self.client.request("POST", MUTATING, body=body)
        await install_pod_gate(self.client)

    async def register_conversion(self, tls: Tls, port: int) -> None:
        """Point the ComputeDomain CRD's conversion webhook at the allocator, as the install's
        caBundle and Service do on a cluster."""
        webhook = conversion(url=f"https://127.0.0.1:{port}", ca_bundle=tls.ca.cert_pem)
        await install_crds(self.client, [compute_domain_crd(webhook=webhook)])

    async def create_namespace(self, name: str) -> None:
        await self.client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )

    # -- nodes, as kubelets, node lifecycle and health monitor write them ---------------------

    async def create_node(
        self,
        name: str,
        *,
        clique: str | None,
        gpus: int = 4,
        ready: bool = True,
        slot: int | None = None,
    ) -> None:
        labels = {HOSTNAME_LABEL: name}
        if clique is not None:
            labels[CLIQUE_LABEL] = clique
        annotations = {}
        if slot is not None and clique is not None:
            annotations = {"cdo.dev/imex-slot": str(slot), "cdo.dev/imex-clique": clique}
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "status": {
                "capacity": {"nvidia.com/gpu": str(gpus)},
                "allocatable": {"nvidia.com/gpu": str(gpus)},
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True" if ready else "False",
                        "reason": "KubeletReady",
                        "message": "",
                    }
                ],
            },
        }
        await self.client.create(NODES, body)

    async def create_rack(self, rack: int, *, nodes: int = 4, gpus: int = 4) -> list[str]:
        names = [f"r{rack}-n{index:02d}" for index in range(nodes)]
        for index, name in enumerate(names):
            await self.create_node(name, clique=clique_id(rack), gpus=gpus, slot=index)
        return names

    async def set_ready(self, node: str, ready: bool) -> None:
        condition = {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "message": "",
        }
        await self.client.patch(
            NODES,
            node,
            {"status": {"conditions": [condition]}},
            subresource="status",
            patch_type="strategic",
        )

    async def taint(self, node: str, *, fault: bool) -> None:
        taints = (
            [{"key": GPU_FAULT_TAINT, "value": "xid-79", "effect": "NoSchedule"}] if fault else []
        )
        await self.client.patch(NODES, node, {"spec": {"taints": taints}})

    async def cordon(self, node: str, cordoned: bool) -> None:
        await self.client.patch(NODES, node, {"spec": {"unschedulable": cordoned or None}})

    async def unlabel(self, node: str) -> None:
        await self.client.patch(NODES, node, {"metadata": {"labels": {CLIQUE_LABEL: None}}})

    # -- domains and templates ---------------------------------------------------------------

    async def create_domain(
        self, name: str, *, namespace: str = NAMESPACE, label_template: bool = True, **spec: Any
    ) -> ComputeDomain:
        body = {
            "apiVersion": COMPUTE_DOMAINS.api_version,
            "kind": COMPUTE_DOMAINS.kind,
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"channel": {"resourceClaimTemplate": {"name": f"{name}-rct"}}, **spec},
        }
        raw = await self.client.create(COMPUTE_DOMAINS, body, namespace=namespace)
        domain = msgspec.json.decode(raw, type=ComputeDomain)
        if label_template:
            await self.create_template(f"{name}-rct", namespace=namespace, domain=domain)
        return domain

    async def set_domain_ready(
        self, name: str, status: str, *, reason: str, namespace: str = NAMESPACE
    ) -> None:
        """The domain's Ready condition, as the domain controller writes it."""
        condition = {
            "type": "Ready",
            "status": status,
            "reason": reason,
            "message": reason,
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        await self.client.patch(
            COMPUTE_DOMAINS,
            name,
            {"status": {"conditions": [condition]}},
            namespace=namespace,
            subresource="status",
        )

    async def domain(self, name: str, *, namespace: str = NAMESPACE) -> ComputeDomain | None:
        raw = await self.client.get_or_none(COMPUTE_DOMAINS, name, namespace=namespace)
        return None if raw is None else msgspec.json.decode(raw, type=ComputeDomain)

    async def delete_domain(self, name: str, *, namespace: str = NAMESPACE) -> None:
        await self.client.delete(COMPUTE_DOMAINS, name, namespace=namespace)

    async def create_template(
        self, name: str, *, namespace: str = NAMESPACE, domain: ComputeDomain | None = None
    ) -> None:
        labels = {}
        if domain is not None:
            labels = {
                DOMAIN_LABEL: domain.metadata.name,
                DOMAIN_UID_LABEL: domain.metadata.uid,
            }
        body = {
            "apiVersion": RESOURCE_CLAIM_TEMPLATES.api_version,
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "channel",
                                "exactly": {"deviceClassName": "compute-domain-channel.cdo.dev"},
                            }
                        ]
                    }
                }
            },
        }
        await self.client.create(RESOURCE_CLAIM_TEMPLATES, body, namespace=namespace)

    async def placement(self, name: str, *, namespace: str = NAMESPACE) -> Placement | None:
        raw = await self.client.get_or_none(PLACEMENTS, name, namespace=namespace)
        return None if raw is None else msgspec.json.decode(raw, type=Placement)

    async def placements(self) -> list[Placement]:
        class _List(msgspec.Struct):
            items: list[Placement]

        return msgspec.json.decode(await self.client.list(PLACEMENTS), type=_List).items

    # -- workloads and their pods, as a ReplicaSet controller makes them ---------------------

    async def create_replicaset(
        self, name: str, *, replicas: int, namespace: str = NAMESPACE
    ) -> str:
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "main", "image": "trainer"}]},
                },
            },
        }
        raw = await self.client.create(REPLICA_SETS, body, namespace=namespace)
        return msgspec.json.decode(raw, type=KubeObject).metadata.uid

    async def scale(self, name: str, replicas: int, *, namespace: str = NAMESPACE) -> None:
        await self.client.patch(
            REPLICA_SETS, name, {"spec": {"replicas": replicas}}, namespace=namespace
        )

    async def create_pod(
        self,
        name: str,
        *,
        template: str | None = None,
        claim_name: str | None = None,
        gpus: int = 4,
        owner: tuple[str, str] | None = None,
        namespace: str = NAMESPACE,
        pinned_to: str | None = None,
    ) -> Pod:
        """A pod as a workload controller creates it (the webhook, if registered, may gate it);
        ``pinned_to``: as an allocator left it, with the nodeSelector of its node."""
        spec: dict[str, Any] = {
            "containers": [
                {
                    "name": "main",
                    "image": "trainer",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {},
                }
            ],
        }
        if template is not None:
            spec["resourceClaims"] = [{"name": "channel", "resourceClaimTemplateName": template}]
        elif claim_name is not None:
            spec["resourceClaims"] = [{"name": "channel", "resourceClaimName": claim_name}]
        if pinned_to is not None:
            spec["nodeSelector"] = {HOSTNAME_LABEL: pinned_to}
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if owner is not None:
            rs_name, uid = owner
            metadata["ownerReferences"] = [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": rs_name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
        raw = await self.client.create(PODS, body, namespace=namespace)
        return msgspec.json.decode(raw, type=Pod)

    async def create_gated_pods(
        self,
        prefix: str,
        count: int,
        *,
        template: str,
        owner: tuple[str, str] | None,
        gpus: int = 4,
        namespace: str = NAMESPACE,
    ) -> list[str]:
        """Pods of a domain as the webhook leaves them: gated (created with the gate when no
        webhook is registered); ``owner`` None: bare pods."""
        names = [f"{prefix}-{index:02d}" for index in range(count)]
        for name in names:
            pod = await self.create_pod(
                name, template=template, gpus=gpus, owner=owner, namespace=namespace
            )
            if not any(g.name == PLACEMENT_GATE for g in pod.spec.scheduling_gates):
                raise AssertionError(f"{name} was not gated by the webhook")
        return names

    async def pod(self, name: str, *, namespace: str = NAMESPACE) -> Pod | None:
        raw = await self.client.get_or_none(PODS, name, namespace=namespace)
        return None if raw is None else msgspec.json.decode(raw, type=Pod)

    async def pods(self, *, namespace: str = NAMESPACE) -> list[Pod]:
        raw = await self.client.list(PODS, namespace=namespace)
        return msgspec.json.decode(raw, type=PodList).items

    async def delete_pod(self, name: str, *, namespace: str = NAMESPACE) -> None:
        await self.client.delete(PODS, name, namespace=namespace)

    async def bind(self, name: str, node: str, *, phase: str = "Running") -> None:
        """What the scheduler and kubelet do with a pinned pod: bind it, report it running."""
        await self.client.request(
            "POST",
            PODS.path(namespace=NAMESPACE, name=name) + "/binding",
            body={
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name},
                "target": {"kind": "Node", "name": node},
            },
        )
        await self.client.patch(
            PODS, name, {"status": {"phase": phase}}, namespace=NAMESPACE, subresource="status"
        )

    async def finish(self, name: str) -> None:
        await self.client.patch(
            PODS,
            name,
            {"status": {"phase": "Succeeded"}},
            namespace=NAMESPACE,
            subresource="status",
        )

    async def events(self, involving: str, *, namespace: str = NAMESPACE) -> list[CoreEvent]:
        return await events_involving(self.client, involving, namespace=namespace)


# -- reading results ---------------------------------------------------------------------------


def gated(pod: Pod) -> bool:
    return any(gate.name == PLACEMENT_GATE for gate in pod.spec.scheduling_gates)


def pinned(pod: Pod) -> str:
    return pod.spec.node_selector.get(HOSTNAME_LABEL, "")


def placed_condition(pod: Pod) -> tuple[str, str] | None:
    condition = pod.condition(PLACED_CONDITION)
    return None if condition is None else (condition.status, condition.reason)


def check_no_double_booking(placements: Sequence[Placement], gpus_per_node: int = 4) -> None:
    """Every node holds at most its GPUs over all Placements; every pod is on one node; a
    channel of a clique belongs to one domain, and a domain has one channel per clique."""
    used: dict[str, int] = {}
    seen_pods: set[tuple[str, str]] = set()
    owners: dict[tuple[str, int], str] = {}
    for placement in placements:
        spec = placement.spec
        channel_here: dict[str, int] = {}
        for piece in spec.all_slices:
            channel = (piece.clique, piece.channel)
            owner = owners.setdefault(channel, placement.key)
            assert owner == placement.key, f"channel {channel} used by {owner} and {placement.key}"
            assert channel_here.setdefault(piece.clique, piece.channel) == piece.channel
            for member in piece.members:
                used[member.node] = used.get(member.node, 0) + member.gpus
                assert len(member.pods) <= member.gpus // spec.gpus_per_pod
                for pod in member.pods:
                    key = (placement.metadata.namespace, pod.name)
                    assert key not in seen_pods, f"pod {key} recorded twice"
                    seen_pods.add(key)
    over = {node: gpus for node, gpus in used.items() if gpus > gpus_per_node}
    assert not over, f"nodes over-committed: {over}"


def members(spec: PlacementSpec) -> list[SliceMember]:
    """Every member node entry of every slice."""
    return [member for piece in spec.all_slices for member in piece.members]


def pod_nodes(spec: PlacementSpec) -> dict[str, str]:
    """Each seated pod's node."""
    return {pod.name: member.node for member in members(spec) for pod in member.pods}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class CapacityLog(EventLog[CliqueCapacity]):
    """The CliqueCapacity events an observer's bus receives, by clique."""

    def __init__(self, bus: EventBus) -> None:
        super().__init__(
            bus,
            kind=CliqueCapacity,
            subject=CLIQUE_CAPACITY.wildcard(),
            key=lambda event: event.clique,
            snapshot_key=lambda clique: CLIQUE_SNAPSHOT.render(clique=clique),
        )

    async def node_seen_unhealthy(self, clique: str, node: str) -> None:
        """Wait until the allocator has published ``node`` as unhealthy: from then on it does
        not place pods there (its node informer and its pod informer are separate watches)."""

        def seen() -> bool:
            event = self.latest(clique)
            return event is not None and any(n.node == node and not n.healthy for n in event.nodes)

        await wait_for(seen, timeout=30, what=f"{node} published unhealthy")
