"""DELETE: preconditions, finalizers, propagation policies and graceful pod deletion.

An object without finalizers goes at once (pods answer with the object, other kinds with a
``Success`` Status); one with finalizers, or deleted with the Orphan / Foreground policy (which
add the ``orphan`` / ``foregroundDeletion`` finalizer), gets ``deletionTimestamp`` and a
generation bump and stays until its finalizers are removed. Namespaces turn Terminating and
are emptied by the namespace controller. Bound pods can be given a grace period that a
kubelet ends (``ServerConfig.pod_graceful_deletion``).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import Any, Protocol

from sim.kubeapi.admission.webhooks import AdmissionRequest, Dispatcher
from sim.kubeapi.config import ServerConfig
from sim.kubeapi.conversion.converter import Converter
from sim.kubeapi.machinery import codec, errors, meta
from sim.kubeapi.storage.resources import Obj, ResourceType
from sim.kubeapi.storage.store import Entry, Store
from sim.kubeapi.writes.options import (
    MAX_RETRIES,
    PROTECTED_NAMESPACES,
    ConcurrentChangeError,
    DeleteOptions,
    Result,
    WriteOptions,
)


class CommitPath(Protocol):
    """What DELETE builds on: the store, admission and the commit hooks of the write path
    (the ``Engine`` provides them).

    A protocol rather than the engine's class, so that the engine can own a ``Deleter``
    without the two modules importing each other.
    """

    config: ServerConfig
    store: Store
    admission: Dispatcher
    conversion: Converter

    def current(self, rt: ResourceType, namespace: str, name: str) -> Entry: ...

    def admission_request(
        self,
        rt: ResourceType,
        operation: str,
        namespace: str,
        name: str,
        obj: Obj | None,
        old: Obj | None,
        subresource: str,
        opts: WriteOptions,
        options: Obj | None,
    ) -> AdmissionRequest: ...

    def fields_fn(self, storage: str) -> Callable[[Obj], dict[str, str]]: ...

    def after_remove(self, storage: str, obj: Obj) -> None: ...


class Deleter:
    """The DELETE verb, on top of the store, admission and the write path's commit hooks."""

    def __init__(self, commits: CommitPath) -> None:
        self.commits = commits

    async def delete(
        self,
        rt: ResourceType,
        *,
        namespace: str,
        name: str,
        options: DeleteOptions,
        opts: WriteOptions,
    ) -> Result:
        for _ in range(MAX_RETRIES):
            try:
                return await self._delete_once(rt, namespace, name, options, opts)
            except ConcurrentChangeError:
                continue
        raise errors.conflict(rt.plural, rt.group, name)

    async def _delete_once(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        options: DeleteOptions,
        opts: WriteOptions,
    ) -> Result:
        cur = self.commits.current(rt, namespace, name)
        if options.precondition_uid and options.precondition_uid != cur.uid:
            raise errors.conflict(
                rt.plural,
                rt.group,
                name,
                f"Precondition failed: UID in precondition: {options.precondition_uid}, UID in "
                f"object meta: {cur.uid}",
            )
        if options.precondition_rv and options.precondition_rv != str(cur.rv):
            raise errors.conflict(
                rt.plural,
                rt.group,
                name,
                f"Precondition failed: ResourceVersion in precondition: {options.precondition_rv}, "
                f"ResourceVersion in object meta: {cur.rv}",
            )
        if rt.storage == "namespaces" and name in PROTECTED_NAMESPACES:
            raise errors.forbidden_error(
                rt.plural, rt.group, name, "this namespace may not be deleted"
            )
        old = cur.obj()
        old_version_form = await self.commits.conversion.served(rt, codec.copy(old))
        if self.commits.admission.validating():
            req = self.commits.admission_request(
                rt,
                "DELETE",
                cur.namespace,
                name,
                None,
                old_version_form,
                "",
                opts,
                {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"},
            )
            await self.commits.admission.validate(req)
        if self.commits.store.bucket(rt.storage).get(cur.namespace, name) is not cur:
            raise ConcurrentChangeError()
        strategy = rt.strategy
        m = meta.meta(old)
        policy = options.propagation_policy
        if policy is None and options.orphan_dependents is not None:
            policy = "Orphan" if options.orphan_dependents else "Background"
        graceful = self._grace_period(rt, old, options)
        if m.get("deletionTimestamp"):
            if graceful == 0 and not m.get("finalizers") and rt.storage != "namespaces":
                return await self._remove_now(rt, cur, opts, options)
            return Result(old_version_form, 200)
        new = await self._in_storage_version(rt, codec.copy(old))
        nm = meta.meta(new)
        finalizers = list(nm.get("finalizers") or [])
        if policy == "Orphan" and meta.ORPHAN_FINALIZER not in finalizers:
            finalizers = [f for f in finalizers if f != meta.FOREGROUND_FINALIZER] + [
                meta.ORPHAN_FINALIZER
            ]
        elif policy == "Foreground" and meta.FOREGROUND_FINALIZER not in finalizers:
            finalizers = [f for f in finalizers if f != meta.ORPHAN_FINALIZER] + [
                meta.FOREGROUND_FINALIZER
            ]
        now = codec.now()
        if rt.storage == "namespaces":
            nm["deletionTimestamp"] = codec.format_time(now)
            nm["deletionGracePeriodSeconds"] = 0
            if finalizers:
                nm["finalizers"] = finalizers
            new.setdefault("status", {})["phase"] = "Terminating"
            return await self._mark(rt, cur, new, opts)
        if graceful:
            nm["deletionTimestamp"] = codec.format_time(now + _dt.timedelta(seconds=graceful))
            nm["deletionGracePeriodSeconds"] = graceful
            if finalizers:
                nm["finalizers"] = finalizers
            if strategy.has_generation:
                nm["generation"] = int(nm.get("generation", 0)) + 1
            return await self._mark(rt, cur, new, opts)
        if finalizers:
            nm["finalizers"] = finalizers
            nm["deletionTimestamp"] = codec.format_time(now)
            nm["deletionGracePeriodSeconds"] = 0
            if strategy.has_generation:
                nm["generation"] = int(nm.get("generation", 0)) + 1
            return await self._mark(rt, cur, new, opts)
        return await self._remove_now(rt, cur, opts, options)

    async def _in_storage_version(self, rt: ResourceType, stored: Obj) -> Obj:
        """A stored object written again in the current storage version: one kept in an
        older version of a CRD that converts through a webhook goes through the webhook."""
        conversion = self.commits.conversion
        storage = conversion.registry.storage_type(rt.storage)
        if storage is None or not conversion.needs_webhook(storage, stored.get("apiVersion", "")):
            return stored
        return await conversion.converted(stored, storage)

    def _grace_period(self, rt: ResourceType, obj: Obj, options: DeleteOptions) -> int:
        """Seconds of graceful deletion: only pods bound to a node, when enabled."""
        if rt.storage != "pods" or not self.commits.config.pod_graceful_deletion:
            return 0
        spec = obj.get("spec") or {}
        phase = (obj.get("status") or {}).get("phase")
        if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
            return 0
        if options.grace_period_seconds is not None:
            return max(0, options.grace_period_seconds)
        return int(spec.get("terminationGracePeriodSeconds", 30))

    async def _mark(self, rt: ResourceType, cur: Entry, new: Obj, opts: WriteOptions) -> Result:
        if opts.dry_run:
            return Result(await self.commits.conversion.served(rt, new), 200)
        self.commits.store.put(
            rt.storage,
            new,
            prev=cur,
            fields=self.commits.fields_fn(rt.storage),
            typed=not rt.custom,
        )
        return Result(await self.commits.conversion.served(rt, codec.copy(new)), 200)

    async def _remove_now(
        self, rt: ResourceType, cur: Entry, opts: WriteOptions, options: DeleteOptions
    ) -> Result:
        if opts.dry_run:
            final_obj = cur.obj()
        else:
            final = self.commits.store.remove(
                rt.storage, cur, fields=self.commits.fields_fn(rt.storage)
            )
            final_obj = final.obj()
            self.commits.after_remove(rt.storage, final_obj)
        if rt.strategy.return_deleted_object:
            return Result(await self.commits.conversion.served(rt, final_obj), 200)
        details: dict[str, Any] = {"name": cur.name}
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.plural
        details["uid"] = cur.uid
        return Result(errors.success_status(details=details), 200)
