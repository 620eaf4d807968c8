"""``cdo status`` of domains: one clique as before, several cliques one line each."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import msgspec

from cli.status import DomainClique, Report, domain_row, render
from shared.crds import ComputeDomain

A = "9e1c3a52-0000-4000-8000-00000000c0de.1"
B = "9e1c3a52-0000-4000-8000-00000000c0de.2"
NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


def condition(kind: str, status: str, reason: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": "",
        "lastTransitionTime": "2026-05-01T11:00:00Z",
    }


def node(name: str, clique: str, index: int, status: str = "Ready") -> dict[str, Any]:
    return {
        "name": name,
        "ipAddress": "10.0.0.1",
        "cliqueID": clique,
        "index": index,
        "status": status,
    }


def domain(name: str, status: dict[str, Any]) -> ComputeDomain:
    return msgspec.convert(
        {
            "apiVersion": "resource.nvidia.com/v1beta2",
            "kind": "ComputeDomain",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"channel": {"resourceClaimTemplate": {"name": f"{name}-rct"}}},
            "status": status,
        },
        ComputeDomain,
    )


ONE_CLIQUE = domain(
    "small",
    {
        "status": "Ready",
        "clique": A,
        "channel": 3,
        "nodes": [node("a1", A, 0), node("a2", A, 1)],
        "cliques": [
            {
                "clique": A,
                "channel": 3,
                "slices": [0],
                "nodes": 2,
                "readyNodes": 2,
                "pods": 4,
                "runningPods": 4,
            },
        ],
        "conditions": [
            condition("Ready", "True", "AllMembersReady"),
            condition("Placed", "True", "Placed"),
            condition("Degraded", "False", "Healthy"),
        ],
    },
)

TWO_CLIQUES = domain(
    "big",
    {
        "status": "NotReady",
        "nodes": [
            node("a1", A, 0),
            node("a2", A, 1),
            node("b1", B, 0, "NotReady"),
            node("b2", B, 1),
        ],
        "cliques": [
            {
                "clique": A,
                "channel": 3,
                "slices": [0, 2],
                "nodes": 2,
                "readyNodes": 2,
                "pods": 4,
                "runningPods": 4,
            },
            {
                "clique": B,
                "channel": 0,
                "slices": [1],
                "nodes": 2,
                "readyNodes": 1,
                "pods": 2,
                "runningPods": 1,
            },
        ],
        "conditions": [
            condition("Ready", "False", "NodeFault"),
            condition("Placed", "True", "Placed"),
            condition("Degraded", "True", "NodeFault"),
        ],
    },
)


def test_a_domain_in_one_clique_is_one_row_and_its_members() -> None:
    lines = render(Report(domains=[domain_row(ONE_CLIQUE)]), now=NOW).splitlines()
    assert lines[1].split() == ["NAMESPACE", "NAME", "PHASE", "CLIQUE", "CHANNEL", "MEMBERS"]
    assert lines[2].split() == ["default", "small", "Ready", A, "3", "2/2", "ready"]
    assert lines[3] == "  members: a1 (slot 0, Ready), a2 (slot 1, Ready)"
    assert lines[4] == ""


def test_a_domain_written_before_status_cliques_looks_the_same() -> None:
    older = msgspec.structs.replace(
        ONE_CLIQUE, status=msgspec.structs.replace(ONE_CLIQUE.status, cliques=())
    )
    assert render(Report(domains=[domain_row(older)]), now=NOW) == render(
        Report(domains=[domain_row(ONE_CLIQUE)]), now=NOW
    )


def test_a_domain_in_two_cliques_gets_a_line_per_clique() -> None:
    lines = render(Report(domains=[domain_row(TWO_CLIQUES)]), now=NOW).splitlines()
    assert lines[2].split() == [
        "default",
        "big",
        "Degraded",
        "(NodeFault)",
        "2",
        "cliques",
        "-",
        "3/4",
        "ready",
    ]
    assert lines[3:7] == [
        f"  clique {A}: slices 0, 2, channel 3, 2/2 members ready, 4/4 pods running",
        "    members: a1 (slot 0, Ready), a2 (slot 1, Ready)",
        f"  clique {B}: slice 1, channel 0, 1/2 members ready, 1/2 pods running",
        "    members: b1 (slot 0, NotReady), b2 (slot 1, Ready)",
    ]


def test_json_carries_the_cliques_of_each_domain() -> None:
    report = Report(domains=[domain_row(ONE_CLIQUE), domain_row(TWO_CLIQUES)])
    document = json.loads(msgspec.json.encode(report))
    small, big = document["domains"]
    assert (small["clique"], small["channel"], len(small["cliques"])) == (A, 3, 1)
    assert (big["clique"], big["channel"]) == ("", None)
    assert [msgspec.convert(entry, DomainClique) for entry in big["cliques"]] == [
        DomainClique(
            clique=A, channel=3, slices=(0, 2), nodes=2, ready_nodes=2, pods=4, running_pods=4
        ),
        DomainClique(
            clique=B, channel=0, slices=(1,), nodes=2, ready_nodes=1, pods=2, running_pods=1
        ),
    ]
    assert [(m["node"], m["clique"]) for m in big["members"]] == [
        ("a1", A),
        ("a2", A),
        ("b1", B),
        ("b2", B),
    ]
