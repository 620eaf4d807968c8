"""JobSet and LeaderWorkerSet on the whole system, manifests applied with kubectl (two NVL72
racks of 18 trays x 4 GPUs):

- a JobSet of 2 replicated jobs of 36 one-GPU pods in one ComputeDomain across both racks: one
  slice per rack, ranks (job-global-index x parallelism + completion index) contiguous per slice;
- an LWS of 6 groups of 4 pods x 4 GPUs: each group inside one clique with its own channel there,
  the groups over both racks, each pod's CDI giving it its group's channel;
- scaling the LWS 6 -> 3 -> 6 groups removes and adds whole groups and moves no other;
- a worker of group 2 deleted: LWS makes group 2 again, in its clique, and no other group's pod
  changes;
- pods of a kind cdo cannot size are held with ``GangSizeUndeclared``, saying how to declare it.
"""

from __future__ import annotations

import textwrap
from collections import defaultdict
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from services.imex_agent.names import ENV_CHANNEL
from shared.crds import Placement
from shared.crds.names import PLACED_CONDITION
from shared.kube.models import Pod
from sim.controllers.jobset import JOB_GLOBAL_INDEX, JOBSET_NAME
from sim.controllers.leaderworkerset import GROUP_INDEX, NAME
from tests.e2e.test_system_slices import (
    INDEX,
    apply,
    cdi_environment,
    domain_yaml,
    placement_of,
)
from tests.e2e.whole_system import WholeSystem, gated, live, running_whole_system
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system() as running:
        yield running


def pod_spec(name: str, gpus: int, *, indent: int, restart: str = "") -> str:
    """A pod ``spec:`` asking for ``gpus`` GPUs and the domain ``name``'s channel."""
    policy = f"\n  restartPolicy: {restart}" if restart else ""
    text = f"""spec:{policy}
  containers:
    - name: main
      image: registry.example.com/work:1.0
      resources:
        limits:
          nvidia.com/gpu: {gpus}
        claims:
          - name: imex-channel
  resourceClaims:
    - name: imex-channel
      resourceClaimTemplateName: {name}-rct
"""
    return textwrap.indent(text, " " * indent)


def jobset_yaml(name: str) -> str:
    jobs = "".join(
        f"""
    - name: {job}
      replicas: 1
      template:
        spec:
          completionMode: Indexed
          parallelism: 36
          completions: 36
          backoffLimit: 0
          template:
{pod_spec(name, 1, indent=12, restart="Never")}"""
        for job in ("trainer", "evaluator")
    )
    return f"""
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: {name}
spec:
  replicatedJobs:{jobs}
"""


def lws_yaml(name: str, groups: int) -> str:
    return f"""
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: {name}
spec:
  replicas: {groups}
  leaderWorkerTemplate:
    size: 4
    workerTemplate:
{pod_spec(name, 4, indent=6)}"""


async def clean(system: WholeSystem, namespace: str) -> None:
    await system.kubectl(
        "delete", "jobsets,leaderworkersets", "--all", "-n", namespace, "--wait=false"
    )
    await system.clean_up(namespace)


def rank_of(pod: Pod) -> int:
    return int(pod.metadata.labels[JOB_GLOBAL_INDEX]) * 36 + int(pod.metadata.labels[INDEX])


async def test_a_jobset_across_two_racks_has_one_slice_per_rack_with_contiguous_ranks(
    system: WholeSystem,
) -> None:
    namespace = "jobset"
    await system.create_namespace(namespace)
    # Slices of 36 on 36 nodes: the two slices cannot share a rack of 18 trays.
    domain = domain_yaml("train", "sliceSize: 36\n    nodes: 36")
    await apply(system, namespace, domain, jobset_yaml("train"))
    pods = await system.wait_running(namespace, f"{JOBSET_NAME}=train", 72)
    placement = await placement_of(system, namespace, "train")
    cliques = await system.cliques()
    by_name = {pod.metadata.name: pod for pod in pods}
    assert placement.spec.size == 72
    assert len(placement.spec.slices) == 2
    assert {piece.clique for piece in placement.spec.slices} == set(cliques.values())
    end = 0
    for piece in sorted(placement.spec.slices, key=lambda p: p.first_rank):
        assert piece.first_rank == end
        end += piece.size
        seated = [p for member in piece.members for p in member.pods]
        assert sorted(rank_of(by_name[p.name]) for p in seated) == list(
            range(piece.first_rank, piece.first_rank + piece.size)
        )
        assert all(p.rank == rank_of(by_name[p.name]) for p in seated)
        assert {cliques[member.node] for member in piece.members} == {piece.clique}
    assert end == 72
    await system.wait_domain_ready(namespace, "train")
    await clean(system, namespace)


