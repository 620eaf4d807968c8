"""Reading the facts ``cdo explain`` explains: the domain, its Placement, its pods and their
Events, the nodes, every Placement (for computed capacity) from the Kubernetes API; the
``CliqueCapacity`` and ``NodeImexState`` snapshots from NATS when it answers."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import msgspec

from cli import capacity
from cli.connection import Endpoints, connect_kube
from cli.explain.facts import (
    ConditionFact,
    DomainFacts,
    EventFact,
    ImexFact,
    NodeFact,
    PlacementFact,
    PodFact,
    SliceFact,
)
from cli.reads import Domains, Pods, get_raw, list_nodes, list_placements, list_raw
from cli.snapshots import read as read_snapshots
from shared.command_errors import CommandError
from shared.crds import COMPUTE_DOMAINS, PLACEMENTS, ComputeDomain, Placement
from shared.crds.names import (
    CLIQUE_LABEL,
    GPU_HEALTHY_CONDITION,
    HOSTNAME_LABEL,
    IMEX_READY_CONDITION,
    PLACED_CONDITION,
    PLACEMENT_GATE,
)
from shared.crds.phase import domain_phase
from shared.events import CliqueCapacity, Event, NodeImexState
from shared.kube.client import KubeClient
from shared.kube.models import Condition, Node, Pod
from shared.kube.resources import EVENTS, PODS


class _InvolvedObject(msgspec.Struct, frozen=True, kw_only=True):
    kind: str = ""
    name: str = ""


class _Source(msgspec.Struct, frozen=True, kw_only=True):
    component: str = ""


class KubeEvent(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    involved_object: _InvolvedObject = msgspec.field(default_factory=_InvolvedObject)
    type: str = ""
    reason: str = ""
    message: str = ""
    count: int | None = None
    last_timestamp: datetime | None = None
    event_time: datetime | None = None
    first_timestamp: datetime | None = None
    source: _Source = msgspec.field(default_factory=_Source)


class KubeEvents(msgspec.Struct):
    items: list[KubeEvent]


def _condition(found: Condition | None) -> ConditionFact | None:
    if found is None:
        return None
    return ConditionFact(
        type=found.type, status=found.status, reason=found.reason, message=found.message
    )


def template_of(domain: ComputeDomain) -> str:
    return domain.spec.channel.resource_claim_template.name


def uses_template(pod: Pod, template: str) -> bool:
    return any(claim.resource_claim_template_name == template for claim in pod.spec.resource_claims)


def pod_fact(pod: Pod) -> PodFact:
    return PodFact(
        name=pod.metadata.name,
        phase=pod.status.phase,
        node=pod.spec.node_name or pod.spec.node_selector.get(HOSTNAME_LABEL, ""),
        gated=any(gate.name == PLACEMENT_GATE for gate in pod.spec.scheduling_gates),
        placed=_condition(pod.condition(PLACED_CONDITION)),
        scheduled=_condition(pod.condition("PodScheduled")),
    )


def node_fact(node: Node) -> NodeFact:
    return NodeFact(
        name=node.metadata.name,
        clique=node.metadata.labels.get(CLIQUE_LABEL, ""),
        ready=_condition(node.condition("Ready")),
        gpu_healthy=_condition(node.condition(GPU_HEALTHY_CONDITION)),
        imex_ready=_condition(node.condition(IMEX_READY_CONDITION)),
        taints=tuple(
            f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}" for t in node.spec.taints
        ),
        gpus=capacity.node_gpus(node),
    )


def placement_fact(placement: Placement) -> PlacementFact:
    spec = placement.spec
    return PlacementFact(
        gpus_per_pod=spec.gpus_per_pod,
        size=spec.size,
        multi_node_nvlink=spec.multi_node_nvlink,
        slices=tuple(
            SliceFact(
                index=piece.index,
                clique=piece.clique,
                channel=piece.channel,
                unit=piece.unit,
                first_rank=piece.first_rank,
                size=piece.size,
                nodes=tuple(member.node for member in piece.members),
                slots=piece.slots(spec.gpus_per_pod),
                placed_pods=piece.placed_pods,
                channel_only=piece.placed_channel_only,
                waiting_since=piece.waiting_since,
                moved_from=piece.moved_from,
            )
            for piece in sorted(spec.all_slices, key=lambda p: p.index)
        ),
    )


def event_fact(event: KubeEvent) -> EventFact:
    return EventFact(
        kind=event.involved_object.kind,
        name=event.involved_object.name,
        type=event.type,
        reason=event.reason,
        message=event.message,
        count=event.count or 1,
        last=event.last_timestamp or event.event_time or event.first_timestamp,
        component=event.source.component,
    )


def imex_fact(event: NodeImexState) -> ImexFact:
    return ImexFact(
        node=event.node,
        daemon_state=event.daemon_state,
        domain_state=event.domain_state,
        peers_connected=sum(1 for peer in event.peers if peer.state == "CONNECTED"),
        peers=len(event.peers),
    )


async def find_domain_of_pod(
    client: KubeClient, endpoints: Endpoints, *, namespace: str, pod: str
) -> str:
    """The name of the domain whose claim template ``pod`` uses; CommandError when none."""
    raw = await get_raw(client, endpoints, PODS, ns=namespace, name=pod)
    if raw is None:
        raise CommandError(f"pod {namespace}/{pod} not found")
    found = msgspec.json.decode(raw, type=Pod)
    listed = await list_raw(client, endpoints, COMPUTE_DOMAINS, namespace)
    domains = msgspec.json.decode(listed, type=Domains).items
    for domain in domains:
        if uses_template(found, template_of(domain)):
            return domain.metadata.name
    raise CommandError(
        f"pod {namespace}/{pod} uses no ComputeDomain's claim template: cdo does not place it"
    )


async def find_namespace(client: KubeClient, endpoints: Endpoints, name: str) -> str:
    """The one namespace holding a domain named ``name`` (``-A``)."""
    listed = await list_raw(client, endpoints, COMPUTE_DOMAINS)
    domains = msgspec.json.decode(listed, type=Domains).items
    spaces = sorted(d.metadata.namespace for d in domains if d.metadata.name == name)
    if not spaces:
        raise CommandError(f"no ComputeDomain named {name} in any namespace")
    if len(spaces) > 1:
        raise CommandError(
            f"ComputeDomains named {name} in several namespaces ({', '.join(spaces)}): pass -n"
        )
    return spaces[0]


async def collect(endpoints: Endpoints, *, namespace: str, name: str, pod: str = "") -> DomainFacts:
    """Every fact about domain ``namespace/name`` (and ``pod``, for the pod form)."""
    client = await connect_kube(endpoints)
    try:
        if pod:
            name = await find_domain_of_pod(client, endpoints, namespace=namespace, pod=pod)
        raw = await get_raw(client, endpoints, COMPUTE_DOMAINS, ns=namespace, name=name)
        if raw is None:
            raise CommandError(f"ComputeDomain {namespace}/{name} not found")
        domain = msgspec.json.decode(raw, type=ComputeDomain)
        recorded = await get_raw(client, endpoints, PLACEMENTS, ns=namespace, name=name)
        placement = None if recorded is None else msgspec.json.decode(recorded, type=Placement)
        pods = msgspec.json.decode(
            await list_raw(client, endpoints, PODS, namespace), type=Pods
        ).items
        nodes = await list_nodes(client, endpoints)
        placements = await list_placements(client, endpoints)
        events = msgspec.json.decode(
            await list_raw(client, endpoints, EVENTS, namespace), type=KubeEvents
        ).items
    finally:
        await client.close()
    snapshots = await read_snapshots(endpoints, "v1.clique.>", "v1.node.>")
    notes = [f"{snapshots.note}; capacity computed from the nodes"] if snapshots.note else []
    return domain_facts(
        domain,
        placement=placement,
        pods=pods,
        nodes=nodes,
        placements=placements,
        events=events,
        snapshots=snapshots.events,
        pod=pod,
        notes=notes,
    )


def domain_facts(
    domain: ComputeDomain,
    *,
    placement: Placement | None,
    pods: Sequence[Pod],
    nodes: Sequence[Node],
    placements: Sequence[Placement],
    events: Sequence[KubeEvent],
    snapshots: Sequence[Event] = (),
    pod: str = "",
    notes: Sequence[str] = (),
) -> DomainFacts:
    """The facts of ``domain`` from what was read (pure): ``pods`` and ``events`` of its
    namespace, every node and Placement, the NATS snapshots there were."""
    seated = set(placement.spec.pod_names) if placement is not None else set()
    template = template_of(domain)
    mine = [p for p in pods if uses_template(p, template) or p.metadata.name in seated]
    capacity_events = [e for e in snapshots if isinstance(e, CliqueCapacity)]
    phase, _reason = domain_phase(domain)
    return DomainFacts(
        namespace=domain.metadata.namespace,
        name=domain.metadata.name,
        phase=phase,
        conditions=tuple(
            ConditionFact(type=c.type, status=c.status, reason=c.reason, message=c.message)
            for c in domain.status.conditions
        ),
        placement=placement_fact(placement) if placement is not None else None,
        pods=tuple(pod_fact(p) for p in sorted(mine, key=lambda p: p.metadata.name)),
        nodes=tuple(node_fact(n) for n in nodes),
        cliques=tuple(capacity.cliques_of(capacity_events, nodes, placements)),
        imex=tuple(imex_fact(e) for e in snapshots if isinstance(e, NodeImexState)),
        events=tuple(event_fact(e) for e in events),
        pod=pod,
        notes=tuple(notes),
    )
