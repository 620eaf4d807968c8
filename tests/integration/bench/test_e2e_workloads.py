"""The end-to-end benchmark's scenarios: the seed scenario is the shipped example, every scenario
fits the benchmark's cluster the way it claims to (the failover domain in one clique, with room
for it in another), the slice check accepts the expected Placement and names what is wrong with
others, the failover and fault checks read what they should, and the manifests as the
benchmark writes them are accepted by ``kubectl apply`` against the API emulator with cdo's CRDs
installed (schema and CEL rules included). The report is tested in tests/unit/bench."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
import yaml

from bench._e2e_failover import clique_whole, failed_over
from bench._e2e_fault import split_restarts
from bench._e2e_probe import Look, NodeLook, slice_problems
from bench._e2e_workloads import (
    FAILOVER_GRACE_S,
    JOB_COMPLETION_INDEX,
    Manifest,
    Scenario,
    compute_domain,
    failover_target,
    fault_target,
    gpu72,
    namespace_manifest,
    render,
    seed,
    slices,
    whole_cluster,
)
from bench.e2e import HEALTH_TIMINGS, ROLES, SIZES, bench_health_timings, scenarios
from shared.crds import (
    COMPUTE_DOMAINS,
    ComputeDomain,
    PlacementSlice,
    PlacementSpec,
    install_crds,
)
from shared.crds.placement import PlacedPod, SliceMember
from shared.kube.client import KubeClient
from shared.kube.models import Pod
from sim.kubeapi import KubeServer, serve
from sim.topology import load_topology
from tests.support.conversion import conversion_webhook

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "deploy" / "examples"
KUBECTL = Path(sys.executable).parent / "kubectl"
SCENARIOS = [seed(), gpu72(), slices(), whole_cluster(), fault_target(), failover_target()]


def without_namespace(manifest: Manifest) -> Manifest:
    metadata = {k: v for k, v in manifest["metadata"].items() if k != "namespace"}
    return {**manifest, "metadata": metadata}


def workloads(scenario: Scenario) -> list[Manifest]:
    return [m for m in scenario.manifests if m["kind"] in ("Deployment", "Job")]


def pods_of(workload: Manifest) -> int:
    spec = workload["spec"]
    return int(spec["replicas"] if workload["kind"] == "Deployment" else spec["parallelism"])


def gang_of(scenario: Scenario) -> Manifest | None:
    (domain,) = [m for m in scenario.manifests if m["kind"] == "ComputeDomain"]
    gang: Manifest | None = domain["spec"].get("gang")
    return gang


def test_the_seed_scenario_is_the_shipped_example() -> None:
    shipped = [
        yaml.safe_load((EXAMPLES / name).read_text())
        for name in ("training-domain-1.yaml", "llm-training.yaml")
    ]
    assert [without_namespace(m) for m in seed().manifests] == shipped


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.key)
def test_a_scenario_asks_for_what_it_says(scenario: Scenario) -> None:
    assert {m["metadata"]["namespace"] for m in scenario.manifests} == {scenario.namespace}
    domains = [m["metadata"]["name"] for m in scenario.manifests if m["kind"] == "ComputeDomain"]
    assert tuple(domains) == scenario.domains
    assert sum(pods_of(workload) for workload in workloads(scenario)) == scenario.pods
    for workload in workloads(scenario):
        pod = workload["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == scenario.gpus_per_pod
        (claim,) = pod["resourceClaims"]
        assert claim["resourceClaimTemplateName"] in {f"{d}-rct" for d in scenario.domains}


def test_the_multi_clique_scenarios_are_indexed_jobs_of_one_domain() -> None:
    for scenario in (slices(), whole_cluster()):
        (job,) = workloads(scenario)
        assert job["kind"] == "Job"
        spec = job["spec"]
        assert spec["completionMode"] == "Indexed"
        assert spec["completions"] == spec["parallelism"] == scenario.pods
        assert spec["template"]["spec"]["restartPolicy"] == "Never"
        assert len(scenario.domains) == 1
    # The gang is the Job's parallelism; (c) asks for slices of 64, (d) leaves the cut to the
    # allocator.
    assert gang_of(slices()) == {"sliceSize": 64}
    assert gang_of(whole_cluster()) is None


@pytest.mark.parametrize("size", sorted(SIZES))
def test_every_scenario_fits_the_cluster_and_the_slices_land_a_clique_each(size: str) -> None:
    chosen = SIZES[size]
    cliques = load_topology(chosen.topology).cliques
    clique_gpus = [sum(len(node.gpus) for node in nodes) for nodes in cliques.values()]
    assert len(clique_gpus) == chosen.cliques
    built = scenarios(chosen)
    assert set(built) | {"fault", "failover", "nats-outage"} == set(ROLES)

    sliced = built["slices"]
    assert sliced.slice_sizes == (64,) * chosen.cliques
    assert sum(sliced.slice_sizes) == sliced.pods
    # No clique can hold two slices of 64 one-GPU pods: each lands in a clique of its own.
    assert all(64 <= gpus < 2 * 64 for gpus in clique_gpus)

    whole = built["whole"]
    assert whole.gpus == sum(clique_gpus)
    # The fewest slices that fit: one per clique, each filling its clique's GPUs.
    assert [size * whole.gpus_per_pod for size in whole.slice_sizes] == clique_gpus

    for single in (built["seed"], built["gpu72"], fault_target(), failover_target()):
        assert single.gpus <= max(clique_gpus)
        assert not single.slice_sizes
    # The failover domain fits any clique: when its own loses its fabric, another has room.
    assert failover_target().gpus <= min(clique_gpus)


def test_the_full_size_is_the_issues_256_pods_and_the_whole_288_gpus() -> None:
    built = scenarios(SIZES["full"])
    sliced, whole = built["slices"], built["whole"]
    assert (sliced.key, sliced.pods, sliced.slice_sizes) == ("slices256", 256, (64,) * 4)
    assert (whole.key, whole.pods, whole.gpus, whole.slice_sizes) == (
        "whole_cluster",
        72,
        288,
        (18,) * 4,
    )
    small = scenarios(SIZES["small"])
    assert (small["slices"].key, small["slices"].pods) == ("slices128", 128)
    assert (small["whole"].pods, small["whole"].slice_sizes) == (36, (18, 18))


def test_the_bench_shortens_the_health_timings_unless_told_otherwise() -> None:
    environ = {"CDO_CLIQUE_ALLOCATOR_BREAKER_WINDOW_S": "60"}
    chosen = bench_health_timings(environ)
    assert chosen == {**HEALTH_TIMINGS, "CDO_CLIQUE_ALLOCATOR_BREAKER_WINDOW_S": "60"}
    assert environ == chosen  # what the node host inherits
    assert float(HEALTH_TIMINGS["CDO_CLIQUE_ALLOCATOR_BREAKER_WINDOW_S"]) < float(
        HEALTH_TIMINGS["CDO_HEALTH_XID_LATCH_S"]
    ) + float(HEALTH_TIMINGS["CDO_HEALTH_HOLD_DOWN_S"])  # a healed node no longer counts


def test_restarts_split_into_the_faulted_nodes_and_the_others() -> None:
    assert split_restarts({"a": 0, "b": 2, "c": 1}, {"b"}) == (1, 2)
    assert split_restarts({}, set()) == (0, 0)


# -- the failover check ---------------------------------------------------------------------


def failover_domain(*, clique: str, status: str = "Ready", members: int = 9) -> ComputeDomain:
    return msgspec.convert(
        {
            "metadata": {"name": "failover-domain", "namespace": "e2e-failover"},
            "spec": {"channel": {"resourceClaimTemplate": {"name": "failover-domain-rct"}}},
            "status": {
                "status": status,
                "clique": clique,
                "nodes": [
                    {"name": f"{clique}-n{i}", "cliqueID": clique, "status": "Ready"}
                    for i in range(members)
                ],
            },
        },
        ComputeDomain,
    )


def failover_look(domain: ComputeDomain, *, on: str, pods: int = 9) -> Look:
    return Look(
        domains={domain.metadata.name: domain},
        pods=[indexed_pod(i, f"{on}-n{i}", name=f"p{i}") for i in range(pods)],
        terminating=0,
    )


def test_failed_over_once_ready_in_another_clique_with_every_pod_on_its_members() -> None:
    scenario = failover_target()
    assert failed_over(failover_look(failover_domain(clique="b.1"), on="b.1"), scenario, "a.1") == (
        "b.1"
    )
    not_yet = [
        failover_look(failover_domain(clique="a.1"), on="a.1"),  # still in the lost clique
        failover_look(failover_domain(clique="b.1", status="NotReady"), on="b.1"),
        failover_look(failover_domain(clique="b.1"), on="b.1", pods=8),
        failover_look(failover_domain(clique="b.1"), on="a.1"),  # pods elsewhere
        failover_look(failover_domain(clique=""), on="b.1"),
    ]
    assert [failed_over(seen, scenario, "a.1") for seen in not_yet] == [None] * len(not_yet)


def test_a_clique_is_whole_again_with_every_node_labelled_and_imex_ready() -> None:
    nodes = {
        "n1": NodeLook(clique="a.1", tainted=False, imex_ready=True),
        "n2": NodeLook(clique="a.1", tainted=False, imex_ready=True),
        "n3": NodeLook(clique="", tainted=True, imex_ready=False),
    }
    assert clique_whole(nodes, ["n1", "n2"], "a.1")
    assert not clique_whole(nodes, ["n1", "n3"], "a.1")
    assert not clique_whole(nodes, ["n1", "gone"], "a.1")
    assert not clique_whole(
        {**nodes, "n2": NodeLook("a.1", False, imex_ready=False)}, ["n2"], "a.1"
    )


# -- the slice check ------------------------------------------------------------------------


def indexed_pod(index: int, node: str, *, name: str = "") -> Pod:
    """A running pod of an Indexed Job, ``job-<index>`` unless ``name`` says otherwise."""
    return msgspec.convert(
        {
            "metadata": {
                "name": name or f"job-{index}",
                "namespace": "ns",
                "labels": {JOB_COMPLETION_INDEX: str(index)},
            },
            "spec": {"nodeName": node},
            "status": {"phase": "Running"},
        },
        Pod,
    )


def placement_of(sizes: list[int], *, cliques: list[str] | None = None) -> PlacementSpec:
    """Slices of ``sizes`` one-GPU pods, ranks from 0, four pods per node, pod ``job-<rank>``."""
    pieces = []
    first_rank = 0
    for index, size in enumerate(sizes):
        members = [
            SliceMember(
                node=f"c{index}-n{start // 4}",
                slot=start // 4,
                gpus=4,
                pods=tuple(
                    PlacedPod(name=f"job-{first_rank + r}", rank=first_rank + r)
                    for r in range(start, min(start + 4, size))
                ),
            )
            for start in range(0, size, 4)
        ]
        clique = cliques[index] if cliques is not None else f"uuid.{index}"
        pieces.append(
            PlacementSlice(
                index=index,
                clique=clique,
                channel=1,
                first_rank=first_rank,
                size=size,
                members=tuple(members),
            )
        )
        first_rank += size
    return PlacementSpec(gpus_per_pod=1, size=first_rank, slices=tuple(pieces))


def running_pods(spec: PlacementSpec) -> list[Pod]:
    return [
        indexed_pod(placed.rank, member.node)
        for piece in spec.all_slices
        for member in piece.members
        for placed in member.pods
    ]


def test_the_slice_check_accepts_the_expected_slices() -> None:
    scenario = slices(pods=128)
    spec = placement_of([64, 64])
    assert slice_problems(scenario, spec, running_pods(spec)) == []


def test_the_slice_check_names_what_differs() -> None:
    scenario = slices(pods=128)
    one_clique = placement_of([64, 64], cliques=["uuid.0", "uuid.0"])
    assert slice_problems(scenario, one_clique, running_pods(one_clique)) == [
        "slices share cliques: ['uuid.0', 'uuid.0']"
    ]
    uneven = placement_of([72, 56])
    assert slice_problems(scenario, uneven, running_pods(uneven)) == [
        "slice sizes [72, 56], expected [64, 64]"
    ]
    spec = placement_of([64, 64])
    wrong = [
        indexed_pod(3, "c1-n1"),
        indexed_pod(6, "c0-n1", name="job-5"),
        indexed_pod(999, "c0-n0"),
    ]
    assert slice_problems(scenario, spec, wrong) == [
        "pod job-3 runs on c1-n1, seated on c0-n0",
        "pod job-5 (index 6) sits at rank 5 in slice 0",
        "pod job-999 is seated in no slice",
    ]
    short = placement_of([64, 64])
    first, second = short.slices
    second = msgspec.structs.replace(second, first_rank=65, members=second.members[1:])
    short = msgspec.structs.replace(short, slices=(first, second))
    assert slice_problems(scenario, short, []) == [
        "slice 1 starts at rank 65, expected 64",
        "slice 1 seats 60 of 64 pods",
    ]


# -- against the API emulator ---------------------------------------------------------------


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[KubeServer]:
    """The emulator with cdo's CRDs; the scenarios are written as v1beta1, as users write
    them, so cdo's conversion webhook serves the CRD."""
    async with serve(kubeconfig=tmp_path / "kubeconfig") as server, conversion_webhook() as hook:
        client = await KubeClient.connect(kubeconfig=server.kubeconfig)
        try:
            await install_crds(client, hook.crds())
        finally:
            await client.close()
        yield server


