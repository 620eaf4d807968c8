"""Every service's real /metrics on the whole simulated system: promtool finds no problem, and
the series the monitoring kit relies on are there with the values the system has.

The domain controller and the clique allocator are real service processes (their probe ports);
the IMEX agents and health monitors are the node host's hosted services, served at
``<control URL>/nodes/<node>/metrics/<service>``.
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from sim.control.state import read_controlplane, read_nodehost
from tests.e2e.whole_system import WholeSystem, running_whole_system
from tests.support import promtool
from tests.support.wait import wait_for

NAMESPACE = "metrics"
CONTROL_PLANE = ("domain-controller", "clique-allocator")
NODE_SERVICES = ("imex-agent", "health-monitor")

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system() as running:
        await running.create_namespace(NAMESPACE)
        await running.create_workload(NAMESPACE, "train", replicas=2, gpus=4)
        await running.wait_domain_ready(NAMESPACE, "train")
        yield running


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        body: bytes = response.read()
        return body


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(body: bytes) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def value(found: Samples, name: str, /, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(v for (n, have), v in found.items() if n == name and set(labels.items()) <= have)


async def bodies_of(system: WholeSystem, nodes: list[str]) -> dict[str, bytes]:
    """/metrics of both control-plane services and of both services of each of ``nodes``."""
    info = read_controlplane(system.state_dir)
    host = read_nodehost(system.state_dir)
    assert info is not None and host is not None
    urls = {name: info.services[name].probe_url + "/metrics" for name in CONTROL_PLANE}
    for node in nodes:
        for service in NODE_SERVICES:
            urls[f"{service} {node}"] = f"{host.control_url}/nodes/{node}/metrics/{service}"
    fetched = await asyncio.gather(*(asyncio.to_thread(fetch, url) for url in urls.values()))
    return dict(zip(urls, fetched, strict=True))


async def member_nodes(system: WholeSystem) -> list[str]:
    domain = await system.domain(NAMESPACE, "train")
    assert domain is not None
    return [node.name for node in domain.status.nodes]


async def test_promtool_finds_no_problem_in_any_services_metrics(system: WholeSystem) -> None:
    promtool.promtool()
    members = await member_nodes(system)
    host = read_nodehost(system.state_dir)
    assert host is not None
    idle = [node for node in host.nodes if node not in members][:1]
    bodies = await bodies_of(system, [*members, *idle])
    assert len(bodies) == len(CONTROL_PLANE) + len(NODE_SERVICES) * (len(members) + len(idle))
    for where, body in bodies.items():
        status, output = await asyncio.to_thread(promtool.check_metrics, body)
        assert status == 0, f"{where}: {output}"
        found = samples(body)
        service = where.split(" ")[0]
        assert value(found, "cdo_build_info", service=service) == 1, where
        assert value(found, "process_resident_memory_bytes") > 0, where
        assert value(found, "python_info") == 1, where


async def test_the_series_the_kit_relies_on_have_the_systems_values(system: WholeSystem) -> None:
    members = await member_nodes(system)
    bodies = await bodies_of(system, members)

    controller = samples(bodies["domain-controller"])
    assert value(controller, "cdo_domains", phase="Ready") == 1
    assert value(controller, "cdo_domains_degraded_longest_seconds") == 0
    assert value(controller, "leader_election_master_status") == 1, "the one replica leads"
    assert value(controller, "controller_runtime_reconcile_total", controller="computedomains") > 0
    assert value(controller, "workqueue_adds_total", name="computedomains") > 0
    assert value(controller, "controller_runtime_max_concurrent_reconciles") > 0

    async def capacity_published() -> Samples | None:
        found = samples(await asyncio.to_thread(fetch_allocator, system))
        return found if value(found, "cdo_clique_gpus", state="total") > 0 else None

    allocator = await wait_for(capacity_published, what="clique capacity gauges")
    total = value(allocator, "cdo_clique_gpus", state="total")
    free = value(allocator, "cdo_clique_gpus", state="free")
    assert total - free >= 8, "the domain's two pods hold four GPUs each"
    assert value(allocator, "cdo_placement_decision_seconds_count") > 0

    for node in members:
        agent = samples(bodies[f"imex-agent {node}"])
        assert value(agent, "cdo_imex_ready") == 1, node
        monitor = samples(bodies[f"health-monitor {node}"])
        assert value(monitor, "cdo_health_breaker_withheld") == 0, node


def fetch_allocator(system: WholeSystem) -> bytes:
    info = read_controlplane(system.state_dir)
    assert info is not None
    return fetch(info.services["clique-allocator"].probe_url + "/metrics")
