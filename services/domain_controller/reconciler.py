"""The reconcile of one ComputeDomain: read current state, converge, report.

For a domain that is not being deleted:

1. hold the finalizer ``cdo.dev/compute-domain`` (added before anything is created for it);
2. make the ResourceClaimTemplate it names exist and be the domain's (see ``template.py``): create,
   repair or replace a stale one; never touch one that belongs to someone else;
3. compute the status from the caches (``facts.py``, ``status.py``) and write it if it changed,
   recording an Event for each notable transition (``notices.py``);
4. publish a membership event if what it says changed (``membership.py``).

While spans are exported, each reconcile's span joins the domain's trace (or the trace of a
fault the domain goes through), and the domain's trace annotations are written with the
finalizer or when they change (``tracecontext.py``).

For a domain being deleted, while the finalizer is held: report ``Deleting`` with what it waits
for; once no pod uses its claims and the allocator has deleted its Placement, delete the
template, publish the final ``Deleted`` event and remove the finalizer. A domain that vanished
without that (finalizer removed by hand) still gets its final event.

A template-name conflict is a terminal error: retrying cannot help, and a change of the template
(its owner deleting it, say) queues the domain again.
"""

from __future__ import annotations

from datetime import UTC, datetime

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Tracer

from services.domain_controller.caches import Caches, template_key
from services.domain_controller.facts import gang_size, gather, member_nodes
from services.domain_controller.membership import DELETED, Ledger, final_event, membership_event
from services.domain_controller.notices import notices
from services.domain_controller.status import Assessment, compute_status
from services.domain_controller.template import (
    Ownership,
    desired_template,
    metadata_repair,
    ownership,
    spec_drifted,
)
from services.domain_controller.tracecontext import desired_annotations, fault_context, ready
from services.domain_controller.writes import DomainWrites
from shared.bus import EventBus
from shared.crds.computedomain import ComputeDomain
from shared.crds.definitions import COMPUTE_DOMAINS
from shared.crds.names import (
    DOMAIN_FINALIZER,
    FAULT_TRACE_CONTEXT_ANNOTATION,
    TRACE_CONTEXT_ANNOTATION,
)
from shared.crds.placement import PlacementSpec
from shared.errors import TerminalError
from shared.events import DomainMembershipChanged
from shared.kube.errors import KubeApiError
from shared.kube.keys import ObjectKey
from shared.kube.models import ResourceClaimTemplate
from shared.kube.ownwrites import OwnWrites
from shared.kube.reconcile import Result
from shared.kube.recorder import EventRecorder, EventType
from shared.tracing import annotations_for, exports
from shared.tracing.story import node_faults, story_parent, story_patch, story_with_fault


def now_in_seconds() -> datetime:
    """Condition timestamps are whole seconds in the API; so are ours, to compare equal."""
    return datetime.now(UTC).replace(microsecond=0)


