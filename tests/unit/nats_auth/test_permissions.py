"""The mapping from a reviewed identity to NATS permissions."""

from __future__ import annotations

import pytest

from services.nats_auth.permissions import (
    Identity,
    Permissions,
    Policy,
    Refused,
    admin_permissions,
    consumer_name,
    permissions_for,
    reader_permissions,
)

POLICY = Policy(namespace="cdo-system", readers=("schedulers/dashboard", "observers/*"))
LOOK_UP = ("$JS.API.STREAM.INFO.CDO", "$JS.API.STREAM.INFO.KV_cdo-snapshots")
SNAPSHOT_READS = (
    "$JS.API.CONSUMER.CREATE.KV_cdo-snapshots",
    "$JS.API.CONSUMER.INFO.KV_cdo-snapshots.*",
    "$JS.FC.>",
)


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
    ],
)
def test_each_node_service_publishes_its_own_subjects_and_looks_up_jetstream(
    sa: str, node: str, own: tuple[str, ...]
) -> None:
    permissions = allowed(sa, node=node)
    assert permissions.publish_allow == (*own, *LOOK_UP)
    assert permissions.publish_deny == ()


@pytest.mark.parametrize(
    ("sa", "own"),
    [
        ("cdo-domain-controller", ("cdo.v1.domain.>", "$KV.cdo-snapshots.v1.domain.>")),
        ("cdo-clique-allocator", ("cdo.v1.clique.>", "$KV.cdo-snapshots.v1.clique.>")),
    ],
)
def test_the_controllers_also_read_the_snapshots_back(sa: str, own: tuple[str, ...]) -> None:
    """An ephemeral consumer on the bucket (server-named), nothing else of the consumer API."""
    assert allowed(sa).publish_allow == (*own, *LOOK_UP, *SNAPSHOT_READS)


@pytest.mark.parametrize(
    "who",
    [
        ("cdo-imex-agent", "n1", "cdo-system"),
        ("cdo-health-monitor", "n1", "cdo-system"),
        ("cdo-domain-controller", "", "cdo-system"),
        ("cdo-clique-allocator", "", "cdo-system"),
        ("dashboard", "", "schedulers"),
    ],
)
def test_no_publisher_or_reader_administers_jetstream(who: tuple[str, str, str]) -> None:
    """Changing, creating, purging or deleting a stream, or another's consumer: in no list."""
    sa, node, namespace = who
    published = allowed(sa, node=node, namespace=namespace).publish_allow
    administration = [
        p
        for p in published
        if p.startswith("$JS.API.STREAM.")
        and not p.startswith(("$JS.API.STREAM.INFO.", "$JS.API.STREAM.MSG.GET."))
    ]
    assert administration == []
    deletes = [p for p in published if ".CONSUMER.DELETE." in p]
    assert all(p.endswith(".schedulers_dashboard") for p in deletes), deletes


def test_the_nats_bootstrap_only_creates_and_updates_the_stream_and_the_bucket() -> None:
    permissions = allowed("cdo-nats-bootstrap")
    assert permissions == admin_permissions(POLICY)
    assert set(permissions.publish_allow) == {
        "$JS.API.INFO",
        *(
            f"$JS.API.STREAM.{verb}.{stream}"
            for stream in ("CDO", "KV_cdo-snapshots")
            for verb in ("INFO", "CREATE", "UPDATE")
        ),
    }
    assert permissions.subscribe_allow == ("_INBOX.>",)
    assert permissions.role == "jetstream-admin"
    # Only cdo's own: the name in another namespace is nobody's.
    assert "no NATS permissions" in refused("cdo-nats-bootstrap", namespace="default")


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


def test_readers_publish_only_the_api_calls_of_their_own_consumers() -> None:
    for namespace, sa in (("schedulers", "dashboard"), ("observers", "anyone")):
        identity = Identity(namespace=namespace, service_account=sa)
        permissions = allowed(sa, namespace=namespace)
        assert permissions == reader_permissions(POLICY, identity)
        assert permissions.role == "reader"
    published = allowed("dashboard", namespace="schedulers").publish_allow
    assert not [subject for subject in published if subject.startswith(("cdo.", "$KV."))]
    consumer_calls = {p for p in published if ".CONSUMER." in p}
    assert consumer_calls == {
        "$JS.API.CONSUMER.CREATE.CDO",
        "$JS.API.CONSUMER.CREATE.KV_cdo-snapshots",
        "$JS.API.CONSUMER.INFO.CDO.*",
        "$JS.API.CONSUMER.INFO.KV_cdo-snapshots.*",
        *(
            call
            for stream in ("CDO", "KV_cdo-snapshots")
            for call in (
                f"$JS.API.CONSUMER.CREATE.{stream}.schedulers_dashboard",
                f"$JS.API.CONSUMER.CREATE.{stream}.schedulers_dashboard.>",
                f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.schedulers_dashboard",
                f"$JS.API.CONSUMER.DELETE.{stream}.schedulers_dashboard",
                f"$JS.API.CONSUMER.MSG.NEXT.{stream}.schedulers_dashboard",
            )
        ),
    }
    assert allowed("dashboard", namespace="schedulers").subscribe_allow == ("cdo.v1.>", "_INBOX.>")


def test_each_reader_owns_a_consumer_name_no_other_identity_has() -> None:
    names = {
        consumer_name(Identity(namespace=ns, service_account=sa))
        for ns, sa in (("a-b", "c"), ("a", "b-c"), ("schedulers", "dashboard"))
    }
    assert names == {"a-b_c", "a_b-c", "schedulers_dashboard"}


def test_stream_and_bucket_names_come_from_the_policy() -> None:
    policy = Policy(namespace="ns", readers=("ns/r",), stream="EVENTS", bucket="latest")
    writer = permissions_for(
        policy, Identity(namespace="ns", service_account="cdo-clique-allocator")
    )
    assert isinstance(writer, Permissions)
    assert "$KV.latest.v1.clique.>" in writer.publish_allow
    reader = reader_permissions(policy, Identity(namespace="ns", service_account="r")).publish_allow
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
