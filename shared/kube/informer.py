"""Informer: LIST, then WATCH from the list's resourceVersion, into an indexed cache.

    pods = Informer(client, PODS, Pod, metrics=ctx.metrics)
    pods.add_index("node", lambda pod: [pod.spec.node_name] if pod.spec.node_name else [])
    pods.add_handler(enqueue_mapped(queue, map_pod_to_domain))
    ctx.readiness.add("pods synced", lambda: pods.synced)
    ctx.supervisor.start("pods informer", pods.run())

Rules, each one a way real clusters break naive watchers:
- the first LIST is paginated (``limit``/``continue``); ``synced`` turns true after it;
- WATCH resumes from the newest resourceVersion seen (events and BOOKMARKs), so a watch the server
  ends (``timeoutSeconds``) or a dropped connection continues without a relist;
- ``410 Gone`` (an ERROR event or the HTTP status) means the version left the server's window:
  LIST again and report only the differences, deletions included, to the handlers;
- no line at all for ``inactivity_s`` (not even a bookmark) ends a stuck stream;
- every failure backs off exponentially with jitter, up to ``backoff_max_s``, and never less than
  the server's ``Retry-After`` (429 and 503); success resets it;
- an object that does not decode into the informer's type (a field of a type this build does not
  expect) is skipped, counted in ``cdo_informer_undecodable_total{resource}`` and logged once
  with its key: the cache keeps the last version of it that decoded (none, for a new object),
  and the informer goes on with every other object; its deletion still removes it;
- an informer of an optional API (``presence``, shared/kube/presence.py) lists nothing while the
  server does not serve it: it is synced with an empty cache, so it never holds up readiness or
  reconciling, and it lists and watches as soon as the API is served (a 404 sends it back).

Handlers are synchronous ``(old, new)`` callbacks: ``(None, obj)`` added, ``(old, obj)`` updated,
``(old, None)`` deleted. They should only enqueue keys; one that raises is logged and counted.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterable
from typing import Annotated, Generic, TypeVar

import msgspec
from msgspec import Meta
from prometheus_client import Gauge

from shared.kube.cache import Cache
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.meta import KubeObject, ListMeta, RawWatchEvent, Status
from shared.kube.presence import ApiPresence
from shared.kube.resources import Resource
from shared.metrics import Metrics
from shared.settings import Settings

T = TypeVar("T", bound=KubeObject)
Handler = Callable[[T | None, T | None], None]
log = logging.getLogger("cdo.kube.informer")


class InformerSettings(Settings, frozen=True, kw_only=True):
    """How an informer lists and watches."""

    page_size: Annotated[int, Meta(description="Objects per LIST page.", ge=1)] = 500
    watch_timeout_s: Annotated[
        int, Meta(description="Server-side watch timeout (randomised by up to +10%).", ge=1)
    ] = 300
    inactivity_s: Annotated[
        float, Meta(description="End a watch that sends nothing for this long.", gt=0)
    ] = 330.0
    backoff_initial_s: Annotated[float, Meta(description="First retry pause.", gt=0)] = 0.2
    backoff_max_s: Annotated[float, Meta(description="Longest retry pause.", gt=0)] = 30.0
    optional_api_recheck_s: Annotated[
        float,
        Meta(
            description="How often discovery is asked again whether an optional API is served.",
            gt=0,
        ),
    ] = 300.0


class RawList(msgspec.Struct, frozen=True, kw_only=True):
    """A LIST page, its items left encoded: each is decoded on its own, so one that does not
    decode cannot spoil the others."""

    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[msgspec.Raw] = msgspec.field(default_factory=list)


class _ExpiredError(Exception):
    """The watch's resourceVersion expired: start over with a LIST."""


class _IdentityMeta(msgspec.Struct, frozen=True, rename="camel"):
    name: object = ""
    namespace: object = ""
    resource_version: object = ""


class _Identity(msgspec.Struct, frozen=True):
    """What can be read of any object, however odd its other fields: its key and version."""

    metadata: _IdentityMeta = msgspec.field(default_factory=_IdentityMeta)

    @property
    def key(self) -> str:
        name, namespace = self.metadata.name, self.metadata.namespace
        if not isinstance(name, str) or not isinstance(namespace, str):
            return "?"
        return f"{namespace}/{name}" if namespace else name

    @property
    def resource_version(self) -> str:
        version = self.metadata.resource_version
        return version if isinstance(version, str) else ""