class Groups:
    """A LeaderWorkerSet's groups as the Placement and the pods show them."""

    def __init__(self, placement: Placement, pods: list[Pod], cliques: dict[str, str]) -> None:
        self.units = {piece.unit: piece for piece in placement.spec.slices}
        self.pods: dict[str, list[Pod]] = defaultdict(list)
        for pod in pods:
            self.pods[pod.metadata.labels[GROUP_INDEX]].append(pod)
        self.cliques = cliques

    def clique_of(self, group: str) -> str:
        return self.units[f"serve-{group}"].clique

    def uids(self, group: str) -> set[str]:
        return {pod.metadata.uid for pod in self.pods[group]}

    def check(self, groups: int) -> None:
        """Each group one slice of its own, in one clique, with its own channel there."""
        assert sorted(self.units) == sorted(f"serve-{g}" for g in range(groups))
        assert sorted(self.pods) == sorted(str(g) for g in range(groups))
        owners: dict[tuple[str, int], list[str]] = defaultdict(list)
        for unit, piece in self.units.items():
            owners[(piece.clique, piece.channel)].append(unit)
            assert piece.placed_pods == 4 and piece.size == 4
            group = unit.removeprefix("serve-")
            assert {self.cliques[pod.spec.node_name] for pod in self.pods[group]} == {piece.clique}
        assert all(len(units) == 1 for units in owners.values()), owners


async def groups_now(system: WholeSystem, namespace: str, groups: int) -> Groups:
    pods = await system.wait_running(namespace, f"{NAME}=serve", groups * 4)
    cliques = await system.cliques()

    async def settled() -> Groups | None:
        placement = await placement_of(system, namespace, "serve")
        found = Groups(placement, pods, cliques)
        return found if len(found.units) == groups else None

    return await wait_for(settled, timeout=60, what=f"{groups} units in the Placement")


async def test_lws_groups_are_placed_scaled_and_recreated_each_on_its_own(
    system: WholeSystem,
) -> None:
    namespace = "lws"
    await system.create_namespace(namespace)
    await apply(system, namespace, domain_yaml("serve"), lws_yaml("serve", 6))
    six = await groups_now(system, namespace, 6)
    six.check(6)
    # 6 groups x 16 GPUs do not fit one rack of 72: both racks hold groups.
    assert len({six.clique_of(str(g)) for g in range(6)}) == 2
    for group in ("0", "5"):
        for pod in six.pods[group]:
            environment = await cdi_environment(system, pod)
            assert environment[ENV_CHANNEL] == str(six.units[f"serve-{group}"].channel)
    await system.wait_domain_ready(namespace, "serve")

    await system.kubectl("scale", "lws/serve", "-n", namespace, "--replicas=3")
    three = await groups_now(system, namespace, 3)
    three.check(3)
    for group in ("0", "1", "2"):
        assert three.uids(group) == six.uids(group)
        assert three.units[f"serve-{group}"] == six.units[f"serve-{group}"]

    await system.kubectl("scale", "lws/serve", "-n", namespace, "--replicas=6")
    again = await groups_now(system, namespace, 6)
    again.check(6)
    for group in ("0", "1", "2"):
        assert again.uids(group) == six.uids(group)

    victim = next(p for p in again.pods["2"] if p.metadata.name == "serve-2-1")
    await system.kubectl("delete", "pod", victim.metadata.name, "-n", namespace, "--wait=false")

    async def recreated() -> Groups | None:
        now = await groups_now(system, namespace, 6)
        return now if not now.uids("2") & again.uids("2") else None

    after = await wait_for(recreated, timeout=120, what="group 2 made again and running")
    after.check(6)
    assert after.clique_of("2") == again.clique_of("2")
    for group in ("0", "1", "3", "4", "5"):
        assert after.uids(group) == again.uids(group)
        assert after.units[f"serve-{group}"] == again.units[f"serve-{group}"]
    await clean(system, namespace)


async def test_pods_of_a_kind_cdo_cannot_size_say_how_to_declare_the_gang(
    system: WholeSystem,
) -> None:
    namespace = "undeclared"
    await system.create_namespace(namespace)
    await apply(system, namespace, domain_yaml("ray"))
    await system.kubectl("create", "configmap", "ray-head", "-n", namespace)
    owner = await system.kubectl(
        "get", "configmap", "ray-head", "-n", namespace, "-o", "jsonpath={.metadata.uid}"
    )
    await apply(
        system,
        namespace,
        f"""
apiVersion: v1
kind: Pod
metadata:
  name: ray-worker
  ownerReferences:
    - apiVersion: v1
      kind: ConfigMap
      name: ray-head
      uid: {owner}
      controller: true
{pod_spec("ray", 4, indent=0)}""",
    )

    async def held() -> str | None:
        (pod,) = live(await system.pods(namespace))
        condition = pod.condition(PLACED_CONDITION)
        if condition is None or condition.reason != "GangSizeUndeclared" or not gated(pod):
            return None
        return condition.message

    message = await wait_for(held, timeout=60, what="the pod held with GangSizeUndeclared")
    assert "ConfigMap ray-head" in message and "spec.gang.size" in message
    assert await system.placement(namespace, "ray") is None
    explained = await system.cdo("explain", "pod/ray-worker", "-n", namespace)
    assert "GangSizeUndeclared" in explained
    await system.kubectl("delete", "pod", "ray-worker", "-n", namespace, "--wait=false")
    await clean(system, namespace)
