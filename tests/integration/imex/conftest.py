from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.imex.cluster import ProcessCluster


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[[int], ProcessCluster]]:
    """Build process clusters under tmp_path; every daemon still running is killed at the end."""
    clusters: list[ProcessCluster] = []

    def make(size: int) -> ProcessCluster:
        cluster = ProcessCluster(tmp_path / f"cluster{len(clusters)}", size)
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.close()
