"""The controller's writes to the API; each ComputeDomain it writes is remembered in its
OwnWrites (shared/kube/ownwrites.py), so a reconcile reads its own writes before the cache does.

Every write is idempotent or guarded: changes of a ComputeDomain (finalizers, annotations, the
status) carry the resourceVersion they were computed from, so a stale view (another writer, or a
replica that led before this one) fails with 409 and is retried from fresh state; deletions carry
the uid of what was looked at, so a successor of the same name is never deleted; the status is a
merge patch of the whole status, which only this controller writes.
"""

from __future__ import annotations

from typing import Any

import msgspec

from shared.crds.computedomain import ComputeDomain, ComputeDomainStatus
from shared.crds.definitions import COMPUTE_DOMAINS
from shared.crds.names import DOMAIN_FINALIZER
from shared.kube.client import KubeClient
from shared.kube.models import DeviceClass, ResourceClaimTemplate
from shared.kube.ownwrites import OwnWrites
from shared.kube.resources import DEVICE_CLASSES, RESOURCE_CLAIM_TEMPLATES

_decode_domain = msgspec.json.Decoder(ComputeDomain)
_decode_device_class = msgspec.json.Decoder(DeviceClass)
_decode_template = msgspec.json.Decoder(ResourceClaimTemplate)


class DomainWrites:
    """Writes to ComputeDomains, their templates and the DeviceClass."""

    def __init__(
        self, client: KubeClient, *, field_manager: str, own: OwnWrites[ComputeDomain]
    ) -> None:
        self._client = client
        self._manager = field_manager
        self._own = own

    async def _patch_domain(
        self, domain: ComputeDomain, body: dict[str, Any], *, subresource: str = ""
    ) -> ComputeDomain:
        """A merge patch conditional on the resourceVersion ``domain`` was read at."""
        metadata = body.setdefault("metadata", {})
        metadata["resourceVersion"] = domain.metadata.resource_version
        raw = await self._client.patch(
            COMPUTE_DOMAINS,
            domain.metadata.name,
            body,
            namespace=domain.metadata.namespace,
            subresource=subresource,
            field_manager=self._manager,
        )
        updated = _decode_domain.decode(raw)
        self._own.wrote(updated)
        return updated

    async def add_finalizer(
        self, domain: ComputeDomain, *, annotations: dict[str, str | None] | None = None
    ) -> ComputeDomain:
        """Add the finalizer, and in the same write the given annotation changes."""
        finalizers = [*domain.metadata.finalizers, DOMAIN_FINALIZER]
        body = self._finalizers(domain, finalizers)
        if annotations:
            body["metadata"]["annotations"] = annotations
        return await self._patch_domain(domain, body)

    async def annotate(
        self, domain: ComputeDomain, annotations: dict[str, str | None]
    ) -> ComputeDomain:
        """Merge-patch the given annotations (None removes one); others' annotations stay."""
        return await self._patch_domain(domain, {"metadata": {"annotations": annotations}})

    async def remove_finalizer(self, domain: ComputeDomain) -> None:
        finalizers = [f for f in domain.metadata.finalizers if f != DOMAIN_FINALIZER]
        await self._patch_domain(domain, self._finalizers(domain, finalizers))

    @staticmethod
    def _finalizers(domain: ComputeDomain, finalizers: list[str]) -> dict[str, Any]:
        # The resourceVersion (_patch_domain) makes the merge patch conditional: finalizers of
        # others that arrived since we looked are never dropped.
        return {"metadata": {"finalizers": finalizers or None}}

    async def write_status(
        self, domain: ComputeDomain, status: ComputeDomainStatus
    ) -> ComputeDomain:
        # None values become JSON null, which a merge patch reads as "remove the field".
        return await self._patch_domain(
            domain, {"status": msgspec.to_builtins(status)}, subresource="status"
        )

    async def create_template(self, body: dict[str, Any]) -> None:
        await self._client.create(
            RESOURCE_CLAIM_TEMPLATES, body, namespace=body["metadata"]["namespace"]
        )

    async def get_template(self, *, namespace: str, name: str) -> ResourceClaimTemplate | None:
        raw = await self._client.get_or_none(RESOURCE_CLAIM_TEMPLATES, name, namespace=namespace)
        return None if raw is None else _decode_template.decode(raw)

    async def delete_template(self, *, namespace: str, name: str, uid: str) -> bool:
        return await self._client.delete(
            RESOURCE_CLAIM_TEMPLATES, name, namespace=namespace, uid=uid
        )

    async def patch_template(self, *, namespace: str, name: str, body: dict[str, Any]) -> None:
        await self._client.patch(
            RESOURCE_CLAIM_TEMPLATES,
            name,
            body,
            namespace=namespace,
            field_manager=self._manager,
        )

    async def create_device_class(self, body: dict[str, Any]) -> None:
        await self._client.create(DEVICE_CLASSES, body)

    async def patch_device_class(self, name: str, body: dict[str, Any]) -> DeviceClass:
        raw = await self._client.patch(DEVICE_CLASSES, name, body, field_manager=self._manager)
        return _decode_device_class.decode(raw)
