"""The end-to-end benchmark's scenarios: the seed scenario is the shipped example, every scenario
fits the benchmark's cluster the way it claims to, and the manifests as the benchmark writes them
are accepted by ``kubectl apply`` against the API emulator with cdo's CRDs installed (schema and
CEL rules included)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
import yaml

from bench._e2e_fault import Recovery
from bench._e2e_workloads import (
    Manifest,
    Scenario,
    compute_domain,
    fault_target,
    gpu72,
    namespace_manifest,
    render,
    seed,
    slices,
)
from bench.e2e import SIZES, Samples, report, scenarios
from shared.crds import COMPUTE_DOMAINS, ComputeDomain, install_crds
from shared.kube.client import KubeClient
from sim.kubeapi import KubeServer, serve
from sim.topology import load_topology

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "deploy" / "examples"
KUBECTL = Path(sys.executable).parent / "kubectl"
SCENARIOS = [seed(), gpu72(), slices(), fault_target()]


def without_namespace(manifest: Manifest) -> Manifest:
    metadata = {k: v for k, v in manifest["metadata"].items() if k != "namespace"}
    return {**manifest, "metadata": metadata}


def deployments(scenario: Scenario) -> list[Manifest]:
    return [m for m in scenario.manifests if m["kind"] == "Deployment"]


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
    replicas = sum(d["spec"]["replicas"] for d in deployments(scenario))
    assert replicas == scenario.pods
    for deployment in deployments(scenario):
        pod = deployment["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == scenario.gpus_per_pod
        (claim,) = pod["resourceClaims"]
        assert claim["resourceClaimTemplateName"] in {f"{d}-rct" for d in scenario.domains}


@pytest.mark.parametrize("size", sorted(SIZES))
def test_each_slice_gets_a_clique_of_its_own_and_every_scenario_fits(size: str) -> None:
    chosen = SIZES[size]
    cliques = load_topology(chosen.topology).cliques
    clique_gpus = [sum(len(node.gpus) for node in nodes) for nodes in cliques.values()]
    built = scenarios(chosen)
    sliced = built["slices"]
    per_slice = sliced.gpus // len(sliced.domains)
    # As many cliques as slices, and no clique can hold two slices: each lands in its own.
    assert len(clique_gpus) == len(sliced.domains) == chosen.slices
    assert all(per_slice <= gpus < 2 * per_slice for gpus in clique_gpus)
    gangs = [m["spec"]["gang"]["size"] for m in sliced.manifests if m["kind"] == "ComputeDomain"]
    assert gangs == [64] * chosen.slices
    for single in (built["seed"], built["gpu72"], fault_target()):
        assert single.gpus <= max(clique_gpus)


def test_the_full_size_is_the_issues_256_pods() -> None:
    sliced = scenarios(SIZES["full"])["slices"]
    assert (sliced.key, sliced.pods, len(sliced.domains)) == ("slices256", 256, 4)


def test_the_report_ends_with_the_result_line_and_marks_timed_out_runs() -> None:
    built = scenarios(SIZES["full"])
    lines = report(
        [
            Samples(built["seed"], [2.5, 1.9, 2.1]),
            Samples(built["slices"], [9.0, 120.0], timeouts=1),
        ],
        [Recovery(node="n", replacement_node="m", degraded_s=0.5, recovered_s=0.8)],
        nodes=72,
        bringup_s=48,
    )
    assert lines[-1] == (
        "RESULT seed_p50_s=2.10 gpu72_p50_s=0.00 slices256_p50_s=64.50 "
        "fault_recovered_s=0.80 anchor_256_s=480"
    )
    assert any(">=64.50" in line and "~480 s" in line for line in lines)
    assert "target seed < 3 s: met (p50 2.10 s)" in lines
    assert "target slices256 < 10 s: MISSED (p50 64.50 s)" in lines


# -- against the API emulator ---------------------------------------------------------------


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[KubeServer]:
    async with serve(kubeconfig=tmp_path / "kubeconfig") as server:
        client = await KubeClient.connect(kubeconfig=server.kubeconfig)
        try:
            await install_crds(client)
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
    gangs = {d.spec.gang.size for d in stored["slices256"] if d.spec.gang is not None}
    assert gangs == {64}


async def test_the_crd_schema_is_enforced_on_what_the_builders_could_get_wrong(
    kube: KubeServer, tmp_path: Path
) -> None:
    await apply(kube, tmp_path, (namespace_manifest("bad"),))
    path = tmp_path / "bad.yaml"
    path.write_text(render((compute_domain("bad-gang", "bad", gang_size=0),)))
    code, out = await kubectl(kube, "apply", "-f", str(path))
    assert code != 0
    assert "spec.gang.size" in out
