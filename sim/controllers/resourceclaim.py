"""Resource-claim controller: a pod's ResourceClaims from ResourceClaimTemplates, and their upkeep.

Two loops, as in the real controller:

**Pods** (key: the pod). For each ``spec.resourceClaims`` entry naming a
``resourceClaimTemplateName`` that ``status.resourceClaimStatuses`` does not list yet, find the
claim made for it earlier (owned by the pod, annotation ``resource.kubernetes.io/pod-claim-name``
equal to the entry's name, or created by this controller and not in the cache yet) or create one:

- ``generateName: <pod>-<entry>-`` (cut so the name fits 63 characters), so the API appends five
  random characters;
- ownerReference to the pod with ``controller: true`` and ``blockOwnerDeletion: true``, so the
  garbage collector deletes the claim with the pod;
- labels and annotations of the template's ``spec.metadata`` (cdo finds a claim's domain by
  them), plus the ``pod-claim-name`` annotation; ``spec`` is the template's ``spec.spec``.

Then it records ``{name: <entry>, resourceClaimName: <claim>}`` in the pod's status (a strategic
merge patch of the status subresource, merged by name, guarded by the pod's uid). Pods being
deleted or finished get no new claims. A missing template leaves the entry for later: the
template's arrival queues the pods that name it.

**Claims** (key: the claim). Entries of ``status.reservedFor`` for pods that are gone (checked
with the API server when the cache does not have them), replaced by another pod of the same
name, finished, or deleted before being scheduled are removed, with a write guarded by the
claim's resourceVersion (the scheduler writes the same list). When that leaves no reservation,
the allocation is cleared so the devices are free again, and the
``resource.kubernetes.io/delete-protection`` finalizer is removed once the claim is not
allocated (also for a claim being deleted). A claim made for a pod that no longer needs it (the
pod in the cache is finished or another incarnation) is deleted; one whose pod is gone is left to
the garbage collector.

Simplified: the real controller clears the allocation only of claims carrying the
delete-protection finalizer (which its scheduler always adds); this one clears it on the last
reservation's removal regardless, so a scheduler that does not add the finalizer frees devices
the same way. It records no Events and serves no metrics of its own beyond the loops'.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.keys import ObjectKey
from shared.kube.mapping import map_by_owner, own_key
from shared.kube.meta import KubeObject
from shared.kube.models import (
    Pod,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimTemplate,
)
from shared.kube.ratelimit import RateLimitSettings
from shared.kube.reconcile import Result
from shared.kube.resources import PODS, RESOURCE_CLAIMS
from shared.metrics import Metrics
from sim.controllers.expectations import Expectations, Outstanding
from sim.controllers.informers import BY_CONTROLLER, SharedInformers
from sim.controllers.loop import Loop
from sim.controllers.objects import controller_of, controller_reference
from sim.controllers.pods import is_terminal, is_terminating

log = logging.getLogger("cdo.sim.controllers.resourceclaim")

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"
BY_TEMPLATE = "claim-template"
BY_CONSUMER = "consumer-pod"
_MAX_GENERATE_NAME = 58  # 63 characters less the five the API server appends

_decode_pod = msgspec.json.Decoder(Pod)
_decode_claim = msgspec.json.Decoder(ResourceClaim)


def is_pod_done(pod: Pod) -> bool:
    """The pod will not (again) use its claims: finished, or deleted before it was scheduled."""
    return is_terminal(pod) or (is_terminating(pod) and not pod.spec.node_name)


def template_claims(pod: Pod) -> list[tuple[str, str]]:
    """(entry name, template name) of the pod's claims made from templates."""
    return [
        (claim.name, claim.resource_claim_template_name)
        for claim in pod.spec.resource_claims
        if claim.resource_claim_template_name
    ]


# -- pods: claims to create ---------------------------------------------------------------------


def claim_generate_name(pod_name: str, entry: str) -> str:
    prefix = f"{pod_name}-{entry}-"
    if len(prefix) > _MAX_GENERATE_NAME:
        prefix = prefix[: _MAX_GENERATE_NAME - 1] + "-"
    return prefix


