"""Installing the CRDs into an API server (tests, benchmarks, a development cluster).

In a real deployment the YAML under deploy/kustomize/base/crds/ is applied instead; both come
from :func:`shared.crds.definitions.all_crds`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from shared.crds.definitions import all_crds
from shared.kube.client import KubeClient
from shared.kube.meta import KubeObject
from shared.kube.resources import Resource

CRDS = Resource(
    group="apiextensions.k8s.io",
    version="v1",
    plural="customresourcedefinitions",
    kind="CustomResourceDefinition",
    namespaced=False,
)


class _CrdCondition(msgspec.Struct, frozen=True, kw_only=True):
    type: str
    status: str


class _CrdStatus(msgspec.Struct, frozen=True, kw_only=True):
    conditions: tuple[_CrdCondition, ...] = ()


class _Crd(KubeObject, frozen=True, kw_only=True):
    status: _CrdStatus = msgspec.field(default_factory=_CrdStatus)

    @property
    def established(self) -> bool:
        return any(c.type == "Established" and c.status == "True" for c in self.status.conditions)


async def install_crds(
    client: KubeClient,
    crds: list[dict[str, Any]] | None = None,
    *,
    timeout_s: float = 30.0,
) -> None:
    """Create or update each CRD, then wait until every one is Established."""
    wanted = all_crds() if crds is None else crds
    for crd in wanted:
        name = crd["metadata"]["name"]
        raw = await client.get_or_none(CRDS, name)
        if raw is None:
            await client.create(CRDS, crd)
            continue
        current = msgspec.json.decode(raw, type=_Crd)
        body = {
            **crd,
            "metadata": {**crd["metadata"], "resourceVersion": current.metadata.resource_version},
        }
        await client.replace(CRDS, name, body)
    async with asyncio.timeout(timeout_s):
        for crd in wanted:
            while True:
                raw = await client.get(CRDS, crd["metadata"]["name"])
                if msgspec.json.decode(raw, type=_Crd).established:
                    break
                await asyncio.sleep(0.05)
