"""The allocator's gauges of clique capacity: the CliqueCapacity events it last published.

- ``cdo_clique_gpus{clique,state}``: GPUs by state: ``total``, ``healthy`` (on nodes that take
  new pods), ``free`` (held by nothing, on such nodes), ``stranded`` (free, on nodes that take
  none);
- ``cdo_clique_nodes{clique,state}``: nodes: ``total``, ``healthy``, ``free`` (with a free GPU);
- ``cdo_clique_largest_free_block{clique}``: the largest pod (in GPUs) that fits now;
- ``cdo_clique_channels_free{clique}``: IMEX channels still free.

Only the leader publishes, so only the leader reports cliques (a standby reports none). The
clique label is the one label here that names an object: there is one clique per NVLink
partition (about one per rack), so its cardinality is the cluster's rack count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from shared.events import CliqueCapacity


class CapacityGauges(Collector):
    """Collects the gauges above from ``cliques()`` at every scrape."""

    def __init__(self, cliques: Callable[[], Iterable[CliqueCapacity]]) -> None:
        self._cliques = cliques

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield from self._families([])

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from self._families(self._cliques())

    def _families(self, cliques: Iterable[CliqueCapacity]) -> Iterator[GaugeMetricFamily]:
        gpus = GaugeMetricFamily(
            "cdo_clique_gpus", "GPUs of a clique, by state.", labels=["clique", "state"]
        )
        nodes = GaugeMetricFamily(
            "cdo_clique_nodes", "Nodes of a clique, by state.", labels=["clique", "state"]
        )
        block = GaugeMetricFamily(
            "cdo_clique_largest_free_block",
            "Most free GPUs on one node of the clique that takes new pods.",
            labels=["clique"],
        )
        channels = GaugeMetricFamily(
            "cdo_clique_channels_free", "IMEX channels of the clique still free.", labels=["clique"]
        )
        for c in sorted(cliques, key=lambda event: event.clique):
            for state, value in (
                ("total", c.gpus_total),
                ("healthy", c.gpus_healthy),
                ("free", c.gpus_free),
                ("stranded", c.stranded_gpus),
            ):
                gpus.add_metric([c.clique, state], value)
            for state, value in (
                ("total", c.nodes_total),
                ("healthy", c.nodes_healthy),
                ("free", c.nodes_free),
            ):
                nodes.add_metric([c.clique, state], value)
            block.add_metric([c.clique], c.largest_free_block)
            channels.add_metric([c.clique], c.channels_free)
        yield from (gpus, nodes, block, channels)
