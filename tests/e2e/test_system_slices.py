"""Domains larger than a clique on the whole system, manifests applied with kubectl: four small
cliques (tests/e2e/four-cliques.yaml: 4 racks x 4 trays x 4 GPUs, 64 GPUs in all).

- an Indexed Job in one ComputeDomain with ``spec.gang.sliceSize``: four slices in four cliques,
  consecutive completion indexes per slice, one channel per clique, what CDI gives each pod, the
  domain Ready; then a fatal XID on a node of slice 2: the other slices' pods keep running
  untouched and the replacements land in slice 2's clique;
- growth that needs a new slice and shrinking that frees it;
- a domain larger than the whole cluster waits with a reason and reserves nothing; one that fits
  only after another is deleted is placed then;
- a Placement of the first release's shape, written while the allocator is stopped, is honoured
  by the allocator that starts next;
- failover: a whole clique's fabric lost moves a slice to another clique within its grace and a
  few seconds, Ready there with a channel of the new clique; with ``policy: Wait`` a domain
  stays put.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from shared.crds import PLACEMENTS, Placement
from shared.crds.names import (
    ALLOCATOR_USER,
    GPU_FAULT_TAINT,
    PLACED_CONDITION,
    WRITTEN_BY_ANNOTATION,
)
from shared.kube.client import KubeClient
from shared.kube.models import Pod
from shared.kube.resources import JOBS
from sim import control as simctl
from sim.control.state import IDENTITIES_DIR
from sim.identities import CLIQUE_ALLOCATOR_SA
from tests.e2e.whole_system import (
    CLIQUE_ALLOCATOR,
    WholeSystem,
    alive,
    gated,
    live,
    running_whole_system,
    seated,
    shared_channels,
)
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

TOPOLOGY = Path(__file__).with_name("four-cliques.yaml")
INDEX = "batch.kubernetes.io/job-completion-index"
# The XID stays latched long enough that the faulted node is still tainted when the
# replacements are placed, so they must go to another node of the same clique.
HEALTH = {"CDO_HEALTH_XID_LATCH_S": "20", "CDO_HEALTH_HOLD_DOWN_S": "5"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system(HEALTH, topology=TOPOLOGY) as running:
        yield running


def domain_yaml(name: str, gang: str = "", failover: str = "", *, version: str = "v1beta1") -> str:
    gang_block = f"\n  gang:\n    {gang}" if gang else ""
    failover_block = f"\n  failover:\n    {failover}" if failover else ""
    return f"""
apiVersion: resource.nvidia.com/{version}
kind: ComputeDomain
metadata:
  name: {name}
spec:{gang_block}{failover_block}
  channel:
    resourceClaimTemplate:
      name: {name}-rct
"""


def job_yaml(name: str, *, pods: int, gpus: int, completions: int | None = None) -> str:
    return f"""
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
spec:
  completionMode: Indexed
  completions: {completions or pods}
  parallelism: {pods}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      restartPolicy: Never
      containers:
        - name: trainer
          image: registry.example.com/trainer:1.0
          resources:
            limits:
              nvidia.com/gpu: {gpus}
            claims:
              - name: imex-channel
      resourceClaims:
        - name: imex-channel
          resourceClaimTemplateName: {name}-rct
"""


def deployment_yaml(name: str, *, replicas: int, gpus: int) -> str:
    return f"""
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      containers:
        - name: worker
          image: registry.example.com/worker:1.0
          resources:
            limits:
              nvidia.com/gpu: {gpus}
            claims:
              - name: imex-channel
      resourceClaims:
        - name: imex-channel
          resourceClaimTemplateName: {name}-rct
