"""Device taint eviction controller (kube-controller-manager's, KEP-5055, GA in 1.37).

Pods whose allocated ResourceClaims hold a device with a NoExecute taint their claim's request
does not tolerate are deleted. A device's taints are its ResourceSlice's plus those of every
DeviceTaintRule selecting it (:mod:`sim.scheduler.devicetaints`). A toleration with
``tolerationSeconds`` delays the deletion until that long after the taint's ``timeAdded``; one
without tolerates for good. Finished pods and pods being deleted are left alone. Before the
delete the pod gets the ``DisruptionTarget`` condition (reason ``DeletionByDeviceTaintManager``),
as upstream does.

Two loops:

- **pods** (key: the pod), fed by pods, claims, slices and rules: evict when due, or look
  again when the first toleration runs out;
- **rules** (key: the DeviceTaintRule): ``status.conditions`` gets ``EvictionInProgress``:
  True while pods using a device the rule selects still have to be evicted for its taint,
  False otherwise (also for effects that evict nothing); the message counts the pods pending
  and those this controller evicted for the rule.

Which of it runs follows the release (:mod:`sim.release`): rules are read at the version the
release serves them, or not at all; before 1.35 a rule has no status, so no rules loop runs.

Simplified: a rule's evicted count lives in this process only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta

import msgspec

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.keys import ObjectKey, key_of
from shared.kube.models import DeviceTaint, DeviceTaintRule, Pod, ResourceSlice, Toleration
from shared.kube.models import ResourceClaim as SharedClaim
from shared.kube.ratelimit import RateLimitSettings
from shared.kube.reconcile import Result
from shared.kube.resources import PODS
from shared.metrics import Metrics
from sim.controllers.informers import SharedInformers
from sim.controllers.loop import Loop
from sim.controllers.pods import is_terminal, is_terminating
from sim.release import DeviceTaintSupport
from sim.scheduler.devicetaints import device_taints, rule_selects, tolerates
from sim.scheduler.objects import ClaimSpec

log = logging.getLogger("cdo.sim.controllers.devicetaint")

CONDITION = "EvictionInProgress"
REASON_DELETION = "DeletionByDeviceTaintManager"

DeviceRef = tuple[str, str, str]  # (driver, pool, device)


# -- pure ---------------------------------------------------------------------------------------


def claim_names(pod: Pod) -> list[str]:
    """The names of the claims a pod uses (direct, or generated from templates)."""
    names = [c.resource_claim_name for c in pod.spec.resource_claims if c.resource_claim_name]
    names += [
        s.resource_claim_name for s in pod.status.resource_claim_statuses if s.resource_claim_name
    ]
    return list(dict.fromkeys(names))


def _parse_time(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


def _request_tolerations(spec: ClaimSpec, request: str) -> tuple[Toleration, ...]:
    """The tolerations of the (sub)request a result came from (``req`` or ``req/sub``)."""
    name, _, sub = request.partition("/")
    for entry in spec.devices.requests:
        if entry.name != name:
            continue
        if not sub and entry.exactly is not None:
            return entry.exactly.tolerations
        return next((s.tolerations for s in entry.first_available if s.name == sub), ())
    return ()


def due_time(
    taint: DeviceTaint, tolerations: Iterable[Toleration], *, now: datetime
) -> datetime | None:
    """When a NoExecute taint evicts (None: tolerated for good, or not NoExecute)."""
    if taint.effect != "NoExecute":
        return None
    tolerating = [t for t in tolerations if tolerates((t,), taint)]
    if not tolerating:
        return now
    if any(t.toleration_seconds is None for t in tolerating):
        return None
    seconds = min(t.toleration_seconds or 0 for t in tolerating)
    added = _parse_time(taint.time_added) or now
    return added + timedelta(seconds=max(seconds, 0))


class Held(msgspec.Struct, frozen=True, kw_only=True):
    """One allocated device of a pod's claim, with its taints and the request's tolerations."""

    ref: DeviceRef
    taints: tuple[DeviceTaint, ...]
    tolerations: tuple[Toleration, ...]


def eviction_due(held: Iterable[Held], *, now: datetime) -> datetime | None:
    """The earliest moment any held device's NoExecute taint evicts the pod."""
    moments = [
        moment
        for device in held
        for taint in device.taints
        if (moment := due_time(taint, device.tolerations, now=now)) is not None
    ]
    return min(moments) if moments else None


