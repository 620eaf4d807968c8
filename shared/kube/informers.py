"""The informers of one controller, made with the same settings and run, synced and awaited
together.

A controller's ``Caches`` class derives from :class:`InformerSet`, makes its informers with
:meth:`InformerSet.informer` and adds its indexes and lookups::

    class Caches(InformerSet):
        def __init__(self, client, *, settings, metrics):
            super().__init__(client, settings=settings.informer, metrics=metrics)
            self.domains = self.informer(COMPUTE_DOMAINS, ComputeDomain)
            self.nodes = self.informer(NODES, Node, namespace="")

    caches.start(supervisor=ctx.supervisor, readiness=ctx.readiness)

Every replica runs them, leader or not, so a standby takes over with warm caches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

from shared.kube.apis import OptionalApi
from shared.kube.client import KubeClient
from shared.kube.informer import Informer, InformerSettings
from shared.kube.meta import KubeObject
from shared.kube.presence import ApiPresence
from shared.kube.resources import Resource
from shared.metrics import Metrics

T = TypeVar("T", bound=KubeObject)


class RootTasks(Protocol):
    """Where root tasks start (the runtime's Supervisor)."""

    def start(self, name: str, coro: Coroutine[Any, Any, Any]) -> object: ...


class ReadinessChecks(Protocol):
    """Where readiness checks are registered (the runtime's Readiness)."""

    def add(self, name: str, check: Callable[[], bool]) -> None: ...


class InformerSet:
    """Informers sharing one client, tuning, metrics and (optionally) one namespace."""

    def __init__(
        self,
        client: KubeClient,
        *,
        settings: InformerSettings,
        metrics: Metrics,
        namespace: str = "",
    ) -> None:
        self._client = client
        self._settings = settings
        self._metrics = metrics
        self._namespace = namespace
        self._informers: list[Informer[Any]] = []
        self._presences: dict[str, ApiPresence] = {}

    def informer(
        self,
        resource: Resource,
        object_type: type[T],
        *,
        namespace: str | None = None,
        field_selector: str = "",
        label_selector: str = "",
        optional: OptionalApi | None = None,
    ) -> Informer[T]:
        """A new informer of the set, in the set's namespace unless ``namespace`` is given
        (cluster-scoped resources pass ``""``); an ``optional`` API's informer follows its
        presence on the server (:meth:`presence`)."""
        made = Informer(
            self._client,
            resource,
            object_type,
            namespace=self._namespace if namespace is None else namespace,
            field_selector=field_selector,
            label_selector=label_selector,
            settings=self._settings,
            metrics=self._metrics,
            presence=None if optional is None else self.presence(optional),
        )
        self._informers.append(made)
        return made

    def presence(self, api: OptionalApi) -> ApiPresence:
        """The set's one watch on whether the server serves ``api``."""
        found = self._presences.get(api.name)
        if found is None:
            found = ApiPresence(
                self._client,
                api,
                recheck_s=self._settings.optional_api_recheck_s,
                metrics=self._metrics,
            )
            self._presences[api.name] = found
        return found

    @property
    def informers(self) -> list[Informer[Any]]:
        return list(self._informers)

    @property
    def synced(self) -> bool:
        """Every informer listed, and whether each optional API is served is known."""
        return all(p.known for p in self._presences.values()) and all(
            informer.synced for informer in self._informers
        )

    async def wait_synced(self) -> None:
        await asyncio.gather(
            *(presence.wait_known() for presence in self._presences.values()),
            *(informer.wait_synced() for informer in self._informers),
        )

    def start(self, *, supervisor: RootTasks, readiness: ReadinessChecks) -> None:
        """Run every informer as a root task of the service; ready once all are synced (an
        optional API's informer is synced while the server does not serve the API)."""
        for name, presence in self._presences.items():
            supervisor.start(f"{name} presence", presence.run())
        for informer in self._informers:
            supervisor.start(f"{informer.resource.plural} informer", informer.run())
        readiness.add("caches synced", lambda: self.synced)
