"""Whole-system scenarios more than one test module drives: each takes a running system and a
fresh namespace, asserts what the scenario promises, and leaves the cluster empty again.

- :func:`seed_ready_in_one_clique`: the seed manifests (deploy/examples) Ready in one clique;
- :func:`doubled_in_two_slices`: the seed's shape doubled (36 pods of 4 GPUs) Ready as one domain
  in two slices, one per rack;
- :func:`fatal_xid_replaced_in_clique`: a fatal XID on a member's GPU: its pod replaced on a
  healthy node of the same clique, the domain Ready again.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.crds import ComputeDomain
from shared.crds.names import GPU_FAULT_TAINT, GPU_HEALTHY_CONDITION
from shared.kube.models import Node, Pod
from tests.e2e.whole_system import EXAMPLES, NODES_PER_CLIQUE, WholeSystem
from tests.support.wait import wait_for

SEED = ("-f", str(EXAMPLES / "training-domain-1.yaml"), "-f", str(EXAMPLES / "llm-training.yaml"))
SEED_DOMAIN = "training-domain-1"
SEED_DEPLOYMENT = "llm-training"
SEED_SELECTOR = "app=llm-training"


async def apply_seed(system: WholeSystem, namespace: str) -> None:
    await system.create_namespace(namespace)
    await system.kubectl("apply", "-n", namespace, *SEED)


async def cliques_of(system: WholeSystem, pods: list[Pod]) -> set[str]:
    labels = await system.cliques()
    return {labels[pod.spec.node_name] for pod in pods}


async def wait_channel_only_on(system: WholeSystem, channel: int, nodes: set[str]) -> None:
    """Until the channel's device exists on exactly these nodes (the agents add and drop it)."""

    async def exactly() -> bool:
        devices = await system.all_channel_devices()
        return {node for node, channels in devices.items() if channel in channels} == nodes

    await wait_for(exactly, timeout=60, interval=0.3, what=f"channel {channel} on {sorted(nodes)}")


async def seed_ready_in_one_clique(system: WholeSystem, namespace: str) -> None:
    """The seed applied unchanged with kubectl: Ready with its 18 pods in one clique, its
    channel on every member and nowhere else, read back at v1beta1 and v1beta2; then deleted
    again."""
    await apply_seed(system, namespace)
    domain = await system.wait_domain_ready(namespace, SEED_DOMAIN, nodes=NODES_PER_CLIQUE)
    pods = await system.wait_running(namespace, SEED_SELECTOR, 18)

    assert len({pod.spec.node_name for pod in pods}) == 18  # 4 GPUs each: one pod per tray
    (clique,) = await cliques_of(system, pods)
    status = domain.status
    assert status.clique == clique and status.channel is not None
    assert {node.name for node in status.nodes} == {pod.spec.node_name for pod in pods}
    assert {node.clique_id for node in status.nodes} == {clique}
    assert sorted(node.index for node in status.nodes) == list(range(NODES_PER_CLIQUE))
    assert all(node.status == "Ready" and node.ip_address for node in status.nodes)

    placement = await system.placement(namespace, SEED_DOMAIN)
    assert placement is not None
    assert (placement.spec.slices[0].clique, placement.spec.slices[0].channel) == (
        clique,
        status.channel,
    )
    assert set(placement.spec.pod_names) == {pod.metadata.name for pod in pods}
    # The kubelet prepared each pod's claim through the node's IMEX agent: the channel's device.
    member = pods[0].spec.node_name
    assert status.channel in system.channel_devices(member)
    await wait_channel_only_on(system, status.channel, {pod.spec.node_name for pod in pods})

    capacity = await system.capacity()
    assert capacity[clique]["gpus_free"] == 0 and capacity[clique]["domains"] == 1
    # The seed was written as v1beta1 and is stored as v1beta2; both read back through the
    # allocator's conversion webhook, with the same status.
    for version in ("v1beta1", "v1beta2"):
        out = await system.kubectl(
            "get", f"computedomains.{version}.resource.nvidia.com", SEED_DOMAIN, "-n", namespace,
            "-o", "jsonpath={.apiVersion} {.status.status} {.status.channel}",
        )  # fmt: skip
        assert out == f"resource.nvidia.com/{version} Ready {status.channel}"
    await system.clean_up(namespace)


DOUBLED = """
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata:
  name: training-domain-2
spec:
  channel:
    resourceClaimTemplate:
      name: training-domain-2-rct
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm-training-2
spec:
  replicas: 36
  selector:
    matchLabels:
      app: llm-training-2
  template:
    metadata:
      labels:
        app: llm-training-2
    spec:
      containers:
        - name: trainer
          image: registry.example.com/llm-trainer:1.0
          resources:
            limits:
              nvidia.com/gpu: 4
            claims:
              - name: imex-channel
      resourceClaims:
        - name: imex-channel
          resourceClaimTemplateName: training-domain-2-rct
"""


