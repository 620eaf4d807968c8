"""The informers the simulated controllers share: one per resource, created on first use.

Controllers ask for the informers they read; the manager runs exactly those, waits until every
one has listed before any controller reconciles (a controller that counted pods from an empty
cache would create them all again), and stops them when it stops.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from shared.kube.client import KubeClient
from shared.kube.informer import Informer, InformerSettings
from shared.kube.meta import KubeObject
from shared.kube.models import (
    DeviceTaintRule,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from shared.kube.resources import (
    DEPLOYMENTS,
    JOB_SETS,
    JOBS,
    LEADER_WORKER_SETS,
    POD_DISRUPTION_BUDGETS,
    PODS,
    REPLICA_SETS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    STATEFUL_SETS,
    Resource,
)
from shared.metrics import Metrics
from sim.controllers.budgets import Budget
from sim.controllers.objects import Deployment, Job, ReplicaSet, StatefulSet, controller_uid
from sim.controllers.setkinds import JobSet, LeaderWorkerSet

BY_CONTROLLER = "controller-uid"
"""Index of pods, ReplicaSets, StatefulSets, Jobs and claims by the uid of their controlling
owner."""


class SharedInformers:
    """Lazily created informers over one API server."""

    def __init__(self, client: KubeClient, *, settings: InformerSettings, metrics: Metrics) -> None:
        self._client = client
        self._settings = settings
        self._metrics = metrics
        self._made: list[Informer[Any]] = []
        self._by_resource: dict[Resource, Informer[Any]] = {}

    def _make(self, resource: Resource, object_type: type[KubeObject]) -> Informer[Any]:
        informer: Informer[Any] = Informer(
            self._client, resource, object_type, settings=self._settings, metrics=self._metrics
        )
        self._made.append(informer)
        return informer

    @cached_property
    def pods(self) -> Informer[Pod]:
        informer: Informer[Pod] = self._make(PODS, Pod)
        informer.add_index(BY_CONTROLLER, controller_uid)
        return informer

    @cached_property
    def replica_sets(self) -> Informer[ReplicaSet]:
        informer: Informer[ReplicaSet] = self._make(REPLICA_SETS, ReplicaSet)
        informer.add_index(BY_CONTROLLER, controller_uid)
        return informer

    @cached_property
    def deployments(self) -> Informer[Deployment]:
        informer: Informer[Deployment] = self._make(DEPLOYMENTS, Deployment)
        return informer

    @cached_property
    def jobs(self) -> Informer[Job]:
        informer: Informer[Job] = self._make(JOBS, Job)
        informer.add_index(BY_CONTROLLER, controller_uid)
        return informer

    @cached_property
    def stateful_sets(self) -> Informer[StatefulSet]:
        informer: Informer[StatefulSet] = self._make(STATEFUL_SETS, StatefulSet)
        informer.add_index(BY_CONTROLLER, controller_uid)
        return informer

    @cached_property
    def job_sets(self) -> Informer[JobSet]:
        informer: Informer[JobSet] = self._make(JOB_SETS, JobSet)
        return informer

    @cached_property
    def leader_worker_sets(self) -> Informer[LeaderWorkerSet]:
        informer: Informer[LeaderWorkerSet] = self._make(LEADER_WORKER_SETS, LeaderWorkerSet)
        return informer

    @cached_property
    def claims(self) -> Informer[ResourceClaim]:
        informer: Informer[ResourceClaim] = self._make(RESOURCE_CLAIMS, ResourceClaim)
        informer.add_index(BY_CONTROLLER, controller_uid)
        return informer

    @cached_property
    def claim_templates(self) -> Informer[ResourceClaimTemplate]:
        informer: Informer[ResourceClaimTemplate] = self._make(
            RESOURCE_CLAIM_TEMPLATES, ResourceClaimTemplate
        )
        return informer

    @cached_property
    def slices(self) -> Informer[ResourceSlice]:
        informer: Informer[ResourceSlice] = self._make(RESOURCE_SLICES, ResourceSlice)
        return informer

    def device_taint_rules(self, resource: Resource) -> Informer[DeviceTaintRule]:
        """DeviceTaintRules at the version the release serves them (``resource``)."""
        informer = self._by_resource.get(resource)
        if informer is None:
            informer = self._by_resource[resource] = self._make(resource, DeviceTaintRule)
        return informer

    @cached_property
    def disruption_budgets(self) -> Informer[Budget]:
        informer: Informer[Budget] = self._make(POD_DISRUPTION_BUDGETS, Budget)
        return informer

    def created(self) -> list[Informer[Any]]:
        """The informers some controller asked for, in the order they were made."""
        return list(self._made)

    @property
    def synced(self) -> bool:
        return all(informer.synced for informer in self._made)
