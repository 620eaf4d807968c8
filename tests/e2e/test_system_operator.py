"""What operators do to GPU nodes and workloads with a real ``kubectl``, on the whole system,
and how cdo reacts: cordon and uncordon, drain (through the Eviction subresource, blocked by a
PodDisruptionBudget with the real server's 429), taint, label, scale (the scale subresource),
rollout restart and status, ``get -w`` and ``auth can-i``.

Each test works in its own namespace and puts back every node it touched, so the tests share
one system."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from shared.crds.names import PLACED_CONDITION
from shared.kube.models import Pod
from tests.e2e.whole_system import (
    KUBECTL,
    WholeSystem,
    deployment_object,
    domain_object,
    gated,
    live,
    running_whole_system,
)
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

DRAIN_FLAGS = ("--ignore-daemonsets", "--delete-emptydir-data")
PDB_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system() as running:
        yield running


# -- kubectl as an operator runs it --------------------------------------------------------------


async def kubectl_result(system: WholeSystem, *args: str) -> tuple[int, str]:
    """``kubectl ARGS``: its exit status and its output (stdout and stderr together), for
    commands that are expected to fail."""
    process = await asyncio.create_subprocess_exec(
        str(KUBECTL), "--kubeconfig", str(system.kubeconfig), *args,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode()


@contextlib.asynccontextmanager
async def watching(system: WholeSystem, *args: str) -> AsyncIterator[Callable[[], list[str]]]:
    """``kubectl get ARGS -w`` running for the block; yields what it printed so far."""
    process = await asyncio.create_subprocess_exec(
        str(KUBECTL), "--kubeconfig", str(system.kubeconfig), "get", *args, "-w",
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    lines: list[str] = []

    async def read() -> None:
        assert process.stdout is not None
        async for line in process.stdout:
            lines.append(line.decode().rstrip("\n"))

    reader = asyncio.create_task(read())
    try:
        yield lambda: list(lines)
    finally:
        process.terminate()
        await process.wait()
        await reader


async def create_domain_workload(
    system: WholeSystem,
    namespace: str,
    name: str,
    *,
    replicas: int,
    gpus: int = 4,
    node_selector: dict[str, str] | None = None,
) -> None:
    """A ComputeDomain and a Deployment of its pods, applied with ``kubectl apply``."""
    await system.create_namespace(namespace)
    deployment = deployment_object(name, replicas=replicas, gpus=gpus)
    if node_selector:
        deployment["spec"]["template"]["spec"]["nodeSelector"] = node_selector
    manifest = "\n---\n".join(json.dumps(doc) for doc in (domain_object(name), deployment))
    await system.kubectl("apply", "-n", namespace, "-f", "-", stdin=manifest)


async def node_json(system: WholeSystem, name: str) -> dict[str, Any]:
    return dict(json.loads(await system.kubectl("get", "node", name, "-o", "json")))


def by_node(pods: list[Pod]) -> dict[str, str]:
    return {pod.spec.node_name: pod.metadata.name for pod in pods}


async def scale(system: WholeSystem, namespace: str, deployment: str, replicas: int) -> None:
    """``kubectl scale``, through the Deployment's scale subresource."""
    out = await system.kubectl(
        "scale", f"deployment/{deployment}", "-n", namespace, f"--replicas={replicas}"
    )
    assert f"deployment.apps/{deployment} scaled" in out


async def budget_settled(
    system: WholeSystem, namespace: str, name: str, *, generation: int, healthy: int, allowed: int
) -> dict[str, Any]:
    """The PodDisruptionBudget once the disruption controller has written this status."""

    async def settled() -> dict[str, Any] | None:
        found = json.loads(await system.kubectl("get", "pdb", name, "-n", namespace, "-o", "json"))
        status = found.get("status") or {}
        wanted = (generation, healthy, allowed)
        got = (
            status.get("observedGeneration"),
            status.get("currentHealthy"),
            status.get("disruptionsAllowed"),
        )
        return dict(found) if got == wanted else None

    return await wait_for(settled, timeout=60, interval=0.3, what=f"budget {name} settled")


async def clique_nodes(system: WholeSystem, clique: str) -> list[str]:
    return sorted(node for node, label in (await system.cliques()).items() if label == clique)


# -- tests ---------------------------------------------------------------------------------------


async def can_i(system: WholeSystem, *args: str) -> str:
    """``kubectl auth can-i ARGS``' answer (its last line: warnings come first)."""
    return (await system.kubectl("auth", "can-i", *args)).strip().splitlines()[-1]


async def test_auth_can_i_answers_for_the_admin(system: WholeSystem) -> None:
    assert await can_i(system, "create", "pods/eviction", "-A") == "yes"
    assert await can_i(system, "patch", "nodes") == "yes"
    assert await can_i(system, "update", "deployments.apps/scale", "-n", "default") == "yes"
    assert await can_i(system, "*", "*") == "yes"


