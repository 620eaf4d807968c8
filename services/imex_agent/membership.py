"""The agent's view of its clique's Nodes: who is in the roster, and this node's entry in it.

:class:`CliqueMembership` runs a Node informer selected by the clique label (a new one whenever
NVML reports another clique) and, from its cache:

- answers :meth:`target`: the clique and roster the daemon should serve now, or why not;
- publishes this node's IMEX address and slot on its Node (:mod:`roster`'s annotations),
  claiming a slot when the platform reports none, whenever they differ from what the Node says.

A change of any clique member's labels or annotations wakes the daemon controller and the status
reporter through ``on_change``; status heartbeats do not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from services.imex_agent.daemon import Target
from services.imex_agent.metrics import AgentMetrics
from services.imex_agent.names import CLIQUE_ANNOTATION
from services.imex_agent.roster import (
    MemberRecord,
    Roster,
    annotations_current,
    annotations_for,
    build_roster,
    choose_slot,
    record_of,
)
from shared.crds.names import CLIQUE_LABEL
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.informer import Informer, InformerSettings
from shared.kube.meta import KubeObject
from shared.kube.resources import NODES
from shared.metrics import Metrics

log = logging.getLogger("cdo.imex_agent")


class CliqueMembership:
    """The clique's Node informer, the roster built from it, and this node's announcement."""

    def __init__(
        self,
        *,
        node: str,
        address: str,
        slots: int,
        client: KubeClient,
        informer_settings: InformerSettings,
        metrics: AgentMetrics,
        base_metrics: Metrics,
        on_change: Callable[[], None],
    ) -> None:
        self.node = node
        self.address = address
        self._slots = slots
        self._client = client
        self._informer_settings = informer_settings
        self._metrics = metrics
        self._base_metrics = base_metrics
        self._on_change = on_change
        self.clique: str | None = None
        self._detail = "NVML not read yet"
        self._platform_slot: int | None = None
        self._informer: Informer[KubeObject] | None = None
        self._informer_clique: str | None = None
        self._wake = asyncio.Event()
        self._announced: dict[str, str | None] | None = None

    def set_clique(self, clique: str | None, *, detail: str, platform_slot: int | None) -> bool:
        """What NVML says now: the clique (None: none, ``detail`` says why) and the tray.
        True when the clique or the tray changed (the roster is looked at again)."""
        changed = (clique, platform_slot) != (self.clique, self._platform_slot)
        self.clique, self._detail, self._platform_slot = clique, detail, platform_slot
        if changed:
            self._wake.set()
        return changed

    async def run(self, group: asyncio.TaskGroup) -> None:
        """Watch the clique's Nodes (a new informer when the clique changes) and announce."""
        task: asyncio.Task[None] | None = None
        try:
            while True:
                self._wake.clear()
                if self.clique != self._informer_clique:
                    if task is not None:
                        task.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await task
                        task = None
                    task = self._watch(group)
                await self._announce()
                await self._wake.wait()
        finally:
            if task is not None:
                task.cancel()

    def _watch(self, group: asyncio.TaskGroup) -> asyncio.Task[None] | None:
        """A new informer for the current clique (none without a clique)."""
        self._informer = None
        self._informer_clique = self.clique
        if self.clique is None:
            return None
        informer = Informer(
            self._client,
            NODES,
            KubeObject,
            label_selector=f"{CLIQUE_LABEL}={self.clique}",
            settings=self._informer_settings,
            metrics=self._base_metrics,
        )
        informer.add_handler(self._on_node)
        self._informer = informer
        return group.create_task(informer.run(), name=f"{self.node} nodes")

    def _on_node(self, old: KubeObject | None, new: KubeObject | None) -> None:
        def facts(obj: KubeObject | None) -> tuple[object, ...] | None:
            if obj is None:
                return None
            return (obj.metadata.labels, obj.metadata.annotations)

        if facts(old) == facts(new):
            return  # a status heartbeat: the roster cannot have changed
        self._wake.set()
        self._on_change()

    def _records(self, clique: str) -> list[MemberRecord] | None:
        informer = self._informer
        if informer is None or self._informer_clique != clique or not informer.synced:
            return None
        return [
            record
            for obj in informer.cache.objects()
            if (record := record_of(obj, clique)) is not None
        ]

    def _own(self) -> KubeObject | None:
        informer = self._informer
        return informer.cache.get(self.node) if informer is not None else None

    def target(self) -> Target:
        """The clique and roster the daemon should serve now."""
        clique = self.clique
        if clique is None:
            return Target(clique=None, detail=self._detail)
        records = self._records(clique)
        if records is None:
            return Target(clique=clique, detail="waiting for the clique's Node list")
        roster = build_roster(clique, records, slots=self._slots)
        detail = ""
        if roster.member(self.node) is None:
            detail = self._why_not_member(clique, roster)
        return Target(clique=clique, roster=roster, detail=detail)

    def _why_not_member(self, clique: str, roster: Roster) -> str:
        if self._own() is None:
            return f"node is not labelled {CLIQUE_LABEL}={clique}"
        for exclusion in roster.excluded:
            if exclusion.node == self.node:
                return exclusion.reason
        return "its IMEX address and slot are not published yet"

    def _wanted(self) -> dict[str, str | None] | None:
        """The annotations this node's Node should carry, or None when nothing is to be done
        now (they are current, or a slot claim must wait for the others' claims)."""
        clique = self.clique
        if clique is None:
            return {CLIQUE_ANNOTATION: None}
        records = self._records(clique)
        own = self._own()
        current = record_of(own, clique) if own is not None else None
        if self._platform_slot is None and records is None:
            return None  # a claim needs the others' claims first
        slot, source = choose_slot(
            node=self.node, platform_slot=self._platform_slot, current=current, others=records or ()
        )
        published = annotations_for(clique=clique, address=self.address, slot=slot, source=source)
        if own is not None and annotations_current(own.metadata.annotations, published):
            self._announced = dict(published)
            return None
        return dict(published)

    async def _announce(self) -> None:
        """Publish this node's address and slot on its Node when they differ."""
        wanted = self._wanted()
        if wanted is None or wanted == self._announced:
            return
        try:
            await self._client.patch(NODES, self.node, {"metadata": {"annotations": wanted}})
        except KubeApiError as exc:
            self._metrics.errors.labels("node_annotations").inc()
            log.warning("could not publish the IMEX address and slot", extra={"error": str(exc)})
            return
        self._announced = wanted
        log.info("published IMEX address and slot", extra={"annotations": wanted})
