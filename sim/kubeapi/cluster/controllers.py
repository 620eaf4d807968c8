"""The controllers a real cluster runs for deletion: garbage collection by owner
references (background, foreground, orphan), namespace termination, and CRD cleanup.

They react to committed changes (a store listener queues work) and act through the same
engine as API clients, so their writes are ordinary API writes with watch events.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from sim.kubeapi.kinds.apiextensions import CRD_CLEANUP_FINALIZER
from sim.kubeapi.machinery import errors, meta
from sim.kubeapi.storage.resources import Obj, ResourceType
from sim.kubeapi.storage.store import Entry, Event, Key
from sim.kubeapi.writes.engine import Engine
from sim.kubeapi.writes.options import CRD_STORAGE, DeleteOptions, WriteOptions

log = logging.getLogger(__name__)

GC_MANAGER = WriteOptions(field_manager="generic-garbage-collector")
NS_MANAGER = WriteOptions(field_manager="namespace-controller")
CRD_MANAGER = WriteOptions(field_manager="apiextensions-finalizer")
NAMESPACE_FINALIZER = "kubernetes"

Work = tuple[str, str, Key]


class Controllers:
    """Queue of pending work items; ``run()`` processes them until cancelled."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.store = engine.store
        self.queue: asyncio.Queue[Work] = asyncio.Queue()
        self._pending: set[Work] = set()
        self.store.add_listener(self._on_event)

    # -- reacting to commits (synchronous, called by the store) ---------------------------------

    def _enqueue(self, item: Work) -> None:
        if item not in self._pending:
            self._pending.add(item)
            self.queue.put_nowait(item)

    def _on_event(self, storage: str, event: Event) -> None:
        entry = event.entry
        if event.type == "DELETED":
            if entry.uid and entry.uid in self.store.dependents:
                self._enqueue(("owner-gone", entry.uid, ("", "")))
            for owner in entry.owners:
                self._enqueue(("owner-check", owner, ("", "")))
            if entry.namespace:
                self._enqueue(("namespace", "namespaces", ("", entry.namespace)))
            if storage not in ("namespaces", CRD_STORAGE) and "/" in storage:
                self._enqueue(("crd-storage", storage, ("", "")))
            return
        if entry.deleting:
            if storage == "namespaces":
                self._enqueue(("namespace", storage, entry.key))
            elif storage == CRD_STORAGE:
                self._enqueue(("crd", storage, entry.key))
            if (
                meta.ORPHAN_FINALIZER in entry.finalizers
                or meta.FOREGROUND_FINALIZER in entry.finalizers
            ):
                self._enqueue(("finalize", storage, entry.key))
        if entry.owners and any(o not in self.store.by_uid for o in entry.owners):
            self._enqueue(("dangling", storage, entry.key))

    # -- processing -----------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            item = await self.queue.get()
            self._pending.discard(item)
            try:
                await self._process(item)
            except errors.ApiError as exc:
                if exc.code not in (404, 409):
                    log.warning("controller work %s failed: %s", item, exc)
                if exc.code == 409:
                    self._enqueue(item)
            except Exception:
                log.exception("controller work %s failed", item)

    async def _process(self, item: Work) -> None:
        kind, where, key = item
        if kind == "owner-gone":
            for storage, dependent in self.store.dependents_of(where):
                await self._collect(storage, dependent)
        elif kind == "dangling":
            found = self.store.bucket(where).get(*key)
            if found is not None:
                await self._collect(where, found)
        elif kind == "owner-check":
            owner = self.store.lookup_uid(where)
            if owner is not None and meta.FOREGROUND_FINALIZER in owner[1].finalizers:
                await self._finalize(owner[0], owner[1])
        elif kind == "finalize":
            entry = self.store.bucket(where).get(*key)
            if entry is not None and entry.deleting:
                await self._finalize(where, entry)
        elif kind == "namespace":
            await self._terminate_namespace(key[1])
        elif kind == "crd":
            await self._cleanup_crd(key[1])
        elif kind == "crd-storage":
            for rt in self.engine.registry.by_storage(where):
                if rt.custom:
                    await self._cleanup_crd(rt.crd_name)
                    break

    def _type(self, storage: str) -> ResourceType | None:
        return self.engine.registry.storage_type(storage)

    async def _collect(self, storage: str, dependent: Entry) -> None:
        """Delete a dependent whose owners are all gone; drop references to gone owners."""
        rt = self._type(storage)
        if rt is None or dependent.deleting:
            return
        alive = [o for o in dependent.owners if o in self.store.by_uid]
        if not alive:
            opts = DeleteOptions(propagation_policy="Background", precondition_uid=dependent.uid)
            await self.engine.delete(
                rt,
                namespace=dependent.namespace,
                name=dependent.name,
                options=opts,
                opts=GC_MANAGER,
            )
            return
        if len(alive) < len(dependent.owners):
            await self._edit(rt, dependent, lambda obj: _drop_refs(obj, set(alive), keep=True))

    async def _finalize(self, storage: str, entry: Entry) -> None:
        rt = self._type(storage)
        if rt is None:
            return
        dependents = self.store.dependents_of(entry.uid)
        if meta.ORPHAN_FINALIZER in entry.finalizers:
            for dep_storage, dep in dependents:
                dep_rt = self._type(dep_storage)
                if dep_rt is not None:
                    await self._edit(
                        dep_rt, dep, lambda obj: _drop_refs(obj, {entry.uid}, keep=False)
                    )
            await self._edit(rt, entry, lambda obj: _drop_finalizer(obj, meta.ORPHAN_FINALIZER))
            return
        if meta.FOREGROUND_FINALIZER in entry.finalizers:
            blocking = False
            for dep_storage, dep in dependents:
                dep_obj = dep.obj()
                ref: dict[str, Any] = next(
                    (
                        r
                        for r in meta.meta(dep_obj).get("ownerReferences") or []
                        if r.get("uid") == entry.uid
                    ),
                    {},
                )
                if ref.get("blockOwnerDeletion"):
                    blocking = True
                dep_rt = self._type(dep_storage)
                if dep_rt is not None and not dep.deleting:
                    others = [o for o in dep.owners if o != entry.uid and o in self.store.by_uid]
                    if others:
                        await self._edit(
                            dep_rt, dep, lambda obj: _drop_refs(obj, {entry.uid}, keep=False)
                        )
                        continue
                    opts = DeleteOptions(propagation_policy="Foreground", precondition_uid=dep.uid)
                    await self.engine.delete(
                        dep_rt,
                        namespace=dep.namespace,
                        name=dep.name,
                        options=opts,
                        opts=GC_MANAGER,
                    )
            if not blocking:
                current = self.store.bucket(storage).get(entry.namespace, entry.name)
                if current is not None:
                    await self._edit(
                        rt, current, lambda obj: _drop_finalizer(obj, meta.FOREGROUND_FINALIZER)
                    )

    async def _terminate_namespace(self, name: str) -> None:
        ns_entry = self.store.bucket("namespaces").get("", name)
        if ns_entry is None or not ns_entry.deleting:
            return
        remaining = 0
        for storage in sorted(self.engine.registry.namespaced_storages()):
            rt = self._type(storage)
            bucket = self.store.buckets.get(storage)
            if rt is None or bucket is None:
                continue
            for entry in list(bucket.entries(name)):
                remaining += 1
                if not entry.deleting:
                    try:
                        await self.engine.delete(
                            rt,
                            namespace=name,
                            name=entry.name,
                            options=DeleteOptions(propagation_policy="Background"),
                            opts=NS_MANAGER,
                        )
                    except errors.ApiError as exc:
                        if exc.code != 404:
                            raise
        if remaining:
            leftover = sum(
                1
                for storage in self.engine.registry.namespaced_storages()
                if (b := self.store.buckets.get(storage)) is not None
                for _ in b.entries(name)
            )
            if leftover:
                return
        ns_rt = self.engine.registry.get("", "v1", "namespaces")
        ns_entry = self.store.bucket("namespaces").get("", name)
        if ns_rt is None or ns_entry is None:
            return
        obj = ns_rt.from_storage(ns_entry.obj())
        spec = obj.setdefault("spec", {})
        if NAMESPACE_FINALIZER in (spec.get("finalizers") or []):
            spec["finalizers"] = [f for f in spec["finalizers"] if f != NAMESPACE_FINALIZER]
            await self.engine.update(
                ns_rt, namespace="", name=name, body=obj, opts=NS_MANAGER, subresource="finalize"
            )

    async def _cleanup_crd(self, name: str) -> None:
        entry = self.store.bucket(CRD_STORAGE).get("", name)
        if entry is None or not entry.deleting:
            return
        crd_rt = self._type(CRD_STORAGE)
        types = [rt for rt in self.engine.registry.all() if rt.custom and rt.crd_name == name]
        remaining = 0
        if types:
            rt = next((t for t in types if t.is_storage), types[0])
            bucket = self.store.bucket(rt.storage)
            for obj in list(bucket.entries()):
                remaining += 1
                if not obj.deleting:
                    try:
                        await self.engine.delete(
                            rt,
                            namespace=obj.namespace,
                            name=obj.name,
                            options=DeleteOptions(),
                            opts=CRD_MANAGER,
                        )
                    except errors.ApiError as exc:
                        if exc.code != 404:
                            raise
            remaining = bucket.count
        if remaining == 0 and crd_rt is not None:
            current = self.store.bucket(CRD_STORAGE).get("", name)
            if current is not None and CRD_CLEANUP_FINALIZER in current.finalizers:
                await self._edit(
                    crd_rt, current, lambda obj: _drop_finalizer(obj, CRD_CLEANUP_FINALIZER)
                )

    async def _edit(self, rt: ResourceType, entry: Entry, change: Callable[[Obj], bool]) -> None:
        """Read-modify-write through the API, retrying on conflicts."""
        for _ in range(10):
            current = self.store.bucket(rt.storage).get(entry.namespace, entry.name)
            if current is None or current.uid != entry.uid:
                return
            obj = await self.engine.conversion.served(rt, current.obj())
            if not change(obj):
                return
            try:
                await self.engine.update(
                    rt, namespace=entry.namespace, name=entry.name, body=obj, opts=GC_MANAGER
                )
                return
            except errors.ApiError as exc:
                if exc.code == 409:
                    continue
                if exc.code == 404:
                    return
                raise


def _drop_refs(obj: Obj, uids: set[str], *, keep: bool) -> bool:
    m = meta.meta(obj)
    refs: list[Any] = m.get("ownerReferences") or []
    kept = [r for r in refs if (r.get("uid") in uids) == keep]
    if len(kept) == len(refs):
        return False
    if kept:
        m["ownerReferences"] = kept
    else:
        m.pop("ownerReferences", None)
    return True


def _drop_finalizer(obj: Obj, name: str) -> bool:
    m = meta.meta(obj)
    finalizers = m.get("finalizers") or []
    if name not in finalizers:
        return False
    kept = [f for f in finalizers if f != name]
    if kept:
        m["finalizers"] = kept
    else:
        m.pop("finalizers", None)
    return True
