"""The capacity gauges say what the last published CliqueCapacity events say."""

from __future__ import annotations

from services.clique_allocator.gauges import CapacityGauges
from shared.events import CliqueCapacity
from shared.metrics import Metrics

CLIQUE = "0b1c6d4e-0000-4000-8000-000000000001.3"


def test_each_clique_is_reported_by_state() -> None:
    published: dict[str, CliqueCapacity] = {}
    metrics = Metrics()
    metrics.registry.register(CapacityGauges(published.values))
    registry = metrics.registry
    assert registry.get_sample_value("cdo_clique_gpus", {"clique": CLIQUE, "state": "free"}) is None
    published[CLIQUE] = CliqueCapacity(
        clique=CLIQUE,
        nodes_total=18,
        nodes_healthy=17,
        nodes_free=5,
        gpus_total=72,
        gpus_healthy=68,
        gpus_free=12,
        stranded_gpus=2,
        largest_free_block=4,
        channels_free=2040,
    )
    expected = {
        ("cdo_clique_gpus", "total"): 72,
        ("cdo_clique_gpus", "healthy"): 68,
        ("cdo_clique_gpus", "free"): 12,
        ("cdo_clique_gpus", "stranded"): 2,
        ("cdo_clique_nodes", "total"): 18,
        ("cdo_clique_nodes", "healthy"): 17,
        ("cdo_clique_nodes", "free"): 5,
    }
    for (name, state), value in expected.items():
        assert registry.get_sample_value(name, {"clique": CLIQUE, "state": state}) == value
    assert registry.get_sample_value("cdo_clique_largest_free_block", {"clique": CLIQUE}) == 4
    assert registry.get_sample_value("cdo_clique_channels_free", {"clique": CLIQUE}) == 2040
