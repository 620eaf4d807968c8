"""What ``bench.e2e`` reads for its stage breakdown (:mod:`bench._e2e_stages`): a watch of the
scenario's pods while a run goes on, and the webhook's and the IMEX agents' own timings from
their ``/metrics`` (the allocator's ``cdo_admission_seconds``, each node's
``cdo_dra_prepare_seconds`` through the node host's control API) before and after it.
"""

from __future__ import annotations

import asyncio
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from prometheus_client.parser import text_string_to_metric_families

from bench._e2e_stages import Sightings
from shared.kube.client import KubeClient
from shared.kube.informer import Informer
from shared.kube.models import Pod
from shared.kube.resources import PODS
from sim.control.state import read_controlplane, require_nodehost
from sim.controlplane import CLIQUE_ALLOCATOR

ADMISSION_SECONDS = "cdo_admission_seconds"
PREPARE_SECONDS = "cdo_dra_prepare_seconds"
HTTP_TIMEOUT_S = 10.0


class PodWatch:
    """Watches the pods of one namespace and notes when each milestone was first seen
    (``time.perf_counter()``), from ``async with`` until its end."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.sightings = Sightings()
        self._informer = Informer(client, PODS, Pod, namespace=namespace)
        self._informer.add_handler(self._changed)
        self._task: asyncio.Task[None] | None = None

    def _changed(self, _old: Pod | None, new: Pod | None) -> None:
        if new is not None:
            self.sightings.see(new, time.perf_counter())

    async def __aenter__(self) -> PodWatch:
        self._task = asyncio.create_task(self._informer.run(), name="bench pod watch")
        await self._informer.wait_synced()
        return self

    async def __aexit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


@dataclass(frozen=True)
class Totals:
    """A histogram's ``_sum`` and ``_count``."""

    seconds: float = 0.0
    count: float = 0.0

    def mean_since(self, before: Totals) -> float | None:
        """The mean of the observations made since ``before``; None without any."""
        count = self.count - before.count
        return (self.seconds - before.seconds) / count if count > 0 else None


def histogram_totals(text: str, name: str) -> Totals:
    """The ``_sum`` and ``_count`` of histogram ``name`` in Prometheus text (all label sets)."""
    seconds = count = 0.0
    for family in text_string_to_metric_families(text):
        if family.name != name:
            continue
        for sample in family.samples:
            if sample.name == f"{name}_sum":
                seconds += sample.value
            elif sample.name == f"{name}_count":
                count += sample.value
    return Totals(seconds, count)


@dataclass(frozen=True)
class Timings:
    """The webhook's and every node's prepare histogram at one moment."""

    webhook: Totals
    prepare: Mapping[str, Totals]

    def webhook_mean_since(self, before: Timings) -> float:
        return self.webhook.mean_since(before.webhook) or 0.0

    def prepare_means_since(self, before: Timings) -> dict[str, float]:
        """Each node's mean prepare since ``before``, for the nodes that prepared claims."""
        means = {
            node: totals.mean_since(before.prepare.get(node, Totals()))
            for node, totals in self.prepare.items()
        }
        return {node: mean for node, mean in means.items() if mean is not None}


def _get(url: str) -> str:
    """The body at ``url``; "" when it cannot be read (a service restarting: no figure)."""
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as response:
            return str(response.read().decode())
    except (urllib.error.URLError, OSError):
        return ""


def read_timings(state_dir: Path) -> Timings:
    """The histograms now, from the clique allocator and every hosted node's IMEX agent."""
    plane = read_controlplane(state_dir)
    webhook = Totals()
    if plane is not None and CLIQUE_ALLOCATOR in plane.services:
        url = plane.services[CLIQUE_ALLOCATOR].probe_url + "/metrics"
        webhook = histogram_totals(_get(url), ADMISSION_SECONDS)
    host = require_nodehost(state_dir)
    prepare = {
        node: histogram_totals(
            _get(f"{host.control_url}/nodes/{node}/metrics/imex-agent"), PREPARE_SECONDS
        )
        for node in host.nodes
    }
    return Timings(webhook=webhook, prepare=prepare)
