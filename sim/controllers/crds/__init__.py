"""The CRDs of the workload APIs the simulated cluster serves beside the built-in ones: JobSet
(``jobset.x-k8s.io/v1alpha2``) and LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``).

They stand for what a cluster with those projects installed has; the YAML files here are plain
manifests (``kubectl apply -f sim/controllers/crds/``), so a workload written against the simulated
cluster applies unchanged to a real one. :func:`install_workload_crds` creates (or updates) them
and waits until they are Established, as installing the upstream controllers would.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from shared.crds.install import install_crds
from shared.kube.client import KubeClient

DIRECTORY = Path(__file__).parent
JOB_SET_CRD = DIRECTORY / "jobsets.jobset.x-k8s.io.yaml"
LEADER_WORKER_SET_CRD = DIRECTORY / "leaderworkersets.leaderworkerset.x-k8s.io.yaml"


@cache
def _load(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text())
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: not one manifest")
    return loaded


def workload_crds() -> list[dict[str, Any]]:
    """The JobSet and LeaderWorkerSet CRDs (fresh copies; callers may change them)."""
    return [copy.deepcopy(_load(path)) for path in (JOB_SET_CRD, LEADER_WORKER_SET_CRD)]


async def install_workload_crds(client: KubeClient) -> None:
    """Create or update both CRDs and wait until the API server serves them."""
    await install_crds(client, workload_crds())