"""


async def apply(system: WholeSystem, namespace: str, *documents: str) -> None:
    await system.kubectl("apply", "-n", namespace, "-f", "-", stdin="---\n".join(documents))


def index_of(pod: Pod) -> int:
    return int(pod.metadata.labels[INDEX])


async def placement_of(system: WholeSystem, namespace: str, name: str) -> Placement:
    found = await system.placement(namespace, name)
    assert found is not None, f"{namespace}/{name} has no Placement"
    return found


async def cdi_environment(system: WholeSystem, pod: Pod) -> dict[str, str]:
    """The environment the pod's channel claim's CDI spec gives its containers."""
    (status,) = pod.status.resource_claim_statuses
    claim = next(
        c for c in await system.claims(pod.metadata.namespace)
        if c.metadata.name == status.resource_claim_name
    )  # fmt: skip
    path = (
        system.state_dir / "nodehost" / pod.spec.node_name / "cdi"
        / f"cdo.dev-imex-channel_{claim.metadata.uid}.json"
    )  # fmt: skip
    spec = json.loads(path.read_text())
    (device,) = spec["devices"]
    return dict(entry.split("=", 1) for entry in device["containerEdits"]["env"])


def check_slices(placement: Placement, pods: list[Pod], cliques: dict[str, str]) -> None:
    """Every slice inside one clique with consecutive ranks (the completion indexes)."""
    by_pod = {pod.metadata.name: pod for pod in pods}
    end = 0
    for piece in placement.spec.slices:
        assert piece.first_rank == end
        end += piece.size
        assert {cliques[member.node] for member in piece.members} == {piece.clique}
        indexes = sorted(index_of(by_pod[p.name]) for member in piece.members for p in member.pods)
        assert indexes == list(range(piece.first_rank, piece.first_rank + piece.size))
        for member in piece.members:
            for p in member.pods:
                assert p.rank == index_of(by_pod[p.name])
                assert by_pod[p.name].spec.node_name == member.node
    channels: dict[str, set[int]] = defaultdict(set)
    for piece in placement.spec.slices:
        channels[piece.clique].add(piece.channel)
    assert all(len(found) == 1 for found in channels.values())


async def test_a_sliced_indexed_job_spans_four_cliques_and_a_fault_stays_in_its_slice(
    system: WholeSystem,
) -> None:
    namespace = "sliced"
    await system.create_namespace(namespace)
    await apply(
        system,
        namespace,
        domain_yaml("train", "sliceSize: 12"),
        job_yaml("train", pods=48, gpus=1),
    )
    pods = await system.wait_running(namespace, "app=train", 48)
    domain = await system.wait_domain_ready(namespace, "train")
    placement = await placement_of(system, namespace, "train")
    cliques = await system.cliques()

    assert [(s.index, s.first_rank, s.size) for s in placement.spec.slices] == [
        (i, 12 * i, 12) for i in range(4)
    ]
    assert len({s.clique for s in placement.spec.slices}) == 4
    check_slices(placement, pods, cliques)
    assert shared_channels(await system.placements()) == []
    assert {c.clique for c in domain.status.cliques} == set(cliques.values())
    assert domain.status.clique is None
    for entry in domain.status.nodes:
        assert entry.clique_id == cliques[entry.name] and entry.status == "Ready"

    # What CDI gives a pod: its slice's channel, clique, index, size and its rank in the slice.
    seats = seated(placement)
    sample = next(pod for pod in pods if index_of(pod) == 30)
    slice_index, _, rank = seats[sample.metadata.name]
    piece = placement.spec.slices[slice_index]
    env = await cdi_environment(system, sample)
    assert (slice_index, rank) == (2, 30)
    assert env["CDO_SLICE_INDEX"] == "2" and env["CDO_SLICE_SIZE"] == "12"
    assert env["CDO_SLICE_RANK"] == "6" and env["CDO_RANK"] == "30"
    assert env["CDO_IMEX_CHANNEL"] == str(piece.channel)
    assert env["CLIQUE_ID"] == env["CDO_CLIQUE_ID"] == piece.clique
    assert env["COMPUTE_DOMAIN_NAME"] == "train" and env["COMPUTE_DOMAIN_NAMESPACE"] == namespace
    assert env["COMPUTE_DOMAIN_UUID"] == domain.metadata.uid

    # A fatal node-level fault on a node of slice 2: XID 74, an NVLink error, takes the whole
    # node (an XID about one GPU, such as 79, would evict only the pod holding that GPU).
    slice_two = placement.spec.slices[2]
    victim = slice_two.members[0].node
    others = {
        pod.metadata.uid: pod.metadata.name for pod in pods if seats[pod.metadata.name][0] != 2
    }
    evicted = {pod.metadata.name for pod in pods if pod.spec.node_name == victim}
    await asyncio.to_thread(
        simctl.fault, system.state_dir, victim, {"kind": "xid", "gpu": 0, "xid": 74},
        say=lambda _line: None,
    )  # fmt: skip

    async def replaced() -> list[Pod] | None:
        running = await system.running(namespace, "app=train", 48)
        if running is None or evicted & {pod.metadata.name for pod in running}:
            return None
        return running

    after = await wait_for(replaced, timeout=120, interval=0.3, what="the evicted pods replaced")
    await system.wait_domain_ready(namespace, "train")
    newer = await placement_of(system, namespace, "train")
    assert newer.spec.slices[:2] == placement.spec.slices[:2]
    assert newer.spec.slices[3] == placement.spec.slices[3]
    for pod in after:
        if pod.metadata.name not in {p.metadata.name for p in pods}:
            assert cliques[pod.spec.node_name] == slice_two.clique
            assert pod.spec.node_name != victim
    untouched = {pod.metadata.uid: pod.metadata.name for pod in after if pod.metadata.uid in others}
    assert untouched == others  # the other slices' pods kept running, never replaced
    check_slices(newer, after, cliques)

    await asyncio.to_thread(simctl.fault, system.state_dir, victim, None, say=lambda _line: None)

    async def recovered() -> bool:
        node = await system.node(victim)
        return not any(taint.key == GPU_FAULT_TAINT for taint in node.spec.taints)

    await wait_for(recovered, timeout=120, interval=0.3, what=f"{victim} recovered")
    await system.clean_up(namespace)


def elastic(pods: int) -> dict[str, object]:
    return {"spec": {"completions": pods, "parallelism": pods}}


async def test_growth_opens_a_new_slice_and_shrinking_frees_it(system: WholeSystem) -> None:
    namespace = "elastic-slices"
    await system.create_namespace(namespace)
    # Four whole trays fill one clique; without a slice size, six is larger than any clique.
    # The Job is an elastic Indexed Job (completions = parallelism, both changed together): when
    # it shrinks, the Job controller removes the highest indexes.
    await apply(system, namespace, domain_yaml("grow"), job_yaml("grow", pods=4, gpus=4))
    await system.wait_running(namespace, "app=grow", 4)
    first = await placement_of(system, namespace, "grow")
    assert [(s.first_rank, s.size) for s in first.spec.slices] == [(0, 4)]

    await system.client.patch(JOBS, "grow", elastic(6), namespace=namespace)
    pods = await system.wait_running(namespace, "app=grow", 6)
    await system.wait_domain_ready(namespace, "grow")
    grown = await placement_of(system, namespace, "grow")
    assert [(s.first_rank, s.size) for s in grown.spec.slices] == [(0, 4), (4, 2)]
    assert grown.spec.slices[0] == first.spec.slices[0]
    assert grown.spec.slices[1].clique != first.spec.slices[0].clique
    check_slices(grown, pods, await system.cliques())

    await system.client.patch(JOBS, "grow", elastic(4), namespace=namespace)

    async def one_slice_left() -> Placement | None:
        found = await system.placement(namespace, "grow")
        return found if found is not None and len(found.spec.slices) == 1 else None

    shrunk = await wait_for(one_slice_left, timeout=60, interval=0.3, what="the second slice freed")
    assert shrunk.spec.slices == first.spec.slices
    await system.wait_domain_ready(namespace, "grow")
    freed = grown.spec.slices[1].clique
    capacity = await wait_for(
        lambda: _free_clique(system, freed), timeout=30, interval=0.3, what="capacity back"
    )
    assert capacity["domains"] == 0
    await system.clean_up(namespace)


async def _free_clique(system: WholeSystem, clique: str) -> dict[str, object] | None:
    entry = (await system.capacity()).get(clique)
    return entry if entry is not None and entry["gpus_free"] == entry["gpus_total"] else None


async def test_too_big_for_the_cluster_waits_and_a_domain_is_placed_once_room_is_freed(
    system: WholeSystem,
) -> None:
    namespace = "room"
    await system.create_namespace(namespace)
    await apply(system, namespace, domain_yaml("huge"), job_yaml("huge", pods=65, gpus=1))
    await apply(
        system, namespace, domain_yaml("first"), deployment_yaml("first", replicas=16, gpus=1)
    )
    await system.wait_running(namespace, "app=first", 16)
    await apply(system, namespace, domain_yaml("second"), job_yaml("second", pods=56, gpus=1))

    async def held(name: str, count: int, reason: str) -> list[Pod] | None:
        pods = live(await system.pods(namespace, f"app={name}"))
        waiting = [
            pod
            for pod in pods
            if gated(pod)
            and (condition := pod.condition(PLACED_CONDITION)) is not None
            and (condition.status, condition.reason) == ("False", reason)
        ]
        return waiting if len(waiting) == count else None

    huge = await wait_for(
        lambda: held("huge", 65, "LargerThanCluster"), timeout=60, interval=0.3, what="huge held"
    )
    message = huge[0].condition(PLACED_CONDITION)
    assert message is not None and "64" in message.message, message
    await wait_for(
        lambda: held("second", 56, "InsufficientCapacity"), timeout=60, interval=0.3,
        what="second held while first runs",
    )  # fmt: skip
    assert await system.placement(namespace, "huge") is None
    assert await system.placement(namespace, "second") is None

    await system.kubectl("delete", "deployment/first", "computedomain/first", "-n", namespace)
    pods = await system.wait_running(namespace, "app=second", 56)
    await system.wait_domain_ready(namespace, "second")
    second = await placement_of(system, namespace, "second")
    assert sum(s.size for s in second.spec.slices) == 56
    check_slices(second, pods, await system.cliques())
    assert await held("huge", 65, "LargerThanCluster") is not None
    assert await system.placement(namespace, "huge") is None
    await system.clean_up(namespace)


async def test_a_record_of_the_first_release_is_honoured_by_the_next_allocator(
    system: WholeSystem,
) -> None:
    namespace = "upgrade"
    await system.create_namespace(namespace)
    await apply(system, namespace, domain_yaml("old"), deployment_yaml("old", replicas=4, gpus=2))
    pods = await system.wait_running(namespace, "app=old", 4)
    await system.wait_domain_ready(namespace, "old")
    current = await placement_of(system, namespace, "old")
    (piece,) = current.spec.slices

    # The allocator stops; its record is replaced by the same reservation in the first
    # release's shape, written as the allocator (the cdo-placement-writer policy admits no one
    # else); the allocator the control plane starts next reads it.
    pid = system.service_pid(CLIQUE_ALLOCATOR)
    os.kill(pid, signal.SIGSTOP)
    allocator = await KubeClient.connect(
        kubeconfig=system.state_dir / IDENTITIES_DIR / f"{CLIQUE_ALLOCATOR_SA}.kubeconfig"
    )
    try:
        legacy = {
            "apiVersion": PLACEMENTS.api_version,
            "kind": PLACEMENTS.kind,
            "metadata": {
                "name": "old",
                "namespace": namespace,
                "resourceVersion": current.metadata.resource_version,
                "annotations": {WRITTEN_BY_ANNOTATION: ALLOCATOR_USER},
                "ownerReferences": [
                    {
                        "apiVersion": ref.api_version,
                        "kind": ref.kind,
                        "name": ref.name,
                        "uid": ref.uid,
                        "controller": True,
                    }
                    for ref in current.metadata.owner_references
                ],
            },
            "spec": {
                "clique": piece.clique,
                "channel": piece.channel,
                "gpusPerPod": current.spec.gpus_per_pod,
                "size": current.spec.size,
                "members": [
                    {
                        "node": m.node,
                        "slot": m.slot,
                        "gpus": m.gpus,
                        "pods": [p.name for p in m.pods],
                    }
                    for m in piece.members
                ],
            },
        }
        await allocator.replace(PLACEMENTS, "old", legacy, namespace=namespace)
    finally:
        await allocator.close()
        os.kill(pid, signal.SIGKILL)
        os.kill(pid, signal.SIGCONT)
    await wait_for(
        lambda: not alive(pid, "services.clique_allocator"), timeout=30, interval=0.1,
        what="the stopped allocator gone",
    )  # fmt: skip

    # A new domain that fills exactly what the old reservation leaves of the cluster, written
    # as v1beta2 (the stored version): a v1beta1 write would need the conversion webhook, which
    # the allocator that is starting again serves.
    new = domain_yaml("new", version="v1beta2")
    await apply(system, namespace, new, deployment_yaml("new", replicas=28, gpus=2))
    fresh = await system.wait_running(namespace, "app=new", 28)

    async def rewritten() -> Placement | None:
        found = await system.placement(namespace, "old")
        return found if found is not None and found.spec.slices else None

    after = await wait_for(rewritten, timeout=60, interval=0.3, what="the old record rewritten")
    assert (after.spec.clique, after.spec.channel, after.spec.members) == ("", None, ())
    assert {m.node for m in after.spec.slices[0].members} == {m.node for m in piece.members}
    old_nodes = {pod.spec.node_name for pod in pods}
    gpus: dict[str, int] = defaultdict(int)
    for pod in [*pods, *fresh]:
        gpus[pod.spec.node_name] += 2
    assert max(gpus.values()) <= 4, gpus  # nothing booked twice
    running = await system.wait_running(namespace, "app=old", 4)
    assert {pod.metadata.uid for pod in running} == {pod.metadata.uid for pod in pods}
    assert {pod.spec.node_name for pod in running} == old_nodes
    await system.clean_up(namespace)
    assert await system.leftovers() == []


FAILOVER_GRACE_S = 5


async def lose_fabric(system: WholeSystem, nodes: list[str], *, lost: bool) -> None:
    """Every GPU of ``nodes`` loses fabric registration (``lost``), or gets it back."""
    for node in nodes:
        body = {"kind": "fabric", "gpu": None, "state": "not_started"} if lost else None
        await asyncio.to_thread(simctl.fault, system.state_dir, node, body, say=lambda _l: None)


async def test_a_slice_whose_clique_loses_its_fabric_fails_over_and_wait_stays_put(
    system: WholeSystem,
) -> None:
    namespace = "failover"
    await system.create_namespace(namespace)
    await apply(
        system,
        namespace,
        domain_yaml("mover", "sliceSize: 4", f"graceSeconds: {FAILOVER_GRACE_S}"),
        job_yaml("mover", pods=8, gpus=4),
    )
    await system.wait_running(namespace, "app=mover", 8)
    await apply(
        system,
        namespace,
        domain_yaml("waiter", failover="policy: Wait\n    graceSeconds: 0"),
        job_yaml("waiter", pods=4, gpus=4),
    )
    waiter_pods = await system.wait_running(namespace, "app=waiter", 4)
    mover = await placement_of(system, namespace, "mover")
    waiter = await placement_of(system, namespace, "waiter")
    lost = mover.spec.slices[1].clique
    waited = waiter.spec.slices[0].clique
    cliques = await system.cliques()
    doomed = sorted(node for node, clique in cliques.items() if clique in (lost, waited))
    old_pods = {p.metadata.uid for p in await system.pods(namespace, "app=mover")}

    await lose_fabric(system, doomed, lost=True)

    async def moved() -> Placement | None:
        found = await system.placement(namespace, "mover")
        piece = found.spec.slices[1] if found is not None else None
        return found if piece is not None and piece.moved_from == lost else None

    after = await wait_for(
        moved, timeout=FAILOVER_GRACE_S + 60, interval=0.3, what="slice 1 failed over"
    )
    new = after.spec.slices[1]
    assert new.clique not in (lost, waited, mover.spec.slices[0].clique)
    assert after.spec.slices[0] == mover.spec.slices[0]
    pods = await system.wait_running(namespace, "app=mover", 8)
    await system.wait_domain_ready(namespace, "mover")
    after = await placement_of(system, namespace, "mover")
    cliques = await system.cliques()
    check_slices(after, pods, cliques)
    moved_pods = [p for p in pods if p.metadata.uid not in old_pods]
    assert {cliques[p.spec.node_name] for p in moved_pods} == {after.spec.slices[1].clique}
    env = await cdi_environment(system, moved_pods[0])
    assert env["CDO_CLIQUE_ID"] == after.spec.slices[1].clique
    assert env["CDO_IMEX_CHANNEL"] == str(after.spec.slices[1].channel)

    # policy Wait (grace 0): marked stuck, and still in its clique long after the mover moved.
    async def stuck() -> Placement | None:
        found = await system.placement(namespace, "waiter")
        return found if found is not None and found.spec.slices[0].waiting_since else None

    stayed = await wait_for(stuck, timeout=30, interval=0.3, what="the waiter's slice stuck")
    assert stayed.spec.slices[0].clique == waited and not stayed.spec.slices[0].moved_from
    assert {p.metadata.uid for p in await system.pods(namespace, "app=waiter")} == {
        p.metadata.uid for p in waiter_pods
    }

    await lose_fabric(system, doomed, lost=False)

    async def whole_again() -> Placement | None:
        found = await system.placement(namespace, "waiter")
        return found if found is not None and not found.spec.slices[0].waiting_since else None

    recovered = await wait_for(whole_again, timeout=60, interval=0.3, what="the waiter whole")
    assert recovered.spec.slices[0].clique == waited
    await system.wait_domain_ready(namespace, "waiter")
    await system.clean_up(namespace)
