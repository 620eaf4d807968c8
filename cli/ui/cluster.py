"""The cluster as the page sees it: informers on Nodes, ComputeDomains and Placements, and
whether the Kubernetes API answers (and why not).

Three informers (:mod:`shared.kube.informer`: LIST, then WATCH, relisting on 410) keep the
caches the page is drawn from; every change calls ``on_change(kind, key)``. Beside them a probe
lists one Node every :data:`PROBE_S`: an API that does not answer, or refuses the UI's
credentials, is said on the page with the API's own words, while the caches keep the last state
the page drew (marked stale). A cluster without cdo's CRDs is said too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from cli.connection import Endpoints, connect_kube
from cli.ui.feed import SourceStatus
from shared.command_errors import UnreachableError
from shared.crds import COMPUTE_DOMAINS, PLACEMENTS, ComputeDomain, Placement
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.informer import Informer, InformerSettings
from shared.kube.models import Node
from shared.kube.resources import NODES

PROBE_S = 2.0
INFORMER_SETTINGS = InformerSettings(backoff_max_s=5.0)
"""An API back after an outage is listed again within seconds."""
log = logging.getLogger("cdo.ui")

OnChange = Callable[[str, str], None]


class Cluster:
    """The caches and the API's status (module docstring)."""

    def __init__(self, endpoints: Endpoints, on_change: OnChange) -> None:
        self._endpoints = endpoints
        self._on_change = on_change
        self.client: KubeClient | None = None
        self.nodes: Informer[Node] | None = None
        self.domains: Informer[ComputeDomain] | None = None
        self.placements: Informer[Placement] | None = None
        self.status = SourceStatus(up=False, message="connecting to the Kubernetes API")
        self.note = ""
        """What the API lacks (cdo's CRDs), said beside a good status."""

    @property
    def where(self) -> str:
        cluster = self._endpoints.cluster
        return cluster.describe() if cluster is not None else "no cluster"

    @property
    def synced(self) -> bool:
        informers = (self.nodes, self.domains, self.placements)
        return all(i is not None and i.synced for i in informers)

    async def run(self) -> None:
        """Connect (until a kubeconfig can be used), then watch and probe until cancelled."""
        while self.client is None:
            try:
                self.client = await connect_kube(self._endpoints)
            except UnreachableError as exc:
                self._set_status(SourceStatus(up=False, message=str(exc)))
                await asyncio.sleep(PROBE_S * 2)
        try:
            async with asyncio.TaskGroup() as tasks:
                for informer in self._informers(self.client):
                    tasks.create_task(informer.run(), name=f"ui {informer.resource.plural}")
                tasks.create_task(self._probe(self.client), name="ui api probe")
        finally:
            with contextlib.suppress(Exception):
                await self.client.close()

    def _informers(self, client: KubeClient) -> list[Informer[Any]]:
        self.nodes = Informer(client, NODES, Node, settings=INFORMER_SETTINGS)
        self.domains = Informer(client, COMPUTE_DOMAINS, ComputeDomain, settings=INFORMER_SETTINGS)
        self.placements = Informer(client, PLACEMENTS, Placement, settings=INFORMER_SETTINGS)
        self.nodes.add_handler(self._handler("node"))
        self.domains.add_handler(self._handler("domain"))
        self.placements.add_handler(self._handler("placement"))
        return [self.nodes, self.domains, self.placements]

    def _handler(self, kind: str) -> Callable[[object, object], None]:
        def changed(old: object, new: object) -> None:
            obj = new if new is not None else old
            key = getattr(obj, "key", "")
            self._on_change(kind, key)

        return changed

    async def _probe(self, client: KubeClient) -> None:
        while True:
            status, note = await self._check(client)
            self.note = note
            self._set_status(status)
            await asyncio.sleep(PROBE_S)

    async def _check(self, client: KubeClient) -> tuple[SourceStatus, str]:
        try:
            await client.list(NODES, limit=1)
        except KubeApiError as exc:
            if exc.code == 0:
                return SourceStatus(
                    up=False,
                    message=f"the Kubernetes API does not answer ({self.where}): {exc.message}",
                ), ""
            return SourceStatus(
                up=False, message=f"the Kubernetes API refuses to list nodes: {exc}"
            ), ""
        note = ""
        try:
            await client.list(COMPUTE_DOMAINS, limit=1)
        except KubeApiError as exc:
            if exc.not_found:
                note = "the ComputeDomain CRD is not installed in this cluster: no domains"
            elif exc.code:
                note = f"ComputeDomains cannot be listed: {exc}"
        return SourceStatus(up=True, message=f"Kubernetes API: {self.where}"), note

    def _set_status(self, status: SourceStatus) -> None:
        if status != self.status:
            self.status = status
            self._on_change("status", "")