async def kubectl(kube: KubeServer, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        str(KUBECTL), "--kubeconfig", str(kube.kubeconfig), *args,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode()


async def apply(kube: KubeServer, tmp_path: Path, manifests: tuple[Manifest, ...]) -> str:
    path = tmp_path / "manifests.yaml"
    path.write_text(render(manifests))
    code, out = await kubectl(kube, "apply", "-f", str(path))
    assert code == 0, out
    return out


class _Domains(msgspec.Struct):
    items: list[ComputeDomain]


async def test_kubectl_apply_accepts_every_scenario_as_the_bench_writes_it(
    kube: KubeServer, tmp_path: Path
) -> None:
    for scenario in SCENARIOS:
        await apply(kube, tmp_path, (namespace_manifest(scenario.namespace),))
        out = await apply(kube, tmp_path, scenario.manifests)
        assert out.count("created") == len(scenario.manifests), out

    client = await KubeClient.connect(kubeconfig=kube.kubeconfig)
    try:
        stored = {
            scenario.key: msgspec.json.decode(
                await client.list(COMPUTE_DOMAINS, namespace=scenario.namespace), type=_Domains
            ).items
            for scenario in SCENARIOS
        }
    finally:
        await client.close()
    for scenario in SCENARIOS:
        assert tuple(sorted(d.metadata.name for d in stored[scenario.key])) == scenario.domains
    (sliced,) = stored["slices256"]
    assert sliced.spec.gang is not None
    assert (sliced.spec.gang.size, sliced.spec.gang.slice_size) == (None, 64)
    (whole_domain,) = stored["whole_cluster"]
    assert whole_domain.spec.gang is None
    (mover,) = stored["failover"]
    assert (mover.spec.failover.policy, mover.spec.failover.grace_seconds) == (
        "Move",
        FAILOVER_GRACE_S,
    )


async def test_the_crd_schema_is_enforced_on_what_the_builders_could_get_wrong(
    kube: KubeServer, tmp_path: Path
) -> None:
    await apply(kube, tmp_path, (namespace_manifest("bad"),))
    path = tmp_path / "bad.yaml"
    for bad, field in (
        (compute_domain("bad-gang", "bad", gang_size=0), "spec.gang.size"),
        (compute_domain("bad-slices", "bad", slice_size=0), "spec.gang.sliceSize"),
    ):
        path.write_text(render((bad,)))
        code, out = await kubectl(kube, "apply", "-f", str(path))
        assert code != 0
        assert field in out


def test_scenario_e_is_an_lws_of_16_groups_of_4_one_gpu_pods() -> None:
    lws = scenarios(SIZES["small"])["lws"]
    assert (lws.key, lws.pods, lws.gpus_per_pod, lws.domains) == (
        "lws_groups_ready",
        64,
        1,
        ("lws",),
    )
    (workload,) = [m for m in lws.manifests if m["kind"] == "LeaderWorkerSet"]
    assert workload["spec"]["replicas"] == 16
    assert workload["spec"]["leaderWorkerTemplate"]["size"] == 4
