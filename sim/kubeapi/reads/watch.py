"""WATCH: newline-delimited JSON events over one chunked HTTP response.

Start points, as on the real server:
- ``resourceVersion`` unset or ``"0"``: one synthetic ADDED per existing object, then live;
- ``N``: every stored event newer than ``N``, then live; when some of them have left the
  window, a single ERROR event carrying ``410 Expired`` and the stream ends;
- ``sendInitialEvents=true``: the synthetic ADDEDs, then a BOOKMARK annotated
  ``k8s.io/initial-events-end: "true"``, then live.

Selectors apply to both the old and the new state of each change, so an object that starts
matching arrives as ADDED and one that stops matching as DELETED. A watcher that falls
behind the window, a dropped stream (fault injection) and ``timeoutSeconds`` all end the
response cleanly; clients then resume from the last resourceVersion they saw.

Objects of a CRD that converts through a webhook are converted per event (once per event and
version, shared by the watchers of that version). A conversion that fails ends the stream with
one ``ERROR`` event carrying ``500 InternalError`` and the webhook's failure, as kube-apiserver's
etcd watcher reports an object it cannot decode.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from sim.kubeapi.conversion.converter import Converter
from sim.kubeapi.machinery import codec, errors
from sim.kubeapi.machinery.query import ListOptions, parse_rv
from sim.kubeapi.reads import tables
from sim.kubeapi.reads.listing import Representation, matcher, wait_for_rv
from sim.kubeapi.storage.resources import ResourceType
from sim.kubeapi.storage.selectindex import Pin, required_pin
from sim.kubeapi.storage.store import Entry, Event, Store

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class WatchStream:
    """One watcher: filters and encodes events for its request."""

    def __init__(
        self,
        *,
        store: Store,
        rt: ResourceType,
        namespace: str | None,
        opts: ListOptions,
        rep: Representation,
        conversion: Converter,
    ) -> None:
        self.store = store
        self.rt = rt
        self.conversion = conversion
        self.converting = rt.webhook is not None
        """Whether events may need the CRD's conversion webhook (``converted_event_line``)."""
        self.namespace = namespace
        self.opts = opts
        self.rep = rep
        base = matcher(namespace, opts)
        if namespace is None:
            self.accept: Callable[[Entry], bool] = base
        else:
            self.accept = lambda e: e.namespace == namespace and base(e)
        self.shared_lines = rep.kind == "object" and rt.is_storage
        self._headers_sent = False
        # A watcher whose selector requires one pin waits only for changes to objects with it.
        self.wake_key: Pin | None = required_pin(opts.labels, opts.fields)

    # -- encoding -------------------------------------------------------------------------------

    def _encode(self, type_: str, raw: bytes) -> bytes:
        return self._encode_served(type_, self.rt.from_storage(codec.decode(raw)))

    def _encode_served(self, type_: str, obj: Any) -> bytes:
        if self.rep.kind == "table":
            obj = tables.table(self.rt, [obj], include_object=self.rep.include_object)
            obj["apiVersion"] = f"meta.k8s.io/{self.rep.table_version}"
        elif self.rep.kind == "metadata":
            obj = tables.partial_metadata(obj)
        return codec.encode({"type": type_, "object": obj}) + b"\n"

    def _event_type(self, ev: Event) -> str | None:
        """The type this watcher sees the change as (selector transitions), or None."""
        now_match = ev.type != "DELETED" and self.accept(ev.entry)
        was_match = ev.prev is not None and self.accept(ev.prev)
        if ev.type == "ADDED":
            kind = "ADDED" if now_match else None
        elif ev.type == "DELETED":
            kind = "DELETED" if was_match else None
        elif now_match:
            kind = "MODIFIED" if was_match else "ADDED"
        else:
            kind = "DELETED" if was_match else None
        return kind

    def event_line(self, ev: Event) -> bytes | None:
        kind = self._event_type(ev)
        if kind is None:
            return None
        if self.shared_lines and self._as_stored(ev.entry):
            return ev.line(kind)
        raw = (
            ev.prev_with_event_rv()
            if (kind == "DELETED" and ev.type == "MODIFIED")
            else ev.entry.raw
        )
        return self._encode(kind, raw)

    def _as_stored(self, entry: Entry) -> bool:
        """Whether the stored bytes serve as they are: a custom resource stored in an older
        version of its CRD is given the version watched."""
        return not self.rt.custom or entry.api_version == self.rt.api_version

    def added_line(self, entry: Entry) -> bytes:
        if self.shared_lines and self._as_stored(entry):
            return b'{"type":"ADDED","object":' + entry.raw + b"}\n"
        return self._encode("ADDED", entry.raw)

    async def converted_event_line(self, ev: Event) -> bytes | None:
        """``event_line`` for a CRD that converts through a webhook (ApiError if it fails)."""
        kind = self._event_type(ev)
        if kind is None:
            return None
        selector_left = kind == "DELETED" and ev.type == "MODIFIED"
        source = ev.prev if selector_left and ev.prev is not None else ev.entry
        if source.api_version == self.rt.api_version:
            return self.event_line(ev)
        raw = ev.prev_with_event_rv() if selector_left else ev.entry.raw

        async def make() -> bytes:
            obj = await self.conversion.served(self.rt, codec.decode(raw))
            return self._encode_served(kind, obj)

        if self.rep.kind != "object":
            return await make()
        return await ev.shared_line(f"{self.rt.api_version} {kind}", make)

    async def converted_added_line(self, entry: Entry) -> bytes:
        """``added_line`` for a CRD that converts through a webhook (ApiError if it fails)."""
        if entry.api_version == self.rt.api_version:
            return self.added_line(entry)
        obj = await self.conversion.served(self.rt, entry.obj())
        return self._encode_served("ADDED", obj)

    def bookmark_line(self, rv: int, *, initial_end: bool = False) -> bytes:
        metadata: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            metadata["annotations"] = {INITIAL_EVENTS_END: "true"}
        obj = {"kind": self.rt.kind, "apiVersion": self.rt.api_version, "metadata": metadata}
        return codec.encode({"type": "BOOKMARK", "object": obj}) + b"\n"