# -- the controller -----------------------------------------------------------------------------


class DeviceTaintEvictionController:
    """See the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        informers: SharedInformers,
        *,
        metrics: Metrics,
        workers: int,
        rate_limit: RateLimitSettings,
        support: DeviceTaintSupport | None = None,
    ) -> None:
        self._client = client
        support = support or DeviceTaintSupport()
        self._pods = informers.pods
        self._claims = informers.claims
        self._slices = informers.slices
        self._rules_resource = support.rules
        self._rules = (
            informers.device_taint_rules(support.rules) if support.rules is not None else None
        )
        self.loop = Loop(
            name="device-taint-eviction", reconcile=self._reconcile_pod, metrics=metrics,
            workers=workers, rate_limit=rate_limit,
        )  # fmt: skip
        self.rule_loop = (
            Loop(
                name="device-taint-rules",
                reconcile=self._reconcile_rule,
                metrics=metrics,
                workers=1,
                rate_limit=rate_limit,
            )
            if self._rules is not None and support.rule_status
            else None
        )
        self._evicted: dict[str, int] = {}  # rule name -> pods evicted for it
        self._pods.add_handler(self.loop.on_change(lambda pod: [key_of(pod)]))
        self._claims.add_handler(self.loop.on_change(self._claim_pods))
        self._slices.add_handler(self.loop.on_change(lambda _obj: self._all_pods()))
        if self._rules is not None:
            self._rules.add_handler(self.loop.on_change(lambda _obj: self._all_pods()))
        if self._rules is not None and self.rule_loop is not None:
            self._pods.add_handler(self.rule_loop.on_change(lambda _pod: self._rule_keys()))
            self._rules.add_handler(self.rule_loop.on_change(lambda rule: [key_of(rule)]))

    @property
    def loops(self) -> list[Loop]:
        return [self.loop] if self.rule_loop is None else [self.loop, self.rule_loop]

    def _all_pods(self) -> list[ObjectKey]:
        return [key_of(pod) for pod in self._pods.cache.objects() if claim_names(pod)]

    def _rule_objects(self) -> list[DeviceTaintRule]:
        return [] if self._rules is None else list(self._rules.cache.objects())

    def _rule_keys(self) -> list[ObjectKey]:
        return [key_of(rule) for rule in self._rule_objects()]

    def _claim_pods(self, claim: object) -> list[ObjectKey]:
        if not isinstance(claim, SharedClaim):
            return []
        namespace = claim.metadata.namespace
        return [
            ObjectKey(namespace=namespace, name=ref.name)
            for ref in claim.status.reserved_for
            if ref.resource == "pods"
        ]

    def _own_taints(self, ref: DeviceRef) -> tuple[DeviceTaint, ...]:
        driver, pool, device = ref
        for resource_slice in self._slices.cache.objects():
            spec: ResourceSlice = resource_slice
            if (spec.spec.driver, spec.spec.pool.name) != (driver, pool):
                continue
            for entry in spec.spec.devices:
                if entry.name == device:
                    return entry.taints
        return ()

    def held(self, pod: Pod) -> Iterator[Held]:
        """Every allocated device of the pod's claims, with its taints."""
        rules = self._rule_objects()
        for name in claim_names(pod):
            claim = self._claims.cache.get(f"{pod.metadata.namespace}/{name}")
            if claim is None or claim.status.allocation is None:
                continue
            spec = msgspec.convert(claim.spec, ClaimSpec)
            for result in claim.status.allocation.devices.results:
                ref = (result.driver, result.pool, result.device)
                taints = device_taints(
                    self._own_taints(ref), rules, driver=ref[0], pool=ref[1], device=ref[2]
                )
                yield Held(
                    ref=ref, taints=taints, tolerations=_request_tolerations(spec, result.request)
                )

    # -- pods ---------------------------------------------------------------------------------

    async def _reconcile_pod(self, key: ObjectKey) -> Result:
        pod = self._pods.cache.get(str(key))
        if pod is None or is_terminal(pod) or is_terminating(pod):
            return Result()
        now = datetime.now(UTC)
        held = list(self.held(pod))
        due = eviction_due(held, now=now)
        if due is None:
            return Result()
        if due > now:
            return Result(requeue_after=(due - now).total_seconds())
        # A pod whose deletion the cache has not seen yet is reconciled again (its status patch
        # is an event too): only the delete that took it counts for the rules.
        if not await self._evict(pod) or self.rule_loop is None:
            return Result()
        for rule in self._rule_objects():
            if any(
                rule_selects(rule, driver=h.ref[0], pool=h.ref[1], device=h.ref[2]) for h in held
            ):
                self._evicted[rule.metadata.name] = self._evicted.get(rule.metadata.name, 0) + 1
                self.rule_loop.queue.add(key_of(rule))
        return Result()

    async def _evict(self, pod: Pod) -> bool:
        """Mark and delete the pod; False when it was gone already."""
        meta = pod.metadata
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": REASON_DELETION,
            "message": "Device Taint manager: deleting due to NoExecute taint",
            "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        try:
            await self._client.patch(
                PODS, meta.name, {"status": {"conditions": [condition]}},
                namespace=meta.namespace, subresource="status", patch_type="strategic",
            )  # fmt: skip
            await self._client.delete(PODS, meta.name, namespace=meta.namespace)
        except KubeApiError as exc:
            if not exc.not_found:
                raise
            return False
        log.info(
            "pod deleted for a device's NoExecute taint",
            extra={"pod": f"{meta.namespace}/{meta.name}"},
        )
        return True

    # -- rules --------------------------------------------------------------------------------

    def _pending(self, rule: DeviceTaintRule) -> int:
        if rule.spec.taint.effect != "NoExecute":
            return 0
        now = datetime.now(UTC)
        count = 0
        for pod in self._pods.cache.objects():
            if is_terminal(pod) or is_terminating(pod) or not claim_names(pod):
                continue
            if any(
                rule_selects(rule, driver=h.ref[0], pool=h.ref[1], device=h.ref[2])
                and due_time(rule.spec.taint, h.tolerations, now=now) is not None
                for h in self.held(pod)
            ):
                count += 1
        return count

    async def _reconcile_rule(self, key: ObjectKey) -> Result:
        assert self._rules is not None and self._rules_resource is not None  # the loop's premise
        rule = self._rules.cache.get(str(key))
        if rule is None:
            self._evicted.pop(key.name, None)
            return Result()
        pending = self._pending(rule)
        status = "True" if pending else "False"
        message = (
            f"{pending} pods need to be evicted, {self._evicted.get(key.name, 0)} pods evicted"
        )
        current = next((c for c in _conditions(rule) if c.get("type") == CONDITION), None)
        if current is not None and (current.get("status"), current.get("message")) == (
            status,
            message,
        ):
            return Result()
        body = {
            "status": {
                "conditions": [
                    {
                        "type": CONDITION,
                        "status": status,
                        "reason": "PodsPendingEviction" if pending else "NoEviction",
                        "message": message,
                        "observedGeneration": rule.metadata.generation,
                        "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    }
                ]
            }
        }
        try:
            await self._client.patch(self._rules_resource, key.name, body, subresource="status")
        except KubeApiError as exc:
            if not exc.not_found:
                raise
        return Result()


def _conditions(rule: DeviceTaintRule) -> list[dict[str, object]]:
    return list(rule.status.get("conditions") or ())