def claim_from_template(pod: Pod, entry: str, template: ResourceClaimTemplate) -> dict[str, Any]:
    """The ResourceClaim the real controller makes for ``entry`` of ``pod``."""
    template_meta: dict[str, Any] = template.spec.get("metadata") or {}
    annotations = dict(template_meta.get("annotations") or {})
    annotations[POD_CLAIM_NAME_ANNOTATION] = entry
    metadata: dict[str, Any] = {
        "generateName": claim_generate_name(pod.metadata.name, entry),
        "namespace": pod.metadata.namespace,
        "ownerReferences": [controller_reference(PODS, pod)],
        "annotations": annotations,
    }
    labels = template_meta.get("labels")
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": RESOURCE_CLAIMS.api_version,
        "kind": RESOURCE_CLAIMS.kind,
        "metadata": metadata,
        "spec": copy.deepcopy(template.spec.get("spec") or {}),
    }


@dataclass(frozen=True)
class PodClaimPlan:
    """Claims to create as (entry, body); statuses to record as (entry, claim name)."""

    create: tuple[tuple[str, dict[str, Any]], ...] = ()
    record: tuple[tuple[str, str], ...] = ()
    missing_templates: tuple[str, ...] = ()


def plan_pod_claims(
    pod: Pod,
    *,
    owned_claims: Sequence[ResourceClaim],
    outstanding: Outstanding,
    templates: Mapping[str, ResourceClaimTemplate | None],
) -> PodClaimPlan:
    """What the pod still needs: see the module docstring."""
    if is_terminating(pod) or is_terminal(pod):
        return PodClaimPlan()
    recorded = {status.name for status in pod.status.resource_claim_statuses}
    existing: dict[str, str] = {}
    for claim in owned_claims:
        entry = claim.metadata.annotations.get(POD_CLAIM_NAME_ANNOTATION)
        if entry and claim.metadata.deletion_timestamp is None:
            existing.setdefault(entry, claim.metadata.name)
    for create in outstanding.creates:
        existing.setdefault(create.tag, create.name)
    to_create: list[tuple[str, dict[str, Any]]] = []
    record: list[tuple[str, str]] = []
    missing: list[str] = []
    for entry, template_name in template_claims(pod):
        if entry in recorded:
            continue
        if entry in existing:
            record.append((entry, existing[entry]))
            continue
        template = templates.get(template_name)
        if template is None:
            missing.append(template_name)
            continue
        to_create.append((entry, claim_from_template(pod, entry, template)))
    return PodClaimPlan(
        create=tuple(to_create), record=tuple(record), missing_templates=tuple(missing)
    )


