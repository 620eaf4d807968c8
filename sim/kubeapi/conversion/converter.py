"""Objects between the version they are stored in and the version a request speaks.

Built-in kinds and CRDs with ``strategy: None`` change version in process
(``ResourceType.from_storage`` / ``to_storage``: for a CRD only ``apiVersion`` changes). A CRD
with ``strategy: Webhook`` sends each object whose version differs from the one wanted to its
webhook, one ``ConversionReview`` per object, as kube-apiserver does when it decodes an object
read from etcd or encodes one for it; nothing is sent when the versions already match. The
converted object is then pruned to the target version's schema, and a read also gets that
version's defaults, as the real server's decoder applies them.

A webhook that cannot be called or whose answer fails :mod:`.review`'s checks fails the
request with kube-apiserver's message: a read (decoding a stored object) answers ``500`` with
no reason, which kubectl prints as ``Error from server: conversion webhook for ...``; a write
(encoding for storage) answers ``500 InternalError``, ``Internal error occurred: conversion
webhook for ...``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from sim.kubeapi.conversion import review
from sim.kubeapi.machinery import errors
from sim.kubeapi.storage.resources import Obj, Registry, ResourceType, WebhookConversion
from sim.kubeapi.webhookclient.client import CallFailedError, WebhookClient

Failure = Callable[[str], errors.ApiError]


def read_failure(message: str) -> errors.ApiError:
    """A stored object that could not be decoded into the requested version."""
    return errors.ApiError(code=500, reason="", message=message)


def write_failure(message: str) -> errors.ApiError:
    """An object that could not be encoded into the storage version."""
    return errors.internal_error(message)


class Converter:
    """Changes objects' versions; calls conversion webhooks through the server's client."""

    def __init__(self, *, client: WebhookClient, registry: Registry) -> None:
        self.client = client
        self.registry = registry
        self.calls = 0
        """Conversion webhook calls made (for tests and benchmarks)."""

    @staticmethod
    def needs_webhook(rt: ResourceType, api_version: str) -> bool:
        """Whether an object stored as ``api_version`` reaches ``rt``'s version only through
        the CRD's webhook."""
        return rt.webhook is not None and api_version != rt.api_version

    async def served(self, rt: ResourceType, stored: Obj) -> Obj:
        """``stored`` (an object as the store holds it, in any version) in ``rt``'s version."""
        return await self._into(rt, stored, read_failure)

    async def stored(self, rt: ResourceType, obj: Obj) -> Obj:
        """``obj`` (in ``rt``'s version) in the storage version, as it is written."""
        if rt.webhook is None or rt.is_storage:
            return rt.to_storage(obj)
        out = await self._call(rt.webhook, obj, rt.storage_api_version, write_failure)
        storage = self.registry.storage_type(rt.storage)
        if storage is not None and storage.schema is not None:
            storage.schema.prune(out)
        return out

    async def converted(self, obj: Obj, target: ResourceType) -> Obj:
        """``obj`` (in another served version of ``target``'s resource) in ``target``'s
        version, as admission shows it to a webhook or a policy that matched that version."""
        return await self._into(target, obj, write_failure)

    async def _into(self, target: ResourceType, obj: Obj, failure: Failure) -> Obj:
        """``obj`` in ``target``'s version: in process, or through the webhook, then pruned to
        and defaulted by that version's schema."""
        if not self.needs_webhook(target, str(obj.get("apiVersion") or target.api_version)):
            return target.from_storage(obj)
        assert target.webhook is not None
        out = await self._call(target.webhook, obj, target.api_version, failure)
        if target.schema is not None:
            target.schema.prune(out)
        target.strategy.default(out)
        return out

    async def _call(
        self, webhook: WebhookConversion, obj: Obj, desired: str, failure: Failure
    ) -> Obj:
        gvk = review.gvk_text(obj)
        version = review.review_version(webhook.review_versions)
        if version is None:
            raise failure("no supported conversion review versions")
        uid = str(uuid.uuid4())
        endpoint = self.client.endpoint(webhook.client_config, query=f"timeout={review.TIMEOUT_S}s")
        self.calls += 1
        try:
            answer = await self.client.post(
                webhook.client_config,
                endpoint,
                review.request(version, uid, desired, obj),
                timeout_s=review.TIMEOUT_S,
            )
            return review.converted(answer, version=version, uid=uid, original=obj, desired=desired)
        except CallFailedError as exc:
            raise failure(f"conversion webhook for {gvk} failed: {exc}") from None
        except review.ConversionFailedError as exc:
            raise failure(str(exc)) from None
