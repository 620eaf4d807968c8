"""Creating and deleting a controller's pods: slow start, events, expectations.

Creates go out in batches of 1, 2, 4, ... and stop at the first batch with a failure, as the
real controllers do, so a template the API refuses (a webhook that denies it, a namespace being
deleted) costs one failed request per attempt rather than hundreds. Every successful write is
recorded in the controller's :class:`~sim.controllers.expectations.Expectations` before the
reconcile ends, and announced with the Event the real controllers emit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.meta import KubeObject
from shared.kube.models import Pod
from shared.kube.recorder import EventRecorder
from shared.kube.resources import PODS, Resource
from sim.controllers.expectations import Expectations

_decode_object = msgspec.json.Decoder(KubeObject)


@dataclass(frozen=True)
class PodToCreate:
    body: dict[str, Any]
    tag: str = ""


class PodControl:
    """Pod writes on behalf of one owner kind (ReplicaSet or Job)."""

    def __init__(
        self,
        client: KubeClient,
        *,
        owner_resource: Resource,
        expectations: Expectations,
        recorder: EventRecorder | None,
    ) -> None:
        self._client = client
        self._owner_resource = owner_resource
        self._expectations = expectations
        self._recorder = recorder

    async def _event(self, owner: KubeObject, *, warning: bool, reason: str, text: str) -> None:
        if self._recorder is not None:
            await self._recorder.record(
                self._owner_resource,
                owner,
                type_="Warning" if warning else "Normal",
                reason=reason,
                message=text,
            )

    async def create(self, owner: KubeObject, pods: Sequence[PodToCreate]) -> int:
        """Create ``pods`` in slow-start batches; the number created, or the first failure."""
        created = 0
        batch = 1
        remaining = list(pods)
        while remaining:
            chunk, remaining = remaining[:batch], remaining[batch:]
            results = await asyncio.gather(
                *(self._create_one(owner, pod) for pod in chunk), return_exceptions=True
            )
            failures = [r for r in results if isinstance(r, BaseException)]
            created += len(results) - len(failures)
            if failures:
                raise failures[0]
            batch *= 2
        return created

    async def _create_one(self, owner: KubeObject, pod: PodToCreate) -> None:
        namespace = owner.metadata.namespace
        try:
            raw = await self._client.create(PODS, pod.body, namespace=namespace)
        except KubeApiError as exc:
            await self._event(
                owner, warning=True, reason="FailedCreate", text=f"Error creating: {exc}"
            )
            raise
        made = _decode_object.decode(raw)
        self._expectations.created(owner.metadata.uid, made, tag=pod.tag)
        await self._event(
            owner,
            warning=False,
            reason="SuccessfulCreate",
            text=f"Created pod: {made.metadata.name}",
        )

    async def delete(self, owner: KubeObject, pods: Sequence[Pod]) -> None:
        """Delete ``pods`` at once; the first failure is raised after all were tried."""
        results = await asyncio.gather(
            *(self._delete_one(owner, pod) for pod in pods), return_exceptions=True
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            raise failures[0]

    async def _delete_one(self, owner: KubeObject, pod: Pod) -> None:
        meta = pod.metadata
        try:
            gone_before = not await self._client.delete(
                PODS, meta.name, namespace=meta.namespace, uid=meta.uid
            )
        except KubeApiError as exc:
            if exc.conflict:  # the uid precondition failed: that pod is gone already
                return
            await self._event(
                owner, warning=True, reason="FailedDelete", text=f"Error deleting: {exc}"
            )
            raise
        if gone_before:
            return
        self._expectations.deleted(owner.metadata.uid, meta.uid)
        await self._event(
            owner, warning=False, reason="SuccessfulDelete", text=f"Deleted pod: {meta.name}"
        )