async def doubled_in_two_slices(system: WholeSystem, namespace: str) -> None:
    """36 pods of 4 GPUs without a slice size: larger than a rack, so the fewest slices, two.
    (The seed's pod affinity on the clique label is left out: it would keep every pod in the
    first pod's clique.)"""
    await system.create_namespace(namespace)
    await system.kubectl("apply", "-n", namespace, "-f", "-", stdin=DOUBLED)
    pods = await system.wait_running(namespace, "app=llm-training-2", 36)
    domain = await system.wait_domain_ready(namespace, "training-domain-2", nodes=36)
    placement = await system.placement(namespace, "training-domain-2")
    assert placement is not None
    labels = await system.cliques()
    pieces = placement.spec.slices
    assert [(s.first_rank, s.size, len(s.members)) for s in pieces] == [(0, 18, 18), (18, 18, 18)]
    assert {s.clique for s in pieces} == set(labels.values())
    for piece in pieces:
        assert {labels[m.node] for m in piece.members} == {piece.clique}
    assert await cliques_of(system, pods) == set(labels.values())
    assert sorted(c.clique for c in domain.status.cliques) == sorted(set(labels.values()))
    assert all(c.ready_nodes == c.nodes == 18 for c in domain.status.cliques)
    await system.clean_up(namespace)


def taint_effect(node: Node) -> str | None:
    return next((t.effect for t in node.spec.taints if t.key == GPU_FAULT_TAINT), None)


def gpu_healthy(node: Node) -> str | None:
    condition = node.condition(GPU_HEALTHY_CONDITION)
    return None if condition is None else condition.status


@dataclass(frozen=True)
class XidOutcome:
    """What :func:`fatal_xid_replaced_in_clique` saw: the faulted node, the pod it lost, and
    the domain before and after."""

    victim: str
    evicted: str
    before: ComputeDomain
    after: ComputeDomain


async def fatal_xid_replaced_in_clique(
    system: WholeSystem, namespace: str, name: str
) -> XidOutcome:
    """A domain of 4 pods of 4 GPUs (smaller than a clique, so a healthy node of the same
    clique has room), then XID 74 (an NVLink error: the fabric is shared, a node-level fault)
    on a member's GPU: the node is tainted NoExecute with GpuHealthy False, its pod replaced on
    another node of the same clique, the domain Ready again in the same clique and channel
    without the faulted node, which is still tainted (the fault is left in place: the caller
    clears it or lets the system go). The health monitors' XID latch must outlast the
    replacement (``CDO_HEALTH_XID_LATCH_S``)."""
    await system.create_namespace(namespace)
    await system.create_workload(namespace, name, replicas=4, gpus=4)
    before = await system.wait_domain_ready(namespace, name, nodes=4)
    pods = await system.wait_running(namespace, f"app={name}", 4)
    clique = before.status.clique
    victim = sorted(pod.spec.node_name for pod in pods)[0]
    evicted = next(pod.metadata.name for pod in pods if pod.spec.node_name == victim)
    assert gpu_healthy(await system.node(victim)) == "True"

    await system.inject_fault(victim, {"kind": "xid", "gpu": 1, "xid": 74})

    async def tainted() -> Node | None:
        node = await system.node(victim)
        fatal = taint_effect(node) == "NoExecute" and gpu_healthy(node) == "False"
        return node if fatal else None

    await wait_for(tainted, timeout=60, interval=0.2, what="NoExecute taint, GpuHealthy False")

    async def replaced() -> list[Pod] | None:
        running = await system.running(namespace, f"app={name}", 4)
        names = {pod.metadata.name for pod in running or ()}
        return running if running is not None and evicted not in names else None

    now = await wait_for(replaced, timeout=120, interval=0.3, what="the evicted pod replaced")
    after = await system.wait_domain_ready(namespace, name, nodes=4)
    (replacement,) = [p for p in now if p.metadata.name not in {q.metadata.name for q in pods}]
    labels = await system.cliques()
    assert replacement.spec.node_name != victim
    assert labels[replacement.spec.node_name] == clique
    assert {labels[pod.spec.node_name] for pod in now} == {clique}
    assert (after.status.clique, after.status.channel) == (clique, before.status.channel)
    assert victim not in {node.name for node in after.status.nodes}
    # The replacement was placed while the fault still held: the node is still tainted.
    assert taint_effect(await system.node(victim)) == "NoExecute"
    return XidOutcome(victim=victim, evicted=evicted, before=before, after=after)
