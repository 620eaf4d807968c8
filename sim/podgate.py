"""The pod webhook's admission policy (``cdo-pod-gate``) as deploy/ ships it, for a cluster whose
webhook is registered by hand (the allocator's tests, the webhook bench).

The simulated cluster's control plane applies it with the rest of the rendered base
(:mod:`sim.identities`); this reads the one file, so the same policy and binding are used.
"""

from __future__ import annotations

import yaml

from shared.kube.client import KubeClient
from sim import identities

POD_GATE_POLICY = identities.DEPLOY_BASE / "clique-allocator" / "pod-gate-policy.yaml"


def pod_gate_objects() -> list[identities.Manifest]:
    """The policy and its binding, as the file holds them."""
    return [obj for obj in yaml.safe_load_all(POD_GATE_POLICY.read_text()) if obj]


async def install_pod_gate(client: KubeClient) -> None:
    """Create (or replace) the policy and its binding, with an admin's ``client``."""
    await identities.install(client, pod_gate_objects())
