"""Which NATS subjects an authenticated Kubernetes identity may publish and subscribe to.

:func:`permissions_for` is the whole policy, a pure function of the identity a TokenReview
answered (the ServiceAccount, and the node its token is bound to) and the JetStream names:

================================  ==========================================================
identity                          publish
================================  ==========================================================
``cdo-nats-bootstrap``            nothing but creating and updating the stream and the bucket
``cdo-domain-controller``         ``cdo.v1.domain.>`` and the domain snapshot keys
``cdo-clique-allocator``          ``cdo.v1.clique.>`` and the clique snapshot keys
``cdo-imex-agent`` on node N      node N's IMEX state and its IMEX snapshot key
``cdo-health-monitor`` on node N  node N's fault and recovered events and its health key
a reader ServiceAccount           nothing but the JetStream API calls of its own consumers
================================  ==========================================================

JetStream administration is apart from publishing: the one-shot NATS bootstrap (its Job at
install, ``python -m services.nats_bootstrap``) creates and updates the stream and the bucket and
does nothing else; a service only looks them up (``STREAM.INFO``), so it runs with whatever limits
the stream has. The two controllers, which read the snapshots back, and the readers may create
ephemeral consumers (the server names them, at random, and removes them once their subscriber is
gone) and read any consumer's info; a reader also owns one named consumer per stream,
:func:`consumer_name` (``<namespace>_<serviceaccount>``), which it alone may create, pull from,
acknowledge and delete. Nobody lists, changes or deletes another's consumer, and nobody changes,
purges or deletes the stream: those API subjects are in no allow list.

The four services are ServiceAccounts of cdo's namespace; the per-node ones must hold a token
bound to a node (``authentication.kubernetes.io/node-name``), so one node's agent can never
publish another node's events. Every identity may subscribe to its own inboxes; the IMEX agent
also follows its peers' IMEX state and readers every event. Anything else is refused with the
reason (:class:`Refused`). :data:`ROLE_NAMES` names each set of permissions in the user's name,
which the server's log shows beside every refused publish.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.events import subjects

NATS_BOOTSTRAP = "cdo-nats-bootstrap"
DOMAIN_CONTROLLER = "cdo-domain-controller"
CLIQUE_ALLOCATOR = "cdo-clique-allocator"
IMEX_AGENT = "cdo-imex-agent"
HEALTH_MONITOR = "cdo-health-monitor"

JS_API = "$JS.API"
JS_FLOW_CONTROL = "$JS.FC.>"
"""Flow-control replies of the push consumers the client made."""
INBOXES = "_INBOX.>"


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
    role: str = ""
    """Which of the policy's sets this is (:data:`ROLE_NAMES`); goes into the user's name."""


@dataclass(frozen=True, slots=True)
class Refused:
    """The identity gets no NATS user; ``reason`` goes back to the server (and its log)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Policy:
    """What the mapping needs to know about the installation."""

    namespace: str
    """cdo's namespace: the services' ServiceAccounts live there."""
    readers: tuple[str, ...] = ()
    """Reader ServiceAccounts, ``<namespace>/<name>``, or ``<namespace>/*`` for all of one."""
    stream: str = "CDO"
    bucket: str = "cdo-snapshots"

    @property
    def bucket_stream(self) -> str:
        """The stream that holds the bucket (JetStream's name for it)."""
        return f"KV_{self.bucket}"


ROLE_NAMES = {
    NATS_BOOTSTRAP: "jetstream-admin",
    DOMAIN_CONTROLLER: "domain-publisher",
    CLIQUE_ALLOCATOR: "clique-publisher",
    IMEX_AGENT: "node-imex-publisher",
    HEALTH_MONITOR: "node-health-publisher",
}
READER_ROLE = "reader"


def consumer_name(identity: Identity) -> str:
    """The one named consumer a reader owns on each stream (a single subject token: neither
    namespaces nor ServiceAccount names hold ``_``, so no two identities share one)."""
    return f"{identity.namespace}_{identity.service_account}"


def _kv(policy: Policy, key: str) -> str:
    return f"$KV.{policy.bucket}.{key}"


def _look_up(policy: Policy) -> tuple[str, ...]:
    """Finding the stream and the bucket (a publisher binds to them, changes nothing)."""
    return (f"{JS_API}.STREAM.INFO.{policy.stream}", f"{JS_API}.STREAM.INFO.{policy.bucket_stream}")