class DomainReconciler:
    """Reconciles ComputeDomains by key; only the leader runs it."""

    def __init__(
        self,
        *,
        caches: Caches,
        writes: DomainWrites,
        own_writes: OwnWrites[ComputeDomain],
        bus: EventBus,
        recorder: EventRecorder,
        ledger: Ledger,
        tracer: Tracer,
        resync_s: float = 0.0,
    ) -> None:
        self._caches = caches
        self._writes = writes
        self._own = own_writes
        self._bus = bus
        self._recorder = recorder
        self._ledger = ledger
        self._tracer = tracer
        self._resync_s = resync_s

    async def reconcile(self, key: ObjectKey) -> Result:
        attributes = {"cdo.domain.namespace": key.namespace, "cdo.domain.name": key.name}
        text = str(key)
        domain = self._own.current(text, self._caches.domains.cache.get(text))
        # Trace annotations are read and written only while spans are exported: with tracing
        # off the controller does exactly what it did without them.
        traced = exports(self._tracer)
        parent, links = self._story(domain) if traced and domain is not None else (None, [])
        with self._tracer.start_as_current_span(
            "reconcile ComputeDomain", context=parent, links=links, attributes=attributes
        ) as span:
            own = annotations_for(span, key=TRACE_CONTEXT_ANNOTATION) if traced else {}
            own_trace = own.get(TRACE_CONTEXT_ANNOTATION)
            return await self._reconcile(key, domain, own_trace)

    # -- which trace -----------------------------------------------------------------------------

    def _story(self, domain: ComputeDomain) -> tuple[Context | None, list[Link]]:
        """The parent and links of this reconcile's span (see ``tracecontext.py``)."""
        fault = fault_context(
            recorded=domain.metadata.annotations.get(FAULT_TRACE_CONTEXT_ANNOTATION),
            on_nodes=self._fault_contexts(domain),
            ready=ready(domain.status),
        )
        return story_parent(story_with_fault(domain.metadata.annotations, fault))

    def _fault_contexts(self, domain: ComputeDomain) -> list[str]:
        """Fault contexts on the nodes the domain uses: the member nodes of every slice of its
        Placement, and the nodes its pods are (or were, while they terminate) bound to."""
        placement = self._placement(domain)
        names = set(placement.nodes) if placement else set()
        pods = self._caches.pods_using(domain.metadata.namespace, domain.template_name)
        names.update(pod.spec.node_name for pod in pods if pod.spec.node_name)
        nodes = self._caches.nodes.cache
        return node_faults(nodes.get(name) for name in sorted(names))

    def _trace_changes(
        self, domain: ComputeDomain, own_trace: str | None, *, fault: str | None
    ) -> dict[str, str | None]:
        """The annotation writes that bring the domain's trace context and the fault it follows
        up to date: none when they are, or while spans are not exported (``own_trace`` None)."""
        if own_trace is None:
            return {}
        current = domain.metadata.annotations
        return story_patch(current, desired_annotations(current, own_trace=own_trace, fault=fault))

    # -- the reconcile ---------------------------------------------------------------------------

    async def _reconcile(
        self, key: ObjectKey, domain: ComputeDomain | None, own_trace: str | None
    ) -> Result:
        if domain is None:
            await self.vanished(key)
            return Result()
        held = DOMAIN_FINALIZER in domain.metadata.finalizers
        if domain.deleting:
            # Without our finalizer there is nothing of ours to release: it goes without us.
            return await self._finalize(key, domain) if held else Result()
        if not held:
            # The domain's trace context goes out with the finalizer: no extra write. The fault
            # stays as recorded here; it is decided after the assessment.
            changes = self._trace_changes(
                domain,
                own_trace,
                fault=domain.metadata.annotations.get(FAULT_TRACE_CONTEXT_ANNOTATION),
            )
            domain = await self._writes.add_finalizer(domain, annotations=changes)
        return await self._converge(key, domain, own_trace)

    # -- a live domain -------------------------------------------------------------------------

    async def _converge(
        self, key: ObjectKey, domain: ComputeDomain, own_trace: str | None
    ) -> Result:
        template = self._template(domain)
        owner = self._ownership(template, domain)
        if owner.kind == "stale" and template is not None:
            await self._writes.delete_template(
                namespace=template.metadata.namespace,
                name=template.metadata.name,
                uid=template.metadata.uid,
            )
            template, owner = None, Ownership(kind="missing")
        if owner.kind == "missing":
            # The cache may not show a template created a moment ago: then look at that one.
            template = await self._create_template(domain)
            owner = self._ownership(template, domain) if template else Ownership(kind="ours")
        elif owner.kind == "ours" and template is not None:
            await self._repair(domain, template)
        conflict = owner.message if owner.kind == "conflict" else ""
        assessment = self._assess(domain, conflict=conflict)
        # Low cardinality, and what a reader of the trace looks for: where the domain stands.
        trace.get_current_span().set_attribute("cdo.domain.phase", assessment.phase)
        if own_trace is not None:
            fault = fault_context(
                recorded=domain.metadata.annotations.get(FAULT_TRACE_CONTEXT_ANNOTATION),
                on_nodes=self._fault_contexts(domain),
                ready=ready(assessment.status),
            )
            changes = self._trace_changes(domain, own_trace, fault=fault)
            if changes:
                domain = await self._writes.annotate(domain, changes)
        await self._report(key, domain, assessment)
        if conflict:
            raise TerminalError(conflict, reason="TemplateNameConflict")
        return Result(requeue_after=self._resync_s) if self._resync_s > 0 else Result()

    def _template(self, domain: ComputeDomain) -> ResourceClaimTemplate | None:
        return self._caches.templates.cache.get(
            template_key(domain.metadata.namespace, domain.template_name)
        )

    def _ownership(
        self, template: ResourceClaimTemplate | None, domain: ComputeDomain
    ) -> Ownership:
        namespace = domain.metadata.namespace
        return ownership(
            template,
            domain,
            owner_alive=lambda name, uid: self._caches.domain_alive(namespace, name, uid),
        )

    async def _create_template(self, domain: ComputeDomain) -> ResourceClaimTemplate | None:
        """Create the domain's template; if one already exists, return it instead."""
        try:
            await self._writes.create_template(desired_template(domain))
        except KubeApiError as exc:
            if not exc.already_exists:
                raise
            return await self._writes.get_template(
                namespace=domain.metadata.namespace, name=domain.template_name
            )
        return None

    async def _repair(self, domain: ComputeDomain, template: ResourceClaimTemplate) -> None:
        meta = template.metadata
        if spec_drifted(template, domain):
            # A template's spec is immutable: the only repair is a new one.
            await self._writes.delete_template(
                namespace=meta.namespace, name=meta.name, uid=meta.uid
            )
            await self._create_template(domain)
            await self._event(
                domain, "Warning", "TemplateRecreated", f"{meta.name} had been changed; recreated"
            )
            return
        patch = metadata_repair(template, domain)
        if patch:
            await self._writes.patch_template(namespace=meta.namespace, name=meta.name, body=patch)
            await self._event(
                domain, "Normal", "TemplateRepaired", f"restored labels of {meta.name}"
            )

    # -- status and events ---------------------------------------------------------------------

    def _placement(self, domain: ComputeDomain) -> PlacementSpec | None:
        placement = self._caches.placements.cache.get(domain.key)
        if placement is None:
            return None
        owners = [
            ref.uid
            for ref in placement.metadata.owner_references
            if ref.kind == COMPUTE_DOMAINS.kind
        ]
        # A Placement owned by an earlier domain of the same name is the garbage collector's.
        if owners and domain.metadata.uid not in owners:
            return None
        return placement.spec

    def _assess(self, domain: ComputeDomain, *, conflict: str) -> Assessment:
        placement = self._placement(domain)
        nodes = self._caches.nodes.cache
        # Pods naming a template that is someone else's are not this domain's.
        pods = (
            []
            if conflict
            else self._caches.pods_using(domain.metadata.namespace, domain.template_name)
        )
        facts = gather(
            generation=domain.metadata.generation,
            deleting=domain.deleting,
            template_conflict=conflict,
            placement=placement,
            pods=pods,
            nodes={name: nodes.get(name) for name in member_nodes(placement, pods)},
            gang_size=gang_size(domain),
            per_gpu_faults=(
                self._caches.device_taint_rules.served if self._caches.use_dra_gpus(pods) else None
            ),
        )
        return compute_status(facts, previous=domain.status, now=now_in_seconds())

    async def _report(self, key: ObjectKey, domain: ComputeDomain, assessment: Assessment) -> None:
        if assessment.status != domain.status:
            updated = await self._writes.write_status(domain, assessment.status)
            for notice in notices(domain.status, assessment.status):
                await self._event(updated, notice.type, notice.reason, notice.message)
        event = membership_event(
            key,
            uid=domain.metadata.uid,
            generation=domain.metadata.generation,
            assessment=assessment,
        )
        await self.publish(key, event)

    async def publish(self, key: ObjectKey, event: DomainMembershipChanged) -> None:
        """Publish ``event`` unless it says what was last published for the domain."""
        if self._ledger.changed(key, event):
            await self._bus.publish(event)
            self._ledger.record(key, event)

    async def _event(
        self, domain: ComputeDomain, type_: EventType, reason: str, message: str
    ) -> None:
        await self._recorder.record(
            COMPUTE_DOMAINS, domain, type_=type_, reason=reason, message=message
        )

    # -- deletion ------------------------------------------------------------------------------

    async def _finalize(self, key: ObjectKey, domain: ComputeDomain) -> Result:
        template = self._template(domain)
        owner = self._ownership(template, domain)
        conflict = owner.message if owner.kind == "conflict" else ""
        assessment = self._assess(domain, conflict=conflict)
        if assessment.deletion != "Releasing":
            await self._report(key, domain, assessment)
            return Result()  # a pod or the Placement going away queues the domain again
        if owner.kind == "ours" and template is not None:
            await self._writes.delete_template(
                namespace=template.metadata.namespace,
                name=template.metadata.name,
                uid=template.metadata.uid,
            )
        final = final_event(key, uid=domain.metadata.uid, generation=domain.metadata.generation)
        await self.publish(key, final)
        await self._event(
            domain, "Normal", "Released", "pods gone, placement released, template deleted"
        )
        await self._writes.remove_finalizer(domain)
        return Result()

    async def vanished(self, key: ObjectKey) -> None:
        """The domain is gone: make sure its last event says so, then forget it."""
        entry = self._ledger.get(key)
        if entry is None:
            return
        if entry.phase != DELETED:
            await self.publish(key, final_event(key, uid=entry.uid, generation=0))
        self._ledger.forget(key)
