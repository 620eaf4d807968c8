"""Channel isolation over the real plugin: forged claims get nothing, members get their channel.

One node with its agent, the API emulator over HTTP, and the kubelet's side of the DRA plugin
protocol over the unix socket. Each example writes real ResourceClaims and Placements, calls
NodePrepareResources, and looks at what the agent made on the node (channel devices, CDI specs).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.crds.names import DOMAIN_LABEL, DOMAIN_UID_LABEL
from shared.kube.resources import RESOURCE_CLAIMS
from shared.kubeletapi import Claim, DraPluginClient
from tests.integration.imex_agent.harness import (
    ImexCluster,
    SimNode,
    create_claim,
    create_domain,
    seat_pod,
)


class Node:
    def __init__(self, cluster: ImexCluster, sim: SimNode, plugin: DraPluginClient) -> None:
        self.cluster = cluster
        self.sim = sim
        self.plugin = plugin

    def channels(self) -> set[int]:
        return {int(p.name.removeprefix("channel")) for p in self.sim.device_root.glob("channel*")}

    def has_spec(self, claim: Claim) -> bool:
        return (self.sim.cdi_root / f"cdo.dev-imex-channel_{claim.uid}.json").exists()

    async def prepare(self, *claims: Claim) -> dict[str, Any]:
        return dict(await self.plugin.prepare(list(claims)))


@pytest.fixture
async def node(cluster: ImexCluster) -> Node:
    sim = cluster.node_list()[0]
    await cluster.register(sim)
    await cluster.start(sim)
    return Node(cluster, sim, await cluster.plugin(sim))


_RUNS = itertools.count()
FORGERIES = (
    "copied-labels",
    "other-namespace",
    "recreated-claim",
    "recreated-pod",
    "other-domain",
    "no-pod",
    "pinned-elsewhere",
)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kinds=st.lists(st.sampled_from(FORGERIES), min_size=1, max_size=5),
    channels=st.lists(st.integers(0, 2047), min_size=3, max_size=3, unique=True),
)
async def test_no_forged_claim_gets_a_channel_while_the_member_gets_its_own(
    node: Node, kinds: list[str], channels: list[int]
) -> None:
    """``train`` (team-a) seats pod ``train-0`` here and ``train-far`` on another node;
    ``other`` (team-a) seats ``other-0`` here; a namesake ``train`` lives in team-b. Forged
    claims aim at team-a's ``train``."""
    client = node.cluster.client
    run = f"i{next(_RUNS)}"
    here, there = f"{run}-a", f"{run}-b"
    clique, name = node.sim.topology.clique, node.sim.name
    train = await create_domain(
        client, namespace=here, name="train", channel=channels[0], clique=clique
    )
    other = await create_domain(
        client, namespace=here, name="other", channel=channels[1], clique=clique
    )
    await create_domain(client, namespace=there, name="train", channel=channels[2], clique=clique)
    member = await create_claim(
        client, namespace=here, name="train-0-c", domain=train, node=name, pod="train-0"
    )
    await seat_pod(client, other, pod="other-0", node=name)
    await seat_pod(client, train, pod="train-far", node="far-away")
    copied = {DOMAIN_LABEL: train.name, DOMAIN_UID_LABEL: train.uid}

    forged: list[Claim] = []
    for index, kind in enumerate(kinds):
        claim_name = f"forged-{index}"
        device = f"attach-{1 + index % 3}"
        common: dict[str, Any] = {"name": claim_name, "node": name, "device": device}
        if kind == "copied-labels":
            claim = await create_claim(
                client, namespace=here, domain=train, pod=f"mine-{index}", seat=False, **common
            )
        elif kind == "other-namespace":
            # Labels of team-a's domain, reserved for a pod named like its member.
            claim = await create_claim(
                client, namespace=there, domain=None, labels=copied, pod="train-0", **common
            )
        elif kind == "recreated-claim":
            # The kubelet names a claim that was deleted and made again under its name.
            made = await create_claim(
                client, namespace=here, domain=train, pod="train-0", seat=False, **common
            )
            await client.delete(RESOURCE_CLAIMS, claim_name, namespace=here)
            await create_claim(
                client, namespace=here, domain=train, pod="train-0", seat=False, **common
            )
            claim = made
        elif kind == "recreated-pod":
            # A pod that took the member's name after it, with its own uid.
            claim = await create_claim(
                client,
                namespace=here,
                domain=train,
                pod="train-0",
                uid=f"uid-impostor-{index}",
                seat=False,
                **common,
            )
        elif kind == "no-pod":
            claim = await create_claim(
                client, namespace=here, domain=train, reserve=False, seat=False, **common
            )
        elif kind == "pinned-elsewhere":
            # A member's pod, but the allocator pinned it to another node.
            claim = await create_claim(
                client, namespace=here, domain=train, pod="train-far", seat=False, **common
            )
        else:
            # Pinned here, but for the other domain.
            claim = await create_claim(
                client, namespace=here, domain=None, labels=copied, pod="other-0", **common
            )
        forged.append(claim)

    results = await node.prepare(member, *forged)
    assert results[member.uid].ok, results[member.uid].error
    assert node.has_spec(member)
    for claim, kind in zip(forged, kinds, strict=True):
        result = results[claim.uid]
        assert not result.ok, f"{kind} claim {claim.name} was prepared"
        assert not node.has_spec(claim)
        assert claim.name in result.error or "pod " in result.error, result.error
    assert node.channels() == {train.channel}
    assert all(r.ok for r in (await node.plugin.unprepare([member, *forged])).values())
    assert node.channels() == set()


async def test_a_member_refused_before_its_seat_is_written_gets_the_channel_on_retry(
    node: Node,
) -> None:
    """The kubelet can ask before the Placement shows the pin; its retry then succeeds."""
    client = node.cluster.client
    clique, name = node.sim.topology.clique, node.sim.name
    domain = await create_domain(client, namespace="race", name="d", channel=21, clique=clique)
    claim = await create_claim(
        client, namespace="race", name="d-0-c", domain=domain, node=name, pod="d-0", seat=False
    )
    (refused,) = (await node.prepare(claim)).values()
    assert not refused.ok
    assert "pod d-0 (uid uid-d-0) is not a member of ComputeDomain race/d" in refused.error
    assert node.channels() == set()

    await seat_pod(client, domain, pod="d-0", node=name)
    (granted,) = (await node.prepare(claim)).values()  # the kubelet's retry
    assert granted.ok, granted.error
    assert node.channels() == {21}
    assert node.has_spec(claim)
