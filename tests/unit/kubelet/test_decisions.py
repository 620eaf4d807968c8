"""The kubelet's and lifecycle controller's pure decisions, without an API server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from shared.kube.models import Taint, Toleration
from sim.kubelet import nodehealth, podstatus
from sim.kubelet.claims import ClaimNotUsableError, claim_names
from sim.kubelet.models import Node, Pod
from sim.kubelet.tolerations import eviction_time, tolerates, with_default_tolerations

T0 = datetime(2025, 1, 1, tzinfo=UTC)
MAINTENANCE = "example.test/maintenance"


def _taint(key: str = MAINTENANCE, effect: str = "NoExecute", value: str = "") -> Taint:
    return Taint(key=key, effect=effect, value=value, time_added=T0)


def _evicts_at(tolerations: list[Toleration], taints: list[Taint]) -> datetime | None:
    return eviction_time(tolerations, taints, added_at=lambda t: t.time_added or T0)


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration(key=MAINTENANCE, operator="Exists"), _taint(), True),
        (Toleration(key=MAINTENANCE, value="a"), _taint(value="a"), True),
        (Toleration(key=MAINTENANCE, value="a"), _taint(value="b"), False),
        (Toleration(operator="Exists"), _taint(key="anything"), True),
        (Toleration(key=MAINTENANCE, operator="Exists", effect="NoSchedule"), _taint(), False),
        (Toleration(key="other", operator="Exists"), _taint(), False),
    ],
)
def test_toleration_matching(toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_untolerated_no_execute_taint_evicts_at_once() -> None:
    assert _evicts_at([], [_taint()]) == T0


def test_no_schedule_taints_never_evict() -> None:
    assert _evicts_at([], [_taint(effect="NoSchedule")]) is None


def test_toleration_without_seconds_tolerates_for_ever() -> None:
    assert _evicts_at([Toleration(key=MAINTENANCE, operator="Exists")], [_taint()]) is None


def test_toleration_seconds_delay_eviction_and_the_earliest_wins() -> None:
    tolerations = [
        Toleration(key=MAINTENANCE, operator="Exists", toleration_seconds=30),
        Toleration(key="other", operator="Exists", toleration_seconds=5),
    ]
    taints = [_taint(), _taint(key="other")]
    assert _evicts_at(tolerations, taints) == T0 + timedelta(seconds=5)


def test_default_tolerations_cover_only_the_lifecycle_taints_a_pod_does_not_tolerate() -> None:
    own = Toleration(key="node.kubernetes.io/unreachable", operator="Exists", effect="NoExecute")
    tolerations = with_default_tolerations([own], seconds=300)
    unreachable = _taint(key="node.kubernetes.io/unreachable")
    not_ready = _taint(key="node.kubernetes.io/not-ready")
    assert _evicts_at(list(tolerations), [unreachable]) is None
    assert _evicts_at(list(tolerations), [not_ready]) == T0 + timedelta(seconds=300)


def _node(ready: str | None, taints: list[dict[str, str]] | None = None) -> Node:
    status = {"conditions": [{"type": "Ready", "status": ready}]} if ready else {}
    body = {"metadata": {"name": "n"}, "spec": {"taints": taints or []}, "status": status}
    return msgspec.convert(body, Node)


def test_unknown_ready_calls_for_unreachable_taints_and_keeps_others() -> None:
    node = _node("Unknown", [{"key": "cdo.dev/gpu-fault", "effect": "NoSchedule"}])
    taints = nodehealth.lifecycle_taints(node.spec.taints, "Unknown", now=T0)
    assert taints is not None
    assert [(t.key, t.effect, t.time_added) for t in taints] == [
        ("cdo.dev/gpu-fault", "NoSchedule", None),
        ("node.kubernetes.io/unreachable", "NoSchedule", None),
        ("node.kubernetes.io/unreachable", "NoExecute", T0),
    ]


def test_lifecycle_taints_settle() -> None:
    unreachable = [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
    ]
    assert (
        nodehealth.lifecycle_taints(_node("Unknown", unreachable).spec.taints, "Unknown", now=T0)
        is None
    )
    assert nodehealth.lifecycle_taints(_node("True", unreachable).spec.taints, "True", now=T0) == ()
    assert nodehealth.lifecycle_taints((), "True", now=T0) is None
    assert nodehealth.lifecycle_taints((), None, now=T0) is None
    not_ready = nodehealth.lifecycle_taints(
        _node("False", unreachable).spec.taints, "False", now=T0
    )
    assert not_ready is not None
    assert {t.key for t in not_ready} == {"node.kubernetes.io/not-ready"}


def test_unknown_conditions_include_ready_once() -> None:
    conditions = nodehealth.unknown_conditions(_node("True"), now=T0)
    assert [(c["type"], c["status"]) for c in conditions] == [("Ready", "Unknown")]
    assert nodehealth.unknown_conditions(_node("Unknown"), now=T0) == []
    assert [c["type"] for c in nodehealth.unknown_conditions(_node(None), now=T0)] == ["Ready"]


def _pod(**fields: object) -> Pod:
    return msgspec.convert(fields, Pod)


def test_claims_are_named_directly_or_through_the_claim_status() -> None:
    pod = _pod(
        spec={
            "resourceClaims": [
                {"name": "a", "resourceClaimName": "shared"},
                {"name": "b", "resourceClaimTemplateName": "tpl"},
                {"name": "c", "resourceClaimTemplateName": "tpl"},
            ]
        },
        status={
            "resourceClaimStatuses": [
                {"name": "b", "resourceClaimName": "pod-b-x1"},
                {"name": "c"},  # no claim needed for this one
            ]
        },
    )
    assert claim_names(pod) == ("shared", "pod-b-x1")


def test_claim_from_a_template_not_created_yet_is_not_usable() -> None:
    pod = _pod(spec={"resourceClaims": [{"name": "b", "resourceClaimTemplateName": "tpl"}]})
    with pytest.raises(ClaimNotUsableError, match="not been created yet"):
        claim_names(pod)


@pytest.mark.parametrize(
    ("restart_policy", "annotation", "expected"),
    [
        ("Never", "2.5", T0 + timedelta(seconds=2.5)),
        ("OnFailure", "0", T0),
        ("Always", "2", None),
        ("Never", None, None),
        ("Never", "soon", None),
        ("Never", "-1", None),
        ("Never", "nan", None),
    ],
)
def test_run_seconds(
    restart_policy: str, annotation: str | None, expected: datetime | None
) -> None:
    annotations = {} if annotation is None else {"sim.cdo.dev/run-seconds": annotation}
    pod = _pod(metadata={"annotations": annotations}, spec={"restartPolicy": restart_policy})
    assert podstatus.finish_time(pod, T0) == expected