def claim_statuses_patch(pod: Pod, record: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Strategic merge patch adding ``record`` to the pod's resourceClaimStatuses (by name)."""
    return {
        "metadata": {"uid": pod.metadata.uid},
        "status": {
            "resourceClaimStatuses": [
                {"name": entry, "resourceClaimName": claim} for entry, claim in record
            ]
        },
    }


# -- claims: reservations, allocation, deletion -------------------------------------------------


@dataclass(frozen=True)
class ClaimPlan:
    """``reserved_for``: the list to write when entries go (None: unchanged)."""

    reserved_for: tuple[ResourceClaimConsumerReference, ...] | None = None
    deallocate: bool = False
    remove_finalizer: bool = False
    delete: bool = False


def _is_pod_ref(ref: ResourceClaimConsumerReference) -> bool:
    return ref.resource == "pods" and not ref.api_group


def plan_claim(claim: ResourceClaim, pods: Mapping[str, Pod | None]) -> ClaimPlan:
    """Upkeep of one claim. ``pods`` maps pod names to the pod (from the cache or the API),
    or None when the API confirmed it is gone; a name not in it is not known."""
    reserved = claim.status.reserved_for
    valid: list[ResourceClaimConsumerReference] = []
    for ref in reserved:
        if _is_pod_ref(ref):
            pod = pods.get(ref.name)
            if ref.name in pods and (
                pod is None or pod.metadata.uid != ref.uid or is_pod_done(pod)
            ):
                continue
        valid.append(ref)
    allocated = claim.status.allocation is not None
    protected = DELETE_PROTECTION_FINALIZER in claim.metadata.finalizers
    deleting = claim.metadata.deletion_timestamp is not None
    reserved_for: tuple[ResourceClaimConsumerReference, ...] | None = None
    deallocate = remove_finalizer = False
    if len(valid) < len(reserved):
        reserved_for = tuple(valid)
        deallocate = allocated and not valid
        remove_finalizer = protected and (not allocated or deallocate)
    elif protected and deleting and not valid:
        deallocate = allocated
        remove_finalizer = True
    delete = False
    owner = controller_of(claim)
    if not valid and not deleting and owner is not None and owner.kind == "Pod":
        pod = pods.get(owner.name)
        delete = pod is not None and (pod.metadata.uid != owner.uid or is_pod_done(pod))
    return ClaimPlan(
        reserved_for=reserved_for,
        deallocate=deallocate,
        remove_finalizer=remove_finalizer,
        delete=delete,
    )


def claim_status_patch(claim: ResourceClaim, plan: ClaimPlan) -> dict[str, Any] | None:
    """Merge patch of the claim's status for ``plan``, guarded by its resourceVersion."""
    status: dict[str, Any] = {}
    if plan.reserved_for is not None:
        status["reservedFor"] = [msgspec.to_builtins(r) for r in plan.reserved_for] or None
    if plan.deallocate:
        status["allocation"] = None
    if not status:
        return None
    return {"metadata": {"resourceVersion": claim.metadata.resource_version}, "status": status}


# -- the controller -----------------------------------------------------------------------------


def _consumers(claim: ResourceClaim) -> list[str]:
    """Index function: ``namespace/pod`` of every pod reserving or owning the claim."""
    namespace = claim.metadata.namespace
    names = {ref.name for ref in claim.status.reserved_for if _is_pod_ref(ref)}
    owner = controller_of(claim)
    if owner is not None and owner.kind == "Pod":
        names.add(owner.name)
    return [f"{namespace}/{name}" for name in sorted(names)]


def _templates_of(pod: Pod) -> list[str]:
    """Index function: ``namespace/template`` of every template the pod's claims name."""
    return sorted({f"{pod.metadata.namespace}/{t}" for _, t in template_claims(pod)})


class ResourceClaimController:
    """Creates claims from templates for pods and keeps claims' reservations; see the module
    docstring."""

    def __init__(
        self,
        client: KubeClient,
        informers: SharedInformers,
        *,
        metrics: Metrics,
        workers: int,
        expectations_ttl_s: float,
        rate_limit: RateLimitSettings,
    ) -> None:
        self._client = client
        self._pods = informers.pods
        self._claims = informers.claims
        self._templates = informers.claim_templates
        self._expectations = Expectations(
            cache_version=lambda: self._claims.resource_version, ttl_s=expectations_ttl_s
        )
        self._pods.add_index(BY_TEMPLATE, _templates_of)
        self._claims.add_index(BY_CONSUMER, _consumers)
        self.pod_loop = Loop(
            name="sim-resourceclaim-pods",
            reconcile=self.reconcile_pod,
            metrics=metrics,
            workers=workers,
            rate_limit=rate_limit,
        )
        self.claim_loop = Loop(
            name="sim-resourceclaim-claims",
            reconcile=self.reconcile_claim,
            metrics=metrics,
            workers=workers,
            rate_limit=rate_limit,
        )
        self._pods.add_handler(self.pod_loop.on_change(self._pod_with_templates))
        self._pods.add_handler(self.claim_loop.on_change(self._claims_of_pod))
        self._pods.add_handler(self._forget_deleted)
        self._claims.add_handler(
            self.pod_loop.on_change(map_by_owner(group="", kind="Pod", controller_only=True))
        )
        self._claims.add_handler(self.claim_loop.on_change(own_key))
        self._templates.add_handler(self.pod_loop.on_change(self._pods_of_template))

    @property
    def loops(self) -> tuple[Loop, Loop]:
        return (self.pod_loop, self.claim_loop)

    # -- mapping --------------------------------------------------------------------------------

    @staticmethod
    def _pod_with_templates(obj: object) -> Iterator[ObjectKey]:
        if isinstance(obj, Pod) and template_claims(obj):
            yield from own_key(obj)

    def _claims_of_pod(self, obj: object) -> Iterator[ObjectKey]:
        if isinstance(obj, KubeObject):
            for claim in self._claims.cache.by_index(BY_CONSUMER, obj.key):
                yield from own_key(claim)

    def _pods_of_template(self, obj: object) -> Iterator[ObjectKey]:
        if isinstance(obj, KubeObject):
            for pod in self._pods.cache.by_index(BY_TEMPLATE, obj.key):
                yield from own_key(pod)

    def _forget_deleted(self, old: Pod | None, new: Pod | None) -> None:
        if new is None and old is not None:
            self._expectations.forget(old.metadata.uid)

    # -- pods -----------------------------------------------------------------------------------

    async def reconcile_pod(self, key: ObjectKey) -> Result:
        pod = self._pods.cache.get(str(key))
        if pod is None:
            return Result()
        owned = self._claims.cache.by_index(BY_CONTROLLER, pod.metadata.uid)
        namespace = pod.metadata.namespace
        plan = plan_pod_claims(
            pod,
            owned_claims=owned,
            outstanding=self._expectations.outstanding(pod.metadata.uid, owned),
            templates={
                name: self._templates.cache.get(f"{namespace}/{name}")
                for _, name in template_claims(pod)
            },
        )
        record = list(plan.record)
        error: KubeApiError | None = None
        for entry, body in plan.create:
            try:
                raw = await self._client.create(RESOURCE_CLAIMS, body, namespace=namespace)
            except KubeApiError as exc:
                error = exc
                break
            claim = _decode_claim.decode(raw)
            self._expectations.created(pod.metadata.uid, claim, tag=entry)
            record.append((entry, claim.metadata.name))
        if record:
            try:
                await self._client.patch(
                    PODS,
                    pod.metadata.name,
                    claim_statuses_patch(pod, record),
                    namespace=namespace,
                    subresource="status",
                    patch_type="strategic",
                )
            except KubeApiError as exc:
                # Gone, or another pod of that name now: its own events bring it here.
                if not (exc.not_found or exc.conflict):
                    raise
        if error is not None:
            raise error
        if plan.missing_templates:
            log.debug(
                "pod waits for claim templates",
                extra={"pod": str(key), "templates": list(plan.missing_templates)},
            )
        return Result()

    # -- claims ---------------------------------------------------------------------------------

    async def _pods_for(self, claim: ResourceClaim) -> dict[str, Pod | None]:
        namespace = claim.metadata.namespace
        pods: dict[str, Pod | None] = {}
        for ref in claim.status.reserved_for:
            if not _is_pod_ref(ref) or ref.name in pods:
                continue
            cached = self._pods.cache.get(f"{namespace}/{ref.name}")
            if cached is not None:
                pods[ref.name] = cached
                continue
            # The cache may not know a pod the scheduler just reserved for: ask the API.
            raw = await self._client.get_or_none(PODS, ref.name, namespace=namespace)
            pods[ref.name] = _decode_pod.decode(raw) if raw is not None else None
        owner = controller_of(claim)
        if owner is not None and owner.kind == "Pod" and owner.name not in pods:
            cached = self._pods.cache.get(f"{namespace}/{owner.name}")
            if cached is not None:
                pods[owner.name] = cached
        return pods

    async def reconcile_claim(self, key: ObjectKey) -> Result:
        claim = self._claims.cache.get(str(key))
        if claim is None:
            return Result()
        plan = plan_claim(claim, await self._pods_for(claim))
        meta = claim.metadata
        resource_version = meta.resource_version
        try:
            status = claim_status_patch(claim, plan)
            if status is not None:
                raw = await self._client.patch(
                    RESOURCE_CLAIMS,
                    meta.name,
                    status,
                    namespace=meta.namespace,
                    subresource="status",
                )
                resource_version = _decode_claim.decode(raw).metadata.resource_version
            if plan.remove_finalizer:
                finalizers = [f for f in meta.finalizers if f != DELETE_PROTECTION_FINALIZER]
                await self._client.patch(
                    RESOURCE_CLAIMS,
                    meta.name,
                    {
                        "metadata": {
                            "resourceVersion": resource_version,
                            "finalizers": finalizers or None,
                        }
                    },
                    namespace=meta.namespace,
                )
            if plan.delete:
                await self._client.delete(
                    RESOURCE_CLAIMS, meta.name, namespace=meta.namespace, uid=meta.uid
                )
        except KubeApiError as exc:
            if exc.not_found:
                return Result()
            raise  # a conflict means the claim changed under us: look again with backoff
        return Result()