def _ephemeral_consumers(stream: str) -> tuple[str, ...]:
    """Creating a consumer the server names (the request subject carries no name, so it can
    neither pick nor replace someone else's), and reading consumers' info: nats-py asks for
    its ephemeral consumer's (a KV watch, for what is pending), whose name only the server
    knows beforehand, so info is readable for every consumer of the stream (read only)."""
    return (f"{JS_API}.CONSUMER.CREATE.{stream}", f"{JS_API}.CONSUMER.INFO.{stream}.*")


def _own_consumer(stream: str, name: str) -> tuple[str, ...]:
    """Everything on the consumer ``name`` of ``stream``, and on no other."""
    api = JS_API
    return (
        f"{api}.CONSUMER.CREATE.{stream}.{name}",
        f"{api}.CONSUMER.CREATE.{stream}.{name}.>",
        f"{api}.CONSUMER.DURABLE.CREATE.{stream}.{name}",
        f"{api}.CONSUMER.DELETE.{stream}.{name}",
        f"{api}.CONSUMER.MSG.NEXT.{stream}.{name}",
        f"$JS.ACK.{stream}.{name}.>",
    )


_ADMIN_VERBS = ("INFO", "CREATE", "UPDATE")


def admin_permissions(policy: Policy) -> Permissions:
    """The NATS bootstrap's: create, look up and update the stream and the bucket; nothing
    deleted or purged, no event published, no consumer made."""
    api = JS_API
    managed = (policy.stream, policy.bucket_stream)
    return Permissions(
        publish_allow=(
            f"{api}.INFO",
            *(f"{api}.STREAM.{verb}.{stream}" for stream in managed for verb in _ADMIN_VERBS),
        ),
        subscribe_allow=(INBOXES,),
        role=ROLE_NAMES[NATS_BOOTSTRAP],
    )


def _publisher(
    policy: Policy,
    name: str,
    own: tuple[str, ...],
    *,
    follow: tuple[str, ...] = (),
    reads_snapshots: bool = False,
) -> Permissions:
    reading = (*_ephemeral_consumers(policy.bucket_stream), JS_FLOW_CONTROL)
    return Permissions(
        publish_allow=(*own, *_look_up(policy), *(reading if reads_snapshots else ())),
        subscribe_allow=(*follow, INBOXES),
        role=ROLE_NAMES[name],
    )


def reader_permissions(policy: Policy, identity: Identity) -> Permissions:
    """Live events, the stream's history and the snapshots, read only: ephemeral consumers and
    its own named one (:func:`consumer_name`), direct reads of the bucket, no event published."""
    stream, kv, api = policy.stream, policy.bucket_stream, JS_API
    own = consumer_name(identity)
    return Permissions(
        publish_allow=(
            f"{api}.INFO",
            *_look_up(policy),
            *_ephemeral_consumers(stream),
            *_ephemeral_consumers(kv),
            *_own_consumer(stream, own),
            *_own_consumer(kv, own),
            f"{api}.DIRECT.GET.{kv}.>",
            f"{api}.STREAM.MSG.GET.{kv}",
            JS_FLOW_CONTROL,
        ),
        subscribe_allow=(subjects.ALL_EVENTS, INBOXES),
        role=READER_ROLE,
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
        if name == NATS_BOOTSTRAP:
            return admin_permissions(policy)
        if name == DOMAIN_CONTROLLER:
            own = (f"{subjects.SUBJECT_ROOT}.domain.>", _kv(policy, "v1.domain.>"))
            return _publisher(policy, name, own, reads_snapshots=True)
        if name == CLIQUE_ALLOCATOR:
            own = (f"{subjects.SUBJECT_ROOT}.clique.>", _kv(policy, "v1.clique.>"))
            return _publisher(policy, name, own, reads_snapshots=True)
        if name in (IMEX_AGENT, HEALTH_MONITOR):
            if not identity.node:
                return Refused(f"{name}: the token is not bound to a node")
            return _node_service(policy, name, identity.node)
    if is_reader(policy, identity):
        return reader_permissions(policy, identity)
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
        return _publisher(policy, name, own, follow=(subjects.NODE_IMEX.wildcard(),))
    own = (
        subjects.NODE_FAULT.render(node=node),
        subjects.NODE_RECOVERED.render(node=node),
        _kv(policy, subjects.NODE_HEALTH_SNAPSHOT.render(node=node)),
    )
    return _publisher(policy, name, own)