async def test_a_drained_member_is_replaced_in_its_clique_and_an_uncordoned_node_is_used(
    system: WholeSystem,
) -> None:
    namespace, name = "drain", "trainer"
    await create_domain_workload(system, namespace, name, replicas=4)
    before = await system.wait_domain_ready(namespace, name, nodes=4)
    pods = await system.wait_running(namespace, f"app={name}", 4)
    clique = before.status.clique
    assert clique, "the domain runs in one clique"
    victim = sorted(pod.spec.node_name for pod in pods)[0]
    evicted = by_node(pods)[victim]
    try:
        async with watching(system, "nodes", victim) as printed:
            await system.kubectl("cordon", victim)
            # The watch shows the node's change as it happens.
            await wait_for(
                lambda: any("SchedulingDisabled" in line for line in printed()),
                timeout=30,
                interval=0.1,
                what="kubectl get -w showing the cordon",
            )
        assert (await node_json(system, victim))["spec"]["unschedulable"] is True
        # A cordon keeps new pods off; it disrupts nothing that runs.
        assert by_node(await system.wait_running(namespace, f"app={name}", 4))[victim] == evicted
        assert (await system.domain(namespace, name)).status.status == "Ready"  # type: ignore[union-attr]

        out = await system.kubectl("drain", victim, *DRAIN_FLAGS, "--timeout=90s")
        assert f"evicting pod {namespace}/{evicted}" in out
        assert f"node/{victim} drained" in out

        replaced = await system.wait_running(namespace, f"app={name}", 4)
        after = await system.wait_domain_ready(namespace, name, nodes=4)
        labels = await system.cliques()
        assert evicted not in {pod.metadata.name for pod in replaced}
        assert victim not in by_node(replaced)
        assert {labels[pod.spec.node_name] for pod in replaced} == {clique}
        assert (after.status.clique, after.status.channel) == (clique, before.status.channel)
        assert victim not in {node.name for node in after.status.nodes}
        placement = await system.placement(namespace, name)
        assert placement is not None
        assert victim not in {m.node for s in placement.spec.all_slices for m in s.members}
    finally:
        await system.kubectl("uncordon", victim)
    assert (await node_json(system, victim))["spec"].get("unschedulable") in (None, False)

    # The uncordoned node takes pods again: a gang of the whole clique needs every node of it.
    await scale(system, namespace, name, 18)
    grown = await system.wait_running(namespace, f"app={name}", 18)
    await system.wait_domain_ready(namespace, name, nodes=18)
    assert set(by_node(grown)) == set(await clique_nodes(system, clique))
    # Scaled down, the domain shrinks with it.
    await scale(system, namespace, name, 2)
    await system.wait_running(namespace, f"app={name}", 2)
    shrunk = await system.wait_domain_ready(namespace, name, nodes=2)
    assert shrunk.status.clique == clique
    await system.clean_up(namespace)


async def test_a_drained_member_of_a_full_clique_waits_there_until_it_is_uncordoned(
    system: WholeSystem,
) -> None:
    namespace, name = "full", "whole"
    await create_domain_workload(system, namespace, name, replicas=18)
    before = await system.wait_domain_ready(namespace, name, nodes=18)
    victim = sorted(by_node(await system.wait_running(namespace, f"app={name}", 18)))[0]

    async def waiting() -> Pod | None:
        found = [p for p in live(await system.pods(namespace, f"app={name}")) if gated(p)]
        placed = found[0].condition(PLACED_CONDITION) if len(found) == 1 else None
        return found[0] if placed is not None and placed.reason == "CliqueFull" else None

    def statuses(lines: list[str]) -> list[str]:
        """The STATUS column of the rows ``kubectl get computedomains -w`` printed, each
        change once (a status update that keeps the column prints the same value again)."""
        seen = [line.split()[1] for line in lines if line.startswith(f"{name} ")]
        return [value for i, value in enumerate(seen) if i == 0 or seen[i - 1] != value]

    async with watching(system, "computedomains", "-n", namespace) as printed:
        try:
            await system.kubectl("drain", victim, *DRAIN_FLAGS, "--timeout=90s")
            replacement: Pod = await wait_for(
                waiting, timeout=60, interval=0.2, what="the replacement waiting with CliqueFull"
            )
            # A cordon is maintenance: the slice is not taken as stuck, so it never fails over
            # to the empty clique; it waits in its own.
            placement = await system.placement(namespace, name)
            assert placement is not None
            assert [(s.clique, s.waiting_since) for s in placement.spec.all_slices] == [
                (before.status.clique, None)
            ]
            domain = await system.domain(namespace, name)
            assert domain is not None and domain.status.status == "NotReady"
        finally:
            await system.kubectl("uncordon", victim)
        await system.wait_domain_ready(namespace, name, nodes=18)
        # The watch shows the domain going NotReady with the drain, and Ready again.
        await wait_for(
            lambda: statuses(printed())[-2:] == ["NotReady", "Ready"],
            timeout=30,
            interval=0.1,
            what="kubectl get computedomains -w showing NotReady, then Ready",
        )
    pods = await system.wait_running(namespace, f"app={name}", 18)
    assert by_node(pods)[victim] == replacement.metadata.name
    await system.clean_up(namespace)


