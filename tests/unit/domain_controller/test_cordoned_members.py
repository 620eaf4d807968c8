"""A member node an operator cordons or taints is no fault: the domain stays Ready."""

from __future__ import annotations

import msgspec

from services.domain_controller.facts import node_facts
from services.domain_controller.objects import DomainNode
from services.domain_controller.status import compute_status
from shared.crds.computedomain import ComputeDomainStatus
from shared.crds.names import CLIQUE_LABEL

from .builders import CLIQUE, NODES_OK, NOW, facts


def cordoned_member(name: str) -> DomainNode:
    body = {
        "metadata": {"name": name, "labels": {CLIQUE_LABEL: CLIQUE}},
        "spec": {
            "unschedulable": True,
            "taints": [
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                {"key": "dedicated", "value": "infer", "effect": "NoSchedule"},
            ],
        },
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "cdo.dev/ImexReady", "status": "True", "reason": "ImexReady"},
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}],
        },
    }
    return msgspec.convert(body, DomainNode)


def test_a_cordoned_and_tainted_member_has_no_fault() -> None:
    found = node_facts(cordoned_member("n2"))
    assert (found.faults, found.kubelet_ready, found.imex, found.clique) == (
        (),
        "True",
        "True",
        CLIQUE,
    )


def test_a_domain_on_a_cordoned_member_stays_ready() -> None:
    nodes = {**NODES_OK, "n2": node_facts(cordoned_member("n2"))}

    assessment = compute_status(facts(nodes=nodes), previous=ComputeDomainStatus(), now=NOW)

    assert assessment.status.status == "Ready"
    assert assessment.phase == "Ready"
