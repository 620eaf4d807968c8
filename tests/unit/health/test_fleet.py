"""The breaker's shell: a claim is decided once, from the Nodes as of the watch event that
delivered it; other nodes' changes wake the monitor only while its node is held back."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from services.health_monitor.fleet import Fleet
from services.health_monitor.ledger import (
    Record,
    RecordState,
    encode_record,
)
from services.health_monitor.metrics import HealthMetrics
from services.health_monitor.settings import BreakerSettings
from shared.crds.names import BREAKER_ANNOTATION, CLIQUE_LABEL, GPU_FAULT_TAINT
from shared.kube.models import Node
from shared.metrics import Metrics

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
RACK = "u.1"
NO_EXECUTE = {"key": GPU_FAULT_TAINT, "value": "fatal", "effect": "NoExecute"}


def node(name: str, *, record: Record | None = None, tainted: bool = False) -> Node:
    body: dict[str, Any] = {
        "metadata": {
            "name": name,
            "labels": {CLIQUE_LABEL: RACK},
            "annotations": {BREAKER_ANNOTATION: encode_record(record)} if record else {},
        },
        "spec": {"taints": [NO_EXECUTE] if tainted else []},
    }
    return msgspec.convert(body, Node)


class Cache:
    def __init__(self, *nodes: Node) -> None:
        self.nodes = {n.metadata.name: n for n in nodes}

    def put(self, n: Node) -> None:
        self.nodes[n.metadata.name] = n

    def objects(self) -> list[Node]:
        return list(self.nodes.values())


def fleet(cache: Cache) -> Fleet:
    return Fleet(
        node_name="me",
        settings=BreakerSettings(clique_share=0.25, cluster_share=1.0),
        metrics=HealthMetrics(Metrics()),
        nodes=cache,
        wall_clock=lambda: NOW,
    )


def test_a_claim_is_decided_once_from_the_nodes_as_of_its_event() -> None:
    # Eight nodes: the cap is 2. One other node already carries NoExecute.
    cache = Cache(node("a", tainted=True), *(node(f"n{i}") for i in range(6)))
    shell = fleet(cache)
    claim = Record(state=RecordState.PENDING, at=NOW, clique=RACK)
    mine = node("me", record=claim)
    cache.put(mine)
    assert shell.observe(None, mine)  # decide, and evaluate again
    assert shell.verdict is not None and shell.verdict.granted and shell.verdict.claim == NOW
    # Another claim arrives later; seeing the same claim again does not decide it again.
    cache.put(node("n0", record=Record(state=RecordState.PENDING, at=NOW, clique=RACK)))
    assert not shell.observe(mine, mine)
    assert shell.verdict.granted


def test_a_claim_seen_after_the_cap_filled_is_held() -> None:
    pending = Record(state=RecordState.PENDING, at=NOW, clique=RACK)
    others = (node(f"n{i}") for i in range(5))
    cache = Cache(node("a", tainted=True), node("b", record=pending), *others)
    shell = fleet(cache)
    mine = node("me", record=Record(state=RecordState.PENDING, at=NOW, clique=RACK))
    cache.put(mine)
    assert shell.observe(None, mine)
    assert shell.verdict is not None and not shell.verdict.granted
    assert (shell.verdict.counted, shell.verdict.limit) == (2, 2)


def test_other_nodes_matter_only_while_held_back() -> None:
    cache = Cache(node("a", tainted=True))
    shell = fleet(cache)
    healed = node("a")
    assert not shell.observe(node("a", tainted=True), healed)
    held = node("me", record=Record(state=RecordState.HELD, at=NOW, clique=RACK))
    assert not shell.observe(None, held)
    assert shell.observe(node("a", tainted=True), healed)  # room may have appeared
    assert not shell.observe(healed, healed)  # nothing the breaker counts changed