async def test_a_disruption_budget_blocks_a_drain_until_it_allows_the_eviction(
    system: WholeSystem,
) -> None:
    namespace, name = "budget", "guarded"
    await create_domain_workload(system, namespace, name, replicas=2)
    before = await system.wait_domain_ready(namespace, name, nodes=2)
    pods = await system.wait_running(namespace, f"app={name}", 2)
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": name}}},
    }
    await system.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(budget))
    await budget_settled(system, namespace, name, generation=1, healthy=2, allowed=0)
    victim = sorted(by_node(pods))[0]
    held = by_node(pods)[victim]
    try:
        code, out = await kubectl_result(system, "drain", victim, *DRAIN_FLAGS, "--timeout=8s")
        # kubectl retries only a 429 (TooManyRequests), with the server's message, until its
        # timeout.
        assert code != 0, out
        assert (
            f'error when evicting pods/"{held}" -n "{namespace}" (will retry after 5s): '
            f"{PDB_REFUSAL}" in out
        )
        assert (await node_json(system, victim))["spec"]["unschedulable"] is True
        still = await system.wait_running(namespace, f"app={name}", 2)
        assert by_node(still)[victim] == held
        assert (await system.domain(namespace, name)).status.status == "Ready"  # type: ignore[union-attr]

        patch = json.dumps({"spec": {"minAvailable": 1}})
        await system.kubectl("patch", "pdb", name, "-n", namespace, "--type=merge", "-p", patch)
        await budget_settled(system, namespace, name, generation=2, healthy=2, allowed=1)
        out = await system.kubectl("drain", victim, *DRAIN_FLAGS, "--timeout=90s")
        assert f"node/{victim} drained" in out
        replaced = await system.wait_running(namespace, f"app={name}", 2)
        after = await system.wait_domain_ready(namespace, name, nodes=2)
        assert victim not in by_node(replaced)
        labels = await system.cliques()
        assert {labels[node] for node in by_node(replaced)} == {before.status.clique}
    finally:
        await system.kubectl("uncordon", victim)
    assert after.status.channel == before.status.channel
    await system.kubectl("delete", "pdb", name, "-n", namespace)
    await system.clean_up(namespace)


async def test_rollout_restart_makes_a_new_replica_set_and_the_domain_follows(
    system: WholeSystem,
) -> None:
    namespace, name = "rollout", "server"
    await create_domain_workload(system, namespace, name, replicas=4)
    await system.wait_domain_ready(namespace, name, nodes=4)
    old = {pod.metadata.name for pod in await system.wait_running(namespace, f"app={name}", 4)}

    out = await system.kubectl("rollout", "restart", f"deployment/{name}", "-n", namespace)
    assert f"deployment.apps/{name} restarted" in out
    status = await system.kubectl(
        "rollout", "status", f"deployment/{name}", "-n", namespace, "--timeout=120s"
    )
    assert "successfully rolled out" in status

    sets = json.loads(await system.kubectl("get", "rs", "-n", namespace, "-o", "json"))["items"]
    assert len(sets) == 2
    (current,) = [rs for rs in sets if rs["spec"]["replicas"] == 4]
    annotations = current["spec"]["template"]["metadata"]["annotations"]
    assert "kubectl.kubernetes.io/restartedAt" in annotations
    assert current["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    pods = await system.wait_running(namespace, f"app={name}", 4)
    assert not old & {pod.metadata.name for pod in pods}
    hashes = {pod.metadata.labels["pod-template-hash"] for pod in pods}
    assert hashes == {current["metadata"]["labels"]["pod-template-hash"]}
    await system.wait_domain_ready(namespace, name, nodes=4)
    await system.clean_up(namespace)


async def test_labels_and_taints_steer_placement(system: WholeSystem) -> None:
    namespace, name = "steer", "tenant"
    clique = next(label for label in (await system.cliques()).values() if label)
    chosen = (await clique_nodes(system, clique))[5:8]
    tainted = chosen[0]
    try:
        await system.kubectl("label", "nodes", *chosen, "pool=reserved")
        await system.kubectl("taint", "nodes", tainted, "dedicated=other:NoSchedule")
        shown = await system.kubectl("get", "nodes", "-l", "pool=reserved", "-o", "name")
        assert sorted(shown.split()) == [f"node/{node}" for node in chosen]
        taints = (await node_json(system, tainted))["spec"]["taints"]
        assert {"key": "dedicated", "value": "other", "effect": "NoSchedule"} in taints

        await create_domain_workload(
            system, namespace, name, replicas=2, node_selector={"pool": "reserved"}
        )
        pods = await system.wait_running(namespace, f"app={name}", 2)
        assert set(by_node(pods)) == set(chosen[1:])

        await system.kubectl("taint", "nodes", tainted, "dedicated:NoSchedule-")
        await scale(system, namespace, name, 3)
        pods = await system.wait_running(namespace, f"app={name}", 3)
        assert set(by_node(pods)) == set(chosen)
        await system.wait_domain_ready(namespace, name, nodes=3)
    finally:
        await kubectl_result(system, "taint", "nodes", tainted, "dedicated:NoSchedule-")
        await system.kubectl("label", "nodes", *chosen, "pool-")
    await system.clean_up(namespace)
