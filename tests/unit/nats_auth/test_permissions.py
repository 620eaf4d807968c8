"""The mapping from a reviewed identity to NATS permissions."""

from __future__ import annotations

import pytest

from services.nats_auth.permissions import (
    JS_DESTRUCTIVE,
    Identity,
    Permissions,
    Policy,
    Refused,
    permissions_for,
    reader_permissions,
)

POLICY = Policy(namespace="cdo-system", readers=("schedulers/dashboard", "observers/*"))
WRITER_EXTRAS = ("$JS.API.>", "$JS.FC.>")


def allowed(sa: str, *, node: str = "", namespace: str = "cdo-system") -> Permissions:
    decision = permissions_for(POLICY, Identity(namespace=namespace, service_account=sa, node=node))
    assert isinstance(decision, Permissions), decision
    return decision


def refused(sa: str, *, node: str = "", namespace: str = "cdo-system") -> str:
    decision = permissions_for(POLICY, Identity(namespace=namespace, service_account=sa, node=node))
    assert isinstance(decision, Refused), decision
    return decision.reason


@pytest.mark.parametrize(
    ("sa", "node", "own"),
    [
        (
            "cdo-imex-agent",
            "n1",
            ("cdo.v1.node.n1.imex", "$KV.cdo-snapshots.v1.node.n1.imex"),
        ),
        (
            "cdo-health-monitor",
            "n1",
            (
                "cdo.v1.node.n1.fault",
                "cdo.v1.node.n1.recovered",
                "$KV.cdo-snapshots.v1.node.n1.health",
            ),
        ),
        # Node names with dots are escaped as the subjects are.
        (
            "cdo-health-monitor",
            "gb200.lab",
            (
                "cdo.v1.node.gb200=2Elab.fault",
                "cdo.v1.node.gb200=2Elab.recovered",
                "$KV.cdo-snapshots.v1.node.gb200=2Elab.health",
            ),
        ),
        ("cdo-domain-controller", "", ("cdo.v1.domain.>", "$KV.cdo-snapshots.v1.domain.>")),
        ("cdo-clique-allocator", "", ("cdo.v1.clique.>", "$KV.cdo-snapshots.v1.clique.>")),
    ],
)
def test_each_service_publishes_its_own_subjects(sa: str, node: str, own: tuple[str, ...]) -> None:
    permissions = allowed(sa, node=node)
    assert permissions.publish_allow == (*own, *WRITER_EXTRAS)
    assert permissions.publish_deny == JS_DESTRUCTIVE


def test_the_imex_agent_follows_its_peers_and_the_others_only_their_inboxes() -> None:
    assert allowed("cdo-imex-agent", node="n1").subscribe_allow == (
        "cdo.v1.node.*.imex",
        "_INBOX.>",
    )
    for sa, node in (("cdo-health-monitor", "n1"), ("cdo-domain-controller", "")):
        assert allowed(sa, node=node).subscribe_allow == ("_INBOX.>",)


@pytest.mark.parametrize("sa", ["cdo-imex-agent", "cdo-health-monitor"])
def test_a_per_node_service_needs_a_node_bound_token(sa: str) -> None:
    assert refused(sa) == f"{sa}: the token is not bound to a node"


def test_readers_publish_only_consumer_api_calls() -> None:
    for namespace, sa in (("schedulers", "dashboard"), ("observers", "anyone")):
        permissions = allowed(sa, namespace=namespace)
        assert permissions == reader_permissions(POLICY)
    published = reader_permissions(POLICY).publish_allow
    assert not [subject for subject in published if subject.startswith("cdo.")]
    assert not [subject for subject in published if subject.startswith("$KV.")]
    assert not [
        subject for subject in published if "DELETE" in subject and "CONSUMER" not in subject
    ]
    assert "$JS.API.CONSUMER.CREATE.CDO.>" in published
    assert reader_permissions(POLICY).subscribe_allow == ("cdo.v1.>", "_INBOX.>")


def test_stream_and_bucket_names_come_from_the_policy() -> None:
    policy = Policy(namespace="ns", readers=("ns/r",), stream="EVENTS", bucket="latest")
    writer = permissions_for(
        policy, Identity(namespace="ns", service_account="cdo-clique-allocator")
    )
    assert isinstance(writer, Permissions)
    assert "$KV.latest.v1.clique.>" in writer.publish_allow
    reader = reader_permissions(policy).publish_allow
    assert "$JS.API.STREAM.INFO.EVENTS" in reader
    assert "$JS.API.DIRECT.GET.KV_latest.>" in reader


@pytest.mark.parametrize(
    ("namespace", "sa"),
    [
        # A cdo ServiceAccount name in another namespace is somebody else's.
        ("default", "cdo-domain-controller"),
        ("team-a", "cdo-imex-agent"),
        ("cdo-system", "cdo-bootstrap"),
        ("cdo-system", "default"),
        ("schedulers", "other"),
    ],
)
def test_anything_else_is_refused(namespace: str, sa: str) -> None:
    reason = refused(sa, namespace=namespace, node="n1")
    assert f"serviceaccount {namespace}/{sa} has no NATS permissions" in reason
