"""Which NATS subjects an authenticated Kubernetes identity may publish and subscribe to.

:func:`permissions_for` is the whole policy, a pure function of the identity a TokenReview
answered (the ServiceAccount, and the node its token is bound to) and the JetStream names:

================================  ==========================================================
identity                          publish
================================  ==========================================================
``cdo-domain-controller``         ``cdo.v1.domain.>`` and the domain snapshot keys
``cdo-clique-allocator``          ``cdo.v1.clique.>`` and the clique snapshot keys
``cdo-imex-agent`` on node N      node N's IMEX state and its IMEX snapshot key
``cdo-health-monitor`` on node N  node N's fault and recovered events and its health key
a reader ServiceAccount           nothing but the JetStream API calls a consumer makes
================================  ==========================================================

The four services are ServiceAccounts of cdo's namespace; the per-node ones must hold a token
bound to a node (``authentication.kubernetes.io/node-name``), so one node's agent can never
publish another node's events. Writers may also call the JetStream API (streams, the snapshot
bucket, publish acknowledgements), except what deletes history. Every identity may subscribe to
its own inboxes; the IMEX agent also follows its peers' IMEX state and readers every event.
Anything else is refused with the reason (:class:`Refused`).
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.events import subjects

DOMAIN_CONTROLLER = "cdo-domain-controller"
CLIQUE_ALLOCATOR = "cdo-clique-allocator"
IMEX_AGENT = "cdo-imex-agent"
HEALTH_MONITOR = "cdo-health-monitor"

JS_API = "$JS.API.>"
JS_FLOW_CONTROL = "$JS.FC.>"
INBOXES = "_INBOX.>"
JS_DESTRUCTIVE = (
    "$JS.API.STREAM.DELETE.>",
    "$JS.API.STREAM.PURGE.>",
    "$JS.API.STREAM.MSG.DELETE.>",
    "$JS.API.ACCOUNT.PURGE.>",
)
"""JetStream API subjects no cdo identity may publish: deleting or purging history."""


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a ServiceAccount token stands for (from the TokenReview's user)."""

    namespace: str
    service_account: str
    node: str = ""
    """The node the token is bound to (its pod's node, or the Node itself); "" when unbound."""


@dataclass(frozen=True, slots=True)
class Permissions:
    """NATS publish and subscribe permissions (allow lists, publish deny list)."""

    publish_allow: tuple[str, ...]
    subscribe_allow: tuple[str, ...]
    publish_deny: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Refused:
    """The identity gets no NATS user; ``reason`` goes back to the server (and its log)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Policy:
    """What the mapping needs to know about the installation."""

    namespace: str
    """cdo's namespace: the four services' ServiceAccounts live there."""
    readers: tuple[str, ...] = ()
    """Reader ServiceAccounts, ``<namespace>/<name>``, or ``<namespace>/*`` for all of one."""
    stream: str = "CDO"
    bucket: str = "cdo-snapshots"


def _kv(policy: Policy, key: str) -> str:
    return f"$KV.{policy.bucket}.{key}"


def _writer(own: tuple[str, ...], *, follow: tuple[str, ...] = ()) -> Permissions:
    return Permissions(
        publish_allow=(*own, JS_API, JS_FLOW_CONTROL),
        publish_deny=JS_DESTRUCTIVE,
        subscribe_allow=(*follow, INBOXES),
    )


def reader_permissions(policy: Policy) -> Permissions:
    """Live events, the stream's history and the snapshots, read only: consumers may be made,
    read and removed, nothing else changed, no event published."""
    stream, kv = policy.stream, f"KV_{policy.bucket}"
    api = "$JS.API"
    return Permissions(
        publish_allow=(
            f"{api}.INFO",
            f"{api}.STREAM.INFO.{stream}",
            f"{api}.STREAM.INFO.{kv}",
            f"{api}.CONSUMER.CREATE.{stream}",
            f"{api}.CONSUMER.CREATE.{stream}.>",
            f"{api}.CONSUMER.CREATE.{kv}",
            f"{api}.CONSUMER.CREATE.{kv}.>",
            f"{api}.CONSUMER.DURABLE.CREATE.{stream}.>",
            f"{api}.CONSUMER.INFO.{stream}.>",
            f"{api}.CONSUMER.INFO.{kv}.>",
            f"{api}.CONSUMER.DELETE.{stream}.>",
            f"{api}.CONSUMER.DELETE.{kv}.>",
            f"{api}.CONSUMER.MSG.NEXT.{stream}.>",
            f"{api}.DIRECT.GET.{kv}.>",
            f"{api}.STREAM.MSG.GET.{kv}",
            f"$JS.ACK.{stream}.>",
            JS_FLOW_CONTROL,
        ),
        subscribe_allow=(subjects.ALL_EVENTS, INBOXES),
    )


def is_reader(policy: Policy, identity: Identity) -> bool:
    return any(
        entry in (f"{identity.namespace}/{identity.service_account}", f"{identity.namespace}/*")
        for entry in policy.readers
    )


def permissions_for(policy: Policy, identity: Identity) -> Permissions | Refused:
    """The permissions of ``identity`` (see the module's table), or why it gets none."""
    name = identity.service_account
    if identity.namespace == policy.namespace:
        if name == DOMAIN_CONTROLLER:
            return _writer((f"{subjects.SUBJECT_ROOT}.domain.>", _kv(policy, "v1.domain.>")))
        if name == CLIQUE_ALLOCATOR:
            return _writer((f"{subjects.SUBJECT_ROOT}.clique.>", _kv(policy, "v1.clique.>")))
        if name in (IMEX_AGENT, HEALTH_MONITOR):
            if not identity.node:
                return Refused(f"{name}: the token is not bound to a node")
            return _node_service(policy, name, identity.node)
    if is_reader(policy, identity):
        return reader_permissions(policy)
    return Refused(
        f"serviceaccount {identity.namespace}/{name} has no NATS permissions"
        + (f" (node {identity.node})" if identity.node else "")
    )


def _node_service(policy: Policy, name: str, node: str) -> Permissions:
    own: tuple[str, ...]
    if name == IMEX_AGENT:
        own = (
            subjects.NODE_IMEX.render(node=node),
            _kv(policy, subjects.NODE_IMEX_SNAPSHOT.render(node=node)),
        )
        # Peers' IMEX state shortens the agent's poll after a peer restarts.
        return _writer(own, follow=(subjects.NODE_IMEX.wildcard(),))
    own = (
        subjects.NODE_FAULT.render(node=node),
        subjects.NODE_RECOVERED.render(node=node),
        _kv(policy, subjects.NODE_HEALTH_SNAPSHOT.render(node=node)),
    )
    return _writer(own)
