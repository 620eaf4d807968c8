"""What ``cdo ui`` draws, from Nodes, domains and Placements as the services write them: racks
and trays, GPUs held by domains, faults at their GPU, tray marks, the feed's early faults."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from cli.ui.feed import feed_entry
from cli.ui.health import FAULTY, WARNING, FeedFaults, gpu_faults, tray_marks
from cli.ui.layout import NO_NVLINK, arrange, rack_of
from cli.ui.view import FREE, HELD, page, rack_name
from services.health_monitor.faults import Fault
from services.health_monitor.rules import Action, Severity
from services.health_monitor.state import Episode, advance, desired_health
from shared.crds import ComputeDomain, Placement
from shared.crds.names import (
    CLIQUE_LABEL,
    GPU_FAULT_TAINT,
    GPU_HEALTHY_CONDITION,
    IMEX_CLIQUE_ANNOTATION,
    IMEX_READY_CONDITION,
    IMEX_SLOT_ANNOTATION,
    NVLINK_DOMAIN_LABEL,
)
from shared.events import DomainMembershipChanged, NodeFault, NodeImexState, NodeRecovered
from shared.kube.models import Node

RACK_A = "11111111-1111-4111-8111-111111111111"
RACK_B = "22222222-2222-4222-8222-222222222222"
T = "2026-05-01T11:00:00Z"


def node(
    name: str,
    *,
    rack: str = RACK_A,
    clique_id: int = 1,
    slot: int | None = None,
    gpus: int = 4,
    labelled: bool = True,
    conditions: tuple[dict[str, Any], ...] = (),
    taints: tuple[dict[str, Any], ...] = (),
    cordoned: bool = False,
    ready: bool = True,
) -> Node:
    clique = f"{rack}.{clique_id}"
    labels = {CLIQUE_LABEL: clique, NVLINK_DOMAIN_LABEL: rack} if labelled and rack else {}
    annotations = {IMEX_CLIQUE_ANNOTATION: clique} if rack else {}
    if slot is not None:
        annotations[IMEX_SLOT_ANNOTATION] = str(slot)
    kubelet = {"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}
    return msgspec.convert(
        {
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {"taints": list(taints), "unschedulable": cordoned},
            "status": {
                "capacity": {"nvidia.com/gpu": str(gpus)},
                "conditions": [kubelet, *conditions],
            },
        },
        Node,
    )


def domain(name: str, namespace: str = "ml", *, ready: bool = True) -> ComputeDomain:
    placed = {"type": "Placed", "status": "True", "reason": "Placed", "message": ""}
    conditions = [{**placed, "lastTransitionTime": T}]
    return msgspec.convert(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"channel": {"resourceClaimTemplate": {"name": f"{name}-rct"}}},
            "status": {"status": "Ready" if ready else "NotReady", "conditions": conditions},
        },
        ComputeDomain,
    )


def placement(name: str, members: list[tuple[str, int]], namespace: str = "ml") -> Placement:
    return msgspec.convert(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "gpusPerPod": 1,
                "size": sum(g for _, g in members),
                "slices": [
                    {
                        "index": 0,
                        "clique": f"{RACK_A}.1",
                        "channel": 3,
                        "members": [
                            {"node": n, "slot": i, "gpus": g} for i, (n, g) in enumerate(members)
                        ],
                    }
                ],
            },
        },
        Placement,
    )


def health_condition(faults: list[Fault]) -> dict[str, Any]:
    """The GpuHealthy condition the health monitor writes for ``faults``."""
    episode = advance(Episode(), faults=faults, now=100.0, hold_down_s=30.0).episode
    health = desired_health(
        faults=faults, clique=None, episode=episode, now=100.0, hold_down_s=30.0
    )
    condition = health.condition
    return {
        "type": GPU_HEALTHY_CONDITION,
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
    }


def xid(gpu: int, severity: Severity, *, confined: bool = False) -> Fault:
    return Fault(
        key=f"xid.79@gpu{gpu}",
        rule="xid.79",
        signal="xid",
        gpu=gpu,
        code=79,
        severity=severity,
        action=Action.DRAIN_NODE,
        message=f"GPU {gpu}: XID 79: GPU has fallen off the bus",
        confined=confined,
    )


# -- layout ------------------------------------------------------------------------------------


def test_nodes_sit_in_their_rack_at_their_tray_slot() -> None:
    nodes = [node(f"a{i:02d}", slot=17 - i) for i in range(18)] + [node("b0", rack=RACK_B, slot=0)]
    racks = arrange(nodes)
    assert [r.id for r in racks] == [RACK_A, RACK_B]
    (block,) = racks[0].blocks
    assert [t.metadata.name for t in block.trays if t] == [f"a{i:02d}" for i in range(17, -1, -1)]


def test_a_missing_tray_leaves_its_position_empty_and_unslotted_nodes_fill_free_ones() -> None:
    nodes = [node("a0", slot=0), node("a3", slot=3), node("z", slot=None), node("dup", slot=0)]
    (rack,) = arrange(nodes)
    names = [t.metadata.name if t else None for t in rack.blocks[0].trays]
    assert names == ["a0", "dup", "z", "a3"]


def test_a_partitioned_rack_has_one_block_per_clique_in_tray_order() -> None:
    nodes = [node(f"t{i}", slot=i, clique_id=1 if i < 9 else 2) for i in range(18)]
    (rack,) = arrange(nodes)
    assert [(b.clique, len(b.trays)) for b in rack.blocks] == [
        (f"{RACK_A}.1", 9),
        (f"{RACK_A}.2", 9),
    ]


def test_a_node_whose_clique_labels_were_taken_stays_in_its_rack() -> None:
    """After a fabric fault the monitor removes the clique labels; the IMEX agent's annotation
    still says where the tray is."""
    gone = node("a1", slot=1, labelled=False)
    assert rack_of(gone) == RACK_A
    assert [r.id for r in arrange([node("a0", slot=0), gone])] == [RACK_A]


def test_nodes_without_nvlink_are_grouped_last() -> None:
    racks = arrange([node("h100-0", rack=""), node("a0", slot=0)])
    assert [r.id for r in racks] == [RACK_A, NO_NVLINK]


@pytest.mark.parametrize(
    ("names", "name"),
    [
        (["rack-0-tray00", "rack-0-tray17"], "rack-0"),
        (["gb200-r0-t03", "gb200-r0-t17"], "gb200-r0"),
        (["rack-1-tray10", "rack-1-tray11"], "rack-1"),
        (["alpha", "beta"], ""),
    ],
)
def test_a_rack_is_named_by_what_its_nodes_share(names: list[str], name: str) -> None:
    assert rack_name(names) == name


# -- faults and marks --------------------------------------------------------------------------


def test_a_gpu_named_by_a_fatal_fault_is_faulty() -> None:
    faulted = node("a0", conditions=(health_condition([xid(2, Severity.FATAL)]),))
    assert gpu_faults(faulted) == {2: FAULTY}


def test_a_fault_confined_to_one_gpu_marks_that_gpu() -> None:
    condition = health_condition([xid(1, Severity.FATAL, confined=True)])
    assert condition["reason"] == "GpuDeviceFault" and condition["status"] == "True"
    assert gpu_faults(node("a0", conditions=(condition,))) == {1: FAULTY}


def test_a_warning_marks_its_gpu_as_a_warning() -> None:
    warned = xid(3, Severity.WARNING)
    warned = msgspec.structs.replace(warned, action=Action.NONE)
    condition = health_condition([warned])
    assert condition["reason"] == "GpuWarning"
    assert gpu_faults(node("a0", conditions=(condition,))) == {3: WARNING}


def test_a_healthy_node_has_no_faulty_gpu() -> None:
    assert gpu_faults(node("a0", conditions=(health_condition([]),))) == {}


def test_tray_marks_say_each_problem_in_words() -> None:
    troubled = node(
        "a0",
        conditions=({"type": IMEX_READY_CONDITION, "status": "False", "reason": "DaemonNotReady"},),
        taints=(
            {"key": GPU_FAULT_TAINT, "value": "fatal", "effect": "NoExecute"},
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        ),
        cordoned=True,
        ready=False,
    )
    marks = {m.code: m.text for m in tray_marks(troubled)}
    assert marks == {
        "F": f"fault taint {GPU_FAULT_TAINT}=fatal:NoExecute",
        "N": "NotReady",
        "I": "IMEX not ready (DaemonNotReady)",
        "C": "cordoned",
        "T": "taints nvidia.com/gpu:NoSchedule",
    }
    assert tray_marks(node("ok")) == []


# -- what the page draws -----------------------------------------------------------------------


def test_held_gpus_take_the_lowest_healthy_indexes_and_a_fault_keeps_its_own() -> None:
    faulted = node("a0", slot=0, conditions=(health_condition([xid(0, Severity.FATAL)]),))
    drawn = page(
        [faulted, node("a1", slot=1)],
        [domain("big"), domain("small")],
        [placement("big", [("a0", 2), ("a1", 4)]), placement("small", [("a0", 1)])],
    )
    assert [(e.number, e.key, e.gpus) for e in drawn.legend] == [
        (1, "ml/big", 6),
        (2, "ml/small", 1),
    ]
    (rack,) = drawn.racks
    tray0, tray1 = rack.blocks[0].trays
    assert tray0 is not None and tray1 is not None
    assert [(g.state, g.domain) for g in tray0.gpus] == [
        (FAULTY, 0), (HELD, 1), (HELD, 1), (HELD, 2),
    ]  # fmt: skip
    assert [(g.state, g.domain) for g in tray1.gpus] == [(HELD, 1)] * 4
    assert [m.code for m in tray0.marks] == ["F"]
    assert rack.title == "a, 2 trays, NVLink domain 11111111"


def test_a_placement_whose_domain_is_gone_is_still_drawn() -> None:
    drawn = page([node("a0", slot=0)], [], [placement("old", [("a0", 4)])])
    assert [(e.key, e.phase) for e in drawn.legend] == [("ml/old", "Deleted")]
    tray0 = drawn.racks[0].blocks[0].trays[0]
    assert tray0 is not None and {g.state for g in tray0.gpus} == {HELD}


def fault_event(
    node_name: str, gpu: int | None, *, at: datetime, severity: str = "fatal"
) -> NodeFault:
    return NodeFault(
        node=node_name,
        signal="xid",
        code=79,
        severity=severity,
        gpu_index=gpu,
        message="GPU 1: XID 79",
        time=at,
    )


def test_the_feed_marks_a_gpu_before_the_node_says_so_until_it_recovers() -> None:
    now = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
    feed = FeedFaults(ttl_s=30.0)
    assert feed.apply(fault_event("a0", 1, at=now), now=now.timestamp())
    tray0 = page([node("a0", slot=0)], [], [], feed).racks[0].blocks[0].trays[0]
    assert tray0 is not None
    assert [g.state for g in tray0.gpus] == [FREE, FAULTY, FREE, FREE]
    assert tray0.gpus[1].note == "GPU 1: XID 79"
    assert [m.code for m in tray0.marks] == ["F"]
    assert feed.apply(NodeRecovered(node="a0", time=now), now=now.timestamp())
    tray0 = page([node("a0", slot=0)], [], [], feed).racks[0].blocks[0].trays[0]
    assert tray0 is not None and {g.state for g in tray0.gpus} == {FREE}


def test_the_feed_forgets_its_marks_after_the_ttl_and_ignores_old_history() -> None:
    now = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
    feed = FeedFaults(ttl_s=30.0)
    assert not feed.apply(fault_event("a0", 1, at=now), now=now.timestamp() + 31)
    assert feed.apply(fault_event("a0", None, at=now), now=now.timestamp())
    tray0 = page([node("a0", slot=0)], [], [], feed).racks[0].blocks[0].trays[0]
    assert tray0 is not None and tray0.marks[0].text.startswith("fault reported on the feed")
    assert not feed.expire(now=now.timestamp() + 10)
    assert feed.expire(now=now.timestamp() + 31)
    assert not feed


def test_feed_lines_keep_faults_membership_and_capacity() -> None:
    now = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
    fault = feed_entry(fault_event("a0", 1, at=now), 7)
    assert fault is not None and (fault.kind, fault.node, fault.time) == ("fault", "a0", "12:00:00")
    membership = feed_entry(
        DomainMembershipChanged(namespace="ml", name="big", phase="Ready", time=now), 8
    )
    assert membership is not None and membership.domain == "ml/big"
    imex = NodeImexState(node="a0", daemon_state="READY", time=now)
    assert feed_entry(imex, 9) is None