class Informer(Generic[T]):
    """Keeps a cache of one resource in step with the API server; see the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        object_type: type[T],
        *,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        settings: InformerSettings | None = None,
        metrics: Metrics | None = None,
        presence: ApiPresence | None = None,
    ) -> None:
        self.resource = resource
        self.presence = presence
        self.cache: Cache[T] = Cache()
        self._client = client
        self._namespace = namespace
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._settings = settings or InformerSettings()
        self._metrics = metrics or Metrics()
        self._handlers: list[Handler[T]] = []
        self._list_decoder = msgspec.json.Decoder(RawList)
        self._object_decoder = msgspec.json.Decoder(object_type)
        self._identity_decoder = msgspec.json.Decoder(_Identity)
        self._undecodable: set[str] = set()  # keys logged as undecodable, until they decode
        self._skipped = self._metrics.informer_undecodable.labels(resource.plural)
        self._counted = 0  # this informer's share of ``cdo_informer_objects``
        self._event_decoder = msgspec.json.Decoder(RawWatchEvent)
        self._synced = asyncio.Event()
        self._resource_version = ""
        self._events = {
            kind: self._metrics.informer_events.labels(resource.plural, kind)
            for kind in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK")
        }

    # -- configuration ----------------------------------------------------------------------

    def add_handler(self, handler: Handler[T]) -> None:
        """Call ``handler(old, new)`` on every change; objects already cached are replayed."""
        self._handlers.append(handler)
        for obj in self.cache.objects():
            self._call(handler, None, obj)

    def add_index(self, name: str, func: Callable[[T], Iterable[str]]) -> None:
        self.cache.add_index(name, func)

    # -- state ------------------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        """True once the first LIST has filled the cache."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    @property
    def resource_version(self) -> str:
        """The newest resourceVersion the cache reflects."""
        return self._resource_version

    # -- the loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled."""
        try:
            await self._list_and_watch()
        finally:
            if self._counted:  # a stopped informer's cache is dropped with it
                self._held().dec(self._counted)
                self._counted = 0

    def _held(self) -> Gauge:
        return self._metrics.informer_objects.labels(self.resource.plural)

    def _count(self) -> None:
        """Bring this informer's share of ``cdo_informer_objects`` to its cache's size (the
        resource's sample appears with the first list: an informer that has not listed yet
        holds nothing)."""
        held = len(self.cache)
        self._held().inc(held - self._counted)
        self._counted = held

    async def _list_and_watch(self) -> None:
        pause = self._settings.backoff_initial_s
        reason = "start"
        while True:
            if self.presence is not None and not await self._until_served():
                reason = "served"
            try:
                if reason:
                    await self._list(reason)
                    reason = ""
                if await self._watch():
                    pause = self._settings.backoff_initial_s
                    continue
                # A stream that ended without a single line: pause, so a server that keeps
                # closing watches at once is not hammered.
                await asyncio.sleep(pause)
            except _ExpiredError:
                reason = "expired"
                continue
            except KubeApiError as exc:
                if exc.expired:
                    reason = "expired"
                    continue
                if exc.not_found and self.presence is not None:
                    self.presence.gone()  # discovery decides whether it is gone for good
                log.warning(
                    "watch or list failed; retrying",
                    extra={"resource": self.resource.plural, "error": str(exc), "pause_s": pause},
                )
                if not self._resource_version:
                    reason = reason or "error"
                await asyncio.sleep(max(pause * random.uniform(0.8, 1.2), exc.retry_after_s))
            except TimeoutError:
                log.warning(
                    "watch went silent; reconnecting", extra={"resource": self.resource.plural}
                )
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                # Not JSON at all (an object of the wrong type is skipped where it is decoded):
                # where the stream stood is unknown, so list again after a pause.
                log.error(
                    "unreadable answer from the API; listing again",
                    extra={"resource": self.resource.plural, "error": str(exc)},
                )
                reason = "error"
                await asyncio.sleep(pause)
            pause = min(pause * 2, self._settings.backoff_max_s)

    async def _until_served(self) -> bool:
        """Whether the optional API was served all along; while it is not, the cache is empty
        and synced, and this waits until it is."""
        assert self.presence is not None
        await self.presence.wait_known()
        if self.presence.served:
            return True
        for old, new in self.cache.replace([]):
            self._notify(old, new)
        self._resource_version = ""
        self._synced.set()
        await self.presence.wait_served()
        return False

    def _decode(self, raw: bytes | msgspec.Raw) -> T | _Identity:
        """The object, or (when it does not decode into the type) its identity, counted and
        logged once per key."""
        try:
            obj = self._object_decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            identity = self._identity_decoder.decode(raw)
            self._skipped.inc()
            if identity.key not in self._undecodable:
                self._undecodable.add(identity.key)
                log.error(
                    "object skipped: it does not decode; the cache keeps its last readable version",
                    extra={
                        "resource": self.resource.plural,
                        "key": identity.key,
                        "resource_version": identity.resource_version,
                        "error": str(exc),
                    },
                )
            return identity
        if self._undecodable:
            self._undecodable.discard(obj.key)
        return obj

    async def _list(self, reason: str) -> None:
        self._metrics.informer_lists.labels(self.resource.plural, reason).inc()
        objects: list[T] = []
        token = ""
        while True:
            page = self._list_decoder.decode(
                await self._client.list(
                    self.resource,
                    namespace=self._namespace,
                    label_selector=self._label_selector,
                    field_selector=self._field_selector,
                    limit=self._settings.page_size,
                    continue_token=token,
                )
            )
            for item in page.items:
                decoded = self._decode(item)
                if not isinstance(decoded, _Identity):
                    objects.append(decoded)
                elif (kept := self.cache.get(decoded.key)) is not None:
                    objects.append(kept)
            token = page.metadata.continue_
            if not token:
                break
        for old, new in self.cache.replace(objects):
            self._notify(old, new)
        self._count()
        self._resource_version = page.metadata.resource_version
        self._synced.set()
        log.debug(
            "listed",
            extra={"resource": self.resource.plural, "objects": len(objects), "reason": reason},
        )

    async def _watch(self) -> bool:
        """One watch stream from the current version; True if it delivered anything."""
        timeout = self._settings.watch_timeout_s
        stream = self._client.watch(
            self.resource,
            namespace=self._namespace,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
            resource_version=self._resource_version,
            timeout_s=timeout + random.randint(0, max(1, timeout // 10)),
            inactivity_s=self._settings.inactivity_s,
        )
        delivered = False
        async for line in stream:
            self._apply(self._event_decoder.decode(line))
            delivered = True
        return delivered

    def _apply(self, event: RawWatchEvent) -> None:
        kind = event.type
        if kind == "ERROR":
            status = msgspec.json.decode(event.object, type=Status)
            if status.code == 410:
                raise _ExpiredError(status.message)
            raise KubeApiError(code=status.code, reason=status.reason, message=status.message)
        if kind == "BOOKMARK":
            bookmark = msgspec.json.decode(event.object, type=KubeObject)
            self._resource_version = bookmark.metadata.resource_version or self._resource_version
            self._events["BOOKMARK"].inc()
            return
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            log.warning("unknown watch event type", extra={"type": kind})
            return
        obj = self._decode(event.object)
        if isinstance(obj, _Identity):
            if kind == "DELETED":
                self._undecodable.discard(obj.key)
                if (old := self.cache.delete(obj.key)) is not None:
                    self._notify(old, None)
                    self._count()
            self._resource_version = obj.resource_version or self._resource_version
            return
        if kind == "DELETED":
            self._undecodable.discard(obj.key)
            old = self.cache.delete(obj.key)
            self._notify(old or obj, None)
        else:
            self._notify(self.cache.upsert(obj), obj)
        self._resource_version = obj.metadata.resource_version
        self._events[kind].inc()
        self._count()

    def _notify(self, old: T | None, new: T | None) -> None:
        for handler in self._handlers:
            self._call(handler, old, new)

    def _call(self, handler: Handler[T], old: T | None, new: T | None) -> None:
        try:
            handler(old, new)
        except Exception:
            self._metrics.informer_handler_errors.labels(self.resource.plural).inc()
            log.exception("informer handler failed", extra={"resource": self.resource.plural})
