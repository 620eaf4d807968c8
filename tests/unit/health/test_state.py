"""The desired node health (table-tested) and the fault episode with its hold-down."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest

from services.health_monitor.faults import Fault, Reaction
from services.health_monitor.rules import Action, Severity
from services.health_monitor.state import (
    REASON_BREAKER_OPEN,
    REASON_DEGRADED,
    REASON_FAULT,
    REASON_HEALTHY,
    REASON_HOLD_DOWN,
    REASON_NVML_UNAVAILABLE,
    REASON_WARNING,
    Episode,
    advance,
    clique_labels,
    desired_health,
    held_reaction,
    next_deadline,
    resumed_episode,
)
from shared.crds.names import CLIQUE_LABEL, MULTI_NODE_NVLINK_LABEL, NVLINK_DOMAIN_LABEL
from shared.nvml import CliqueGroup, CliqueStatus, NodeClique

HOLD = 30.0
RACK = uuid.UUID("11111111-1111-4111-8111-111111111111")
READY = NodeClique(
    status=CliqueStatus.READY,
    reason="every GPU registered in one clique",
    clique=f"{RACK}.1",
    cluster_uuid=RACK,
    clique_id=1,
)
LABELLED = {
    CLIQUE_LABEL: f"{RACK}.1",
    NVLINK_DOMAIN_LABEL: str(RACK),
    MULTI_NODE_NVLINK_LABEL: None,
}
UNLABELLED = {CLIQUE_LABEL: None, NVLINK_DOMAIN_LABEL: None, MULTI_NODE_NVLINK_LABEL: None}
WITHOUT_NVLINK = {**UNLABELLED, MULTI_NODE_NVLINK_LABEL: "false"}


def fault(
    rule: str,
    severity: Severity,
    action: Action = Action.NONE,
    *,
    gpu: int | None = 0,
    signal: str = "xid",
) -> Fault:
    return Fault(
        key=rule if gpu is None else f"{rule}@gpu{gpu}",
        rule=rule,
        signal=signal,
        gpu=gpu,
        code=0,
        severity=severity,
        action=action,
        message=f"GPU {gpu}: {rule}",
    )


XID_79 = fault("xid.79", Severity.FATAL, Action.DRAIN_NODE)
XID_54 = fault("xid.54", Severity.WARNING, Action.DRAIN_NODE)
XID_78 = fault("xid.78", Severity.WARNING, Action.NONE)
LINK_DOWN = fault("nvlink.down", Severity.WARNING, Action.RESET_GPU, signal="nvlink")
ROUTES = fault("fabric.health.route_unhealthy", Severity.FATAL, Action.RESET_GPU, signal="fabric")
IN_PROGRESS = fault("fabric.state.in_progress", Severity.WARNING, signal="fabric")
DISAGREE = fault("fabric.clique_disagreement", Severity.WARNING, gpu=None, signal="clique")
NVML_DOWN = fault("nvml.unavailable", Severity.WARNING, Action.DRAIN_NODE, gpu=None, signal="nvml")


# -- the desired state, table-tested -------------------------------------------------------


@pytest.mark.parametrize(
    ("faults", "clique", "unavailable", "reaction", "status", "reason", "labels"),
    [
        pytest.param(
            (), READY, None, Reaction.NONE, "True", REASON_HEALTHY, LABELLED, id="healthy"
        ),
        pytest.param(
            (XID_79,), READY, None, Reaction.NO_EXECUTE, "False", REASON_FAULT, LABELLED, id="fatal"
        ),
        pytest.param(
            (XID_54,),
            READY,
            None,
            Reaction.NO_SCHEDULE,
            "False",
            REASON_DEGRADED,
            LABELLED,
            id="warning that needs the node",
        ),
        pytest.param(
            (LINK_DOWN,),
            READY,
            None,
            Reaction.NO_SCHEDULE,
            "False",
            REASON_DEGRADED,
            LABELLED,
            id="links down: reset recommended",
        ),
        pytest.param(
            (XID_78,),
            READY,
            None,
            Reaction.NONE,
            "True",
            REASON_WARNING,
            LABELLED,
            id="warning without node action",
        ),
        pytest.param(
            (XID_54, XID_79, XID_78),
            READY,
            None,
            Reaction.NO_EXECUTE,
            "False",
            REASON_FAULT,
            LABELLED,
            id="the worst fault wins",
        ),
        pytest.param(
            (IN_PROGRESS,),
            NodeClique(status=CliqueStatus.PENDING, reason="IN_PROGRESS", gpus=(0, 1, 2, 3)),
            None,
            Reaction.NONE,
            "True",
            REASON_WARNING,
            UNLABELLED,
            id="fabric in progress: no label",
        ),
        pytest.param(
            (DISAGREE,),
            NodeClique(
                status=CliqueStatus.DISAGREE,
                reason="GPUs report different cliques",
                groups=(
                    CliqueGroup(clique=f"{RACK}.1", gpus=(0, 1, 2)),
                    CliqueGroup(clique=f"{RACK}.2", gpus=(3,)),
                ),
            ),
            None,
            Reaction.NONE,
            "True",
            REASON_WARNING,
            UNLABELLED,
            id="cliques disagree: no label, a warning",
        ),
        pytest.param(
            (),
            NodeClique(status=CliqueStatus.NOT_SUPPORTED, reason="no fabric"),
            None,
            Reaction.NONE,
            "True",
            REASON_HEALTHY,
            WITHOUT_NVLINK,
            id="no NVLink fabric: no clique label, multi-node-nvlink=false",
        ),
        pytest.param(
            (NVML_DOWN,),
            None,
            "nvmlInit: Driver Not Loaded",
            Reaction.NO_SCHEDULE,
            "Unknown",
            REASON_NVML_UNAVAILABLE,
            {},
            id="NVML unavailable: unknown, labels left alone",
        ),
    ],
)
def test_desired_health(
    faults: Sequence[Fault],
    clique: NodeClique | None,
    unavailable: str | None,
    reaction: Reaction,
    status: str,
    reason: str,
    labels: dict[str, str | None],
) -> None:
    episode = advance(Episode(), faults=faults, now=100.0, hold_down_s=HOLD).episode
    health = desired_health(
        faults=faults,
        clique=clique,
        episode=episode,
        now=100.0,
        hold_down_s=HOLD,
        nvml_unavailable=unavailable,
    )
    assert health.reaction is reaction
    assert (health.condition.status, health.condition.reason) == (status, reason)
    assert dict(health.labels) == labels
    assert [f.key for f in health.faults] == [
        f.key for f in sorted(faults, key=lambda f: (-f.severity.rank, -f.reaction))
    ]


def test_condition_lists_faults_worst_first_and_bounds_the_message() -> None:
    many = [fault(f"xid.{n}", Severity.WARNING, gpu=n % 4) for n in range(10)]
    health = desired_health(
        faults=[*many, XID_79],
        clique=READY,
        episode=Episode(),
        now=0.0,
        hold_down_s=HOLD,
    )
    assert health.condition.message.startswith(XID_79.message)
    assert health.condition.message.endswith("and 6 more")


def test_nvml_unavailable_keeps_a_known_clique_label_alone() -> None:
    assert clique_labels(None) == {}
    health = desired_health(
        faults=[NVML_DOWN],
        clique=READY,
        episode=Episode(),
        now=0.0,
        hold_down_s=HOLD,
        nvml_unavailable="gone",
    )
    assert health.labels == {}


# -- episodes and hold-down ------------------------------------------------------------------


Timeline = Sequence[tuple[float, Sequence[Fault]]]


def run(timeline: Timeline, *, hold: float = HOLD) -> list[dict[str, object]]:
    """Evaluate at each (time, faults); what each evaluation announced and the node showed."""
    episode = Episode()
    out: list[dict[str, object]] = []
    for now, faults in timeline:
        step = advance(episode, faults=faults, now=now, hold_down_s=hold)
        episode = step.episode
        health = desired_health(
            faults=faults, clique=READY, episode=episode, now=now, hold_down_s=hold
        )
        out.append(
            {
                "announce": [f.key for f in step.announce],
                "escalated": step.escalated,
                "recovered": step.recovered is not None,
                "reaction": health.reaction,
                "reason": health.condition.reason,
            }
        )
    return out


def test_a_fatal_fault_taints_at_once_and_recovers_after_the_hold_down() -> None:
    results = run([(0, [XID_79]), (10, []), (29.9, []), (30.0, []), (31, [])])
    assert [r["reaction"] for r in results] == [
        Reaction.NO_EXECUTE,
        Reaction.NO_EXECUTE,
        Reaction.NO_EXECUTE,
        Reaction.NONE,
        Reaction.NONE,
    ]
    assert results[0]["announce"] == ["xid.79@gpu0"]
    assert results[0]["escalated"] is True
    assert [r["recovered"] for r in results] == [False, False, False, True, False]
    assert results[1]["reason"] == REASON_HOLD_DOWN
    assert results[3]["reason"] == REASON_HEALTHY


def test_a_flapping_fault_is_one_episode_announced_once() -> None:
    timeline: list[tuple[float, Sequence[Fault]]] = []
    for flap in range(10):  # fault and clear ten times in five seconds
        timeline += [(flap * 0.5, [ROUTES]), (flap * 0.5 + 0.25, [])]
    last_fault = 4.5
    timeline += [(last_fault + HOLD - 0.01, []), (last_fault + HOLD, [])]
    results = run(timeline)
    assert sum(r["announce"] != [] for r in results) == 1
    assert results[0]["announce"] == ["fabric.health.route_unhealthy@gpu0"]
    assert sum(bool(r["recovered"]) for r in results) == 1
    assert all(r["reaction"] is Reaction.NO_EXECUTE for r in results[:-1])
    assert results[-1]["reaction"] is Reaction.NONE
    assert results[-1]["recovered"] is True


def test_a_new_fault_in_the_same_episode_is_announced_but_an_old_one_is_not_again() -> None:
    results = run([(0, [XID_54]), (1, []), (2, [XID_54, LINK_DOWN]), (3, [LINK_DOWN, XID_79])])
    assert [r["announce"] for r in results] == [
        ["xid.54@gpu0"],
        [],
        ["nvlink.down@gpu0"],
        ["xid.79@gpu0"],
    ]
    assert [r["escalated"] for r in results] == [True, False, False, True]


def test_de_escalation_waits_for_the_hold_down() -> None:
    results = run([(0, [XID_79, LINK_DOWN]), (1, [LINK_DOWN]), (30.5, [LINK_DOWN]), (31, [])])
    assert [r["reaction"] for r in results] == [
        Reaction.NO_EXECUTE,
        Reaction.NO_EXECUTE,
        Reaction.NO_SCHEDULE,
        Reaction.NO_SCHEDULE,
    ]
    assert results[1]["reason"] == REASON_HOLD_DOWN
    assert results[2]["reason"] == REASON_DEGRADED


def test_warnings_without_node_action_still_make_an_episode() -> None:
    results = run([(0, [XID_78]), (5, []), (30, [])])
    assert [r["reaction"] for r in results] == [Reaction.NONE] * 3
    assert results[0]["announce"] == ["xid.78@gpu0"]
    assert [r["recovered"] for r in results] == [False, False, True]


def test_a_zero_hold_down_reacts_to_the_faults_of_the_moment() -> None:
    results = run([(0, [XID_79]), (1, []), (2, [])], hold=0.0)
    assert [r["reaction"] for r in results] == [Reaction.NO_EXECUTE, Reaction.NONE, Reaction.NONE]
    assert [r["recovered"] for r in results] == [False, True, False]


def test_next_deadline_is_the_end_of_the_next_hold_down() -> None:
    assert next_deadline(Episode(), now=0, hold_down_s=HOLD) is None
    episode = advance(Episode(), faults=[XID_79], now=10, hold_down_s=HOLD).episode
    assert next_deadline(episode, now=12, hold_down_s=HOLD) == 40
    assert next_deadline(episode, now=41, hold_down_s=HOLD) == 41  # recovery is due


def test_a_restart_keeps_the_taint_it_finds_for_a_hold_down() -> None:
    assert resumed_episode(effect=None, now=5) == Episode()
    episode = resumed_episode(effect="NoExecute", now=5)
    assert held_reaction(episode, now=34, hold_down_s=HOLD) is Reaction.NO_EXECUTE
    step = advance(episode, faults=[], now=35, hold_down_s=HOLD)
    assert step.recovered is not None
    assert held_reaction(resumed_episode(effect="NoSchedule", now=0), now=1, hold_down_s=HOLD) is (
        Reaction.NO_SCHEDULE
    )


# -- the circuit breaker's cap --------------------------------------------------------------

CAP_TEXT = "4 of 18 nodes of clique u.1 already hold NoExecute (cap 25%: 4)"


@pytest.mark.parametrize(
    ("faults", "cap", "withheld", "reaction", "status", "reason"),
    [
        pytest.param(
            (XID_79,), Reaction.NO_EXECUTE, None, Reaction.NO_EXECUTE, "False", REASON_FAULT,
            id="granted",
        ),
        pytest.param(
            (XID_79,), Reaction.NO_SCHEDULE, None, Reaction.NO_SCHEDULE, "False", REASON_FAULT,
            id="claim being decided",
        ),
        pytest.param(
            (XID_79,), Reaction.NO_SCHEDULE, CAP_TEXT, Reaction.NO_SCHEDULE, "False",
            REASON_BREAKER_OPEN, id="withheld",
        ),
        pytest.param(
            (XID_54,), Reaction.NO_SCHEDULE, CAP_TEXT, Reaction.NO_SCHEDULE, "False",
            REASON_DEGRADED, id="a warning is never withheld",
        ),
    ],
)  # fmt: skip
def test_the_breaker_caps_the_taint_and_says_so(
    faults: Sequence[Fault],
    cap: Reaction,
    withheld: str | None,
    reaction: Reaction,
    status: str,
    reason: str,
) -> None:
    episode = advance(Episode(), faults=faults, now=100.0, hold_down_s=HOLD).episode
    health = desired_health(
        faults=faults,
        clique=READY,
        episode=episode,
        now=100.0,
        hold_down_s=HOLD,
        cap=cap,
        withheld=withheld,
    )
    assert health.reaction is reaction
    assert (health.condition.status, health.condition.reason) == (status, reason)
    if reason == REASON_BREAKER_OPEN:
        assert health.condition.message == (
            f"{XID_79.message}; NoExecute withheld by the circuit breaker, NoSchedule instead: "
            f"{CAP_TEXT}"
        )


def test_a_withheld_noexecute_is_held_down_as_noschedule() -> None:
    """Faults cleared on a node the breaker held back: the hold-down keeps what it had."""
    episode = advance(Episode(), faults=[XID_79], now=100.0, hold_down_s=HOLD).episode
    health = desired_health(
        faults=(),
        clique=READY,
        episode=episode,
        now=110.0,
        hold_down_s=HOLD,
        cap=Reaction.NO_SCHEDULE,
    )
    assert health.reaction is Reaction.NO_SCHEDULE
    assert health.condition.reason == REASON_HOLD_DOWN
    assert "the NoSchedule taint stays" in health.condition.message