@dataclass(frozen=True, slots=True)
class WatchSettings:
    """Server-wide watch timing (see ServerConfig)."""

    bookmark_interval: float
    default_timeout: float
    too_large_wait: float
    coalesce: float


def error_line(err: errors.ApiError) -> bytes:
    return codec.encode({"type": "ERROR", "object": err.status()}) + b"\n"


async def serve_watch(
    request: web.Request,
    *,
    store: Store,
    rt: ResourceType,
    namespace: str | None,
    opts: ListOptions,
    rep: Representation,
    content_type: str,
    settings: WatchSettings,
    force_expired: bool,
    conversion: Converter,
) -> web.StreamResponse:
    bucket = store.bucket(rt.storage)
    stream = WatchStream(
        store=store, rt=rt, namespace=namespace, opts=opts, rep=rep, conversion=conversion
    )
    rv_text = opts.resource_version
    initial = (
        opts.send_initial_events if opts.send_initial_events is not None else rv_text in ("", "0")
    )
    start_rv = 0
    expired: errors.ApiError | None = None
    if force_expired:
        requested = parse_rv(rv_text) if rv_text not in ("", "0") else store.rv
        expired = errors.too_old_resource_version(requested, store.rv)
    elif rv_text not in ("", "0"):
        start_rv = parse_rv(rv_text)
        if start_rv > store.rv:
            await wait_for_rv(store, start_rv, settings.too_large_wait)
        if start_rv < bucket.floor and not initial:
            expired = errors.too_old_resource_version(start_rv, bucket.floor)

    response = web.StreamResponse(
        status=200, headers={"Content-Type": content_type, "Cache-Control": "no-cache, private"}
    )
    response.enable_chunked_encoding()
    await response.prepare(request)
    if expired is not None:
        await response.write(error_line(expired))
        await response.write_eof()
        return response

    timeout = float(opts.timeout_seconds) if opts.timeout_seconds else settings.default_timeout
    deadline = time.monotonic() + timeout
    epoch = bucket.drop_epoch
    try:
        if initial:
            snapshot = list(bucket.select(namespace, opts.labels, opts.fields))
            start_rv = store.rv
            if stream.converting:
                lines = [await stream.converted_added_line(e) for e in snapshot if stream.accept(e)]
            else:
                lines = [stream.added_line(e) for e in snapshot if stream.accept(e)]
            if opts.send_initial_events:
                lines.append(stream.bookmark_line(start_rv, initial_end=True))
            if lines:
                await response.write(b"".join(lines))
        elif rv_text in ("", "0"):
            start_rv = store.rv
        await _follow(
            response,
            stream,
            bucket_name=rt.storage,
            store=store,
            last_rv=start_rv,
            epoch=epoch,
            deadline=deadline,
            bookmarks=opts.allow_bookmarks,
            interval=settings.bookmark_interval,
            coalesce=settings.coalesce,
        )
        await response.write_eof()
    except errors.ApiError as err:
        # A conversion that failed: the stream ends with the error, as an etcd watch does.
        await response.write(error_line(errors.internal_error(err.message)))
        await response.write_eof()
    except (ConnectionResetError, ConnectionError):
        pass
    return response


async def _follow(
    response: web.StreamResponse,
    stream: WatchStream,
    *,
    bucket_name: str,
    store: Store,
    last_rv: int,
    epoch: int,
    deadline: float,
    bookmarks: bool,
    interval: float,
    coalesce: float,
) -> None:
    bucket = store.bucket(bucket_name)
    next_bookmark = time.monotonic() + interval
    while True:
        changed = bucket.changed(stream.wake_key)
        if bucket.drop_epoch != epoch:
            return
        try:
            events = bucket.events_after(last_rv, stream.wake_key)
        except errors.ApiError:
            return  # fell out of the window: end the stream; the client's resume gets 410
        if events:
            last_rv = events[-1].rv
            if stream.converting:
                lines = [await stream.converted_event_line(ev) for ev in events]
                chunk = [line for line in lines if line is not None]
            else:
                chunk = [line for ev in events if (line := stream.event_line(ev)) is not None]
            if chunk:
                await response.write(b"".join(chunk))
            if time.monotonic() < deadline:
                continue
        now = time.monotonic()
        if now >= deadline:
            return
        if bookmarks and now >= next_bookmark:
            await response.write(stream.bookmark_line(max(store.rv, last_rv)))
            next_bookmark = now + interval
            continue
        wake_at = min(deadline, next_bookmark) if bookmarks else deadline
        try:
            async with asyncio.timeout(max(0.0, wake_at - now)):
                await changed.wait()
        except TimeoutError:
            continue
        if coalesce:
            # Let a burst of writes accumulate: one socket write for many events.
            await asyncio.sleep(coalesce)
