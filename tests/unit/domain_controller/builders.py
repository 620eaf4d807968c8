"""Small builders of status facts for the unit tables."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from services.domain_controller.facts import DomainFacts, NodeFacts, PodFacts
from shared.crds.placement import PlacementMember, PlacementSpec

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
EARLIER = datetime(2026, 5, 1, 11, 0, 0, tzinfo=UTC)
CLIQUE = "9e1c3a52-0000-4000-8000-00000000c0de.2"


def placement(
    *members: tuple[str, tuple[str, ...]],
    size: int | None = None,
    reserved: Mapping[str, int] | None = None,
) -> PlacementSpec:
    """Members as (node, pods); slots follow the order given. ``reserved``: pods a node holds
    room for (default: its pods), for gangs whose pods do not all exist yet."""
    room = reserved or {}
    return PlacementSpec(
        clique=CLIQUE,
        channel=7,
        gpus_per_pod=2,
        size=sum(len(pods) for _, pods in members) if size is None else size,
        members=tuple(
            PlacementMember(node=node, slot=slot, gpus=2 * room.get(node, len(pods)), pods=pods)
            for slot, (node, pods) in enumerate(members)
        ),
    )


def node(name: str, **fields: Any) -> NodeFacts:
    defaults: dict[str, Any] = {
        "address": f"10.0.0.{len(name)}",
        "imex": "True",
        "imex_reason": "ImexReady",
        "kubelet_ready": "True",
    }
    return NodeFacts(name=name, **{**defaults, **fields})


def pod(name: str, on: str, phase: str = "Running") -> PodFacts:
    return PodFacts(name=name, node=on, phase=phase)


TWO_NODES = placement(("n1", ("p1", "p2")), ("n2", ("p3",)))
PODS_RUNNING = (pod("p1", "n1"), pod("p2", "n1"), pod("p3", "n2"))
NODES_OK = {"n1": node("n1"), "n2": node("n2")}


def facts(**fields: Any) -> DomainFacts:
    """Facts of a healthy, placed, running two-node domain, with ``fields`` changed."""
    defaults: dict[str, Any] = {
        "generation": 3,
        "placement": TWO_NODES,
        "pods": PODS_RUNNING,
        "nodes": NODES_OK,
    }
    return DomainFacts(**{**defaults, **fields})
