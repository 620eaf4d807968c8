"""The disruption controller: keeps every PodDisruptionBudget's status current, so that the
eviction subresource (and ``kubectl drain``, which uses it) lets through exactly the
disruptions the budget allows.

One loop keyed by budget, fed by budgets (their own changes), pods (the budgets whose selector
matches the pod before or after the change), ReplicaSets and Deployments (the budgets of the
pods they control: a scale changes the expected count). A reconcile computes the status with
:func:`sim.controllers.budgets.budget_status` and writes it through the status subresource when
it differs, guarded by the budget's resourceVersion (the eviction subresource writes the same
status); a conflict is retried. Controllers' scale: ReplicaSets and Deployments from the cache;
any other kind (StatefulSets, custom resources) through its ``scale`` subresource, found by
discovery.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime

import msgspec

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.keys import ObjectKey, key_of
from shared.kube.meta import OwnerReference
from shared.kube.models import Pod
from shared.kube.ratelimit import RateLimitSettings
from shared.kube.reconcile import Result
from shared.kube.resources import POD_DISRUPTION_BUDGETS
from shared.metrics import Metrics
from sim.controllers.budgets import (
    Budget,
    BudgetStatus,
    budget_status,
    controller_of,
    same_status,
    selects,
)
from sim.controllers.informers import BY_CONTROLLER, SharedInformers
from sim.controllers.loop import Loop

log = logging.getLogger("cdo.sim.controllers.disruption")


class _Resource(msgspec.Struct, frozen=True):
    name: str
    kind: str = ""


class _ResourceList(msgspec.Struct, frozen=True):
    resources: list[_Resource] = msgspec.field(default_factory=list)


class _ScaleSpec(msgspec.Struct, frozen=True):
    replicas: int = 0


class _Scale(msgspec.Struct, frozen=True):
    spec: _ScaleSpec = msgspec.field(default_factory=_ScaleSpec)


class DisruptionController:
    """See the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        informers: SharedInformers,
        *,
        metrics: Metrics,
        workers: int,
        rate_limit: RateLimitSettings,
    ) -> None:
        self._client = client
        self._budgets = informers.disruption_budgets
        self._pods = informers.pods
        self._replica_sets = informers.replica_sets
        self._deployments = informers.deployments
        self.loop = Loop(
            name="sim-disruption", reconcile=self._reconcile, metrics=metrics,
            workers=workers, rate_limit=rate_limit,
        )  # fmt: skip
        self._plurals: dict[tuple[str, str], str] = {}
        self._budgets.add_handler(self.loop.on_change(lambda budget: [key_of(budget)]))
        self._pods.add_handler(self.loop.on_change(self._budgets_of))
        self._replica_sets.add_handler(self.loop.on_change(self._budgets_of_children))
        self._deployments.add_handler(self.loop.on_change(self._budgets_of_children))

    @property
    def loops(self) -> list[Loop]:
        return [self.loop]

    # -- keys ---------------------------------------------------------------------------------

    def _budgets_of(self, pod: object) -> list[ObjectKey]:
        if not isinstance(pod, Pod):
            return []
        return [key_of(b) for b in self._budgets.cache.objects() if selects(b, pod)]

    def _budgets_of_children(self, owner: object) -> list[ObjectKey]:
        uid = getattr(getattr(owner, "metadata", None), "uid", "")
        pods: list[Pod] = list(self._pods.cache.by_index(BY_CONTROLLER, uid))
        for replica_set in self._replica_sets.cache.by_index(BY_CONTROLLER, uid):
            pods.extend(self._pods.cache.by_index(BY_CONTROLLER, replica_set.metadata.uid))
        return list(dict.fromkeys(key for pod in pods for key in self._budgets_of(pod)))

    # -- scale of controllers -----------------------------------------------------------------

    async def _scale(self, ref: OwnerReference, namespace: str) -> tuple[str, int] | None:
        if ref.kind == "ReplicaSet" and ref.api_version == "apps/v1":
            replica_set = self._replica_sets.cache.get(f"{namespace}/{ref.name}")
            if replica_set is None or replica_set.metadata.uid != ref.uid:
                return None
            parent = next((r for r in replica_set.metadata.owner_references if r.controller), None)
            if parent is not None and parent.kind == "Deployment":
                deployment = self._deployments.cache.get(f"{namespace}/{parent.name}")
                if deployment is not None and deployment.metadata.uid == parent.uid:
                    return parent.uid, deployment.spec.replicas
            return ref.uid, replica_set.spec.replicas
        plural = await self._plural(ref.api_version, ref.kind)
        if plural is None:
            return None
        root = f"/apis/{ref.api_version}" if "/" in ref.api_version else "/api/v1"
        try:
            raw = await self._client.request(
                "GET", f"{root}/namespaces/{namespace}/{plural}/{ref.name}/scale"
            )
        except KubeApiError as exc:
            if exc.not_found:
                return None
            raise
        return ref.uid, msgspec.json.decode(raw, type=_Scale).spec.replicas

    async def _plural(self, api_version: str, kind: str) -> str | None:
        """The plural of a kind that serves a scale subresource, from discovery (found ones
        cached; a kind without one is looked up again, as a CRD may come later)."""
        key = (api_version, kind)
        if key in self._plurals:
            return self._plurals[key]
        root = f"/apis/{api_version}" if "/" in api_version else "/api/v1"
        try:
            raw = await self._client.request("GET", root)
        except KubeApiError as exc:
            if not exc.not_found:
                raise
            return None
        resources = msgspec.json.decode(raw, type=_ResourceList).resources
        names = {r.name for r in resources}
        found = next(
            (
                r.name
                for r in resources
                if r.kind == kind and "/" not in r.name and f"{r.name}/scale" in names
            ),
            None,
        )
        if found is not None:
            self._plurals[key] = found
        return found

    # -- reconcile ----------------------------------------------------------------------------

    async def _reconcile(self, key: ObjectKey) -> Result:
        budget = self._budgets.cache.get(str(key))
        if budget is None:
            return Result()
        pods = [pod for pod in self._pods.cache.objects() if selects(budget, pod)]
        scales = await self._scales((controller_of(pod) for pod in pods), key.namespace)
        now = datetime.now(UTC)
        status, recheck = budget_status(
            budget,
            pods,
            lambda ref, _namespace: scales.get(ref.uid),
            now=now,
        )
        again = None if recheck is None else max(0.0, (recheck - now).total_seconds())
        if same_status(budget.status, status):
            return Result(requeue_after=again)
        await self._write(budget, status, namespace=key.namespace)
        return Result(requeue_after=again)

    async def _scales(
        self, refs: Iterable[OwnerReference | None], namespace: str
    ) -> dict[str, tuple[str, int]]:
        """Each distinct controller's scale, by its uid (absent: no such controller)."""
        found: dict[str, tuple[str, int]] = {}
        for ref in refs:
            if ref is None or ref.uid in found:
                continue
            scale = await self._scale(ref, namespace)
            if scale is not None:
                found[ref.uid] = scale
        return found

    async def _write(self, budget: Budget, status: BudgetStatus, *, namespace: str) -> None:
        encoded = msgspec.to_builtins(status)
        # A merge patch merges maps: evictions no longer in flight are removed with nulls.
        gone = set(budget.status.disrupted_pods) - set(status.disrupted_pods)
        encoded["disruptedPods"] = {**encoded["disruptedPods"], **dict.fromkeys(gone)}
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        previous = {c.get("type"): c for c in budget.status.conditions}
        for condition in encoded["conditions"]:
            before = previous.get(condition["type"])
            same = before is not None and before.get("status") == condition["status"]
            condition["lastTransitionTime"] = (
                before.get("lastTransitionTime", now) if same and before else now
            )
        body = {
            "metadata": {"resourceVersion": budget.metadata.resource_version},
            "status": encoded,
        }
        try:
            await self._client.patch(
                POD_DISRUPTION_BUDGETS, budget.metadata.name, body,
                namespace=namespace, subresource="status",
            )  # fmt: skip
        except KubeApiError as exc:
            if exc.not_found:
                return
            raise  # a conflict: the eviction subresource wrote first; decide again
