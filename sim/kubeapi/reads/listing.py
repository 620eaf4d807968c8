"""LIST: selectors, pagination with continue tokens, and the resourceVersion rules.

- ``resourceVersion`` unset: the current state (what etcd returns for a quorum read);
- ``"0"``: any state; served as the current one, and ``limit`` is ignored as the watch
  cache of the real server ignores it;
- ``N`` with ``NotOlderThan``: the current state, once the store has reached ``N``;
- ``N`` with ``Exact`` (also ``N`` plus ``limit`` without a match rule): the state at ``N``,
  rebuilt from the event window, or ``410 Expired`` once that history is gone;
- ``continue``: the next page of the snapshot the token was issued for.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sim.kubeapi.conversion.converter import Converter
from sim.kubeapi.machinery import codec, errors
from sim.kubeapi.machinery.query import ListOptions, parse_rv
from sim.kubeapi.reads import tables
from sim.kubeapi.storage.resources import Obj, ResourceType
from sim.kubeapi.storage.store import Entry, Key, Store

CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)


@dataclass(frozen=True, slots=True)
class Representation:
    """What the client asked for in Accept: plain objects, a Table, or metadata only."""

    kind: str = "object"  # "object" | "table" | "metadata"
    table_version: str = "v1"
    include_object: str = "Metadata"


def matcher(namespace: str | None, opts: ListOptions) -> Callable[[Entry], bool]:
    labels, fields = opts.labels, opts.fields
    if labels.empty and fields.empty:
        return lambda e: True
    if fields.empty:
        return lambda e: labels.matches(e.labels)
    if labels.empty:
        return lambda e: fields.matches(e.fields)
    return lambda e: labels.matches(e.labels) and fields.matches(e.fields)


def encode_continue(rv: int, start: Key) -> str:
    token = codec.encode({"v": "meta.k8s.io/v1", "rv": rv, "start": list(start)})
    return base64.urlsafe_b64encode(token).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, Key]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = codec.decode(base64.urlsafe_b64decode(padded))
        if data.get("v") != "meta.k8s.io/v1":
            raise ValueError("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
        rv = int(data["rv"])
        ns, name = data["start"]
        return rv, (str(ns), str(name))
    except (ValueError, KeyError, TypeError, codec.DecodeError) as exc:
        raise errors.bad_request(f"continue key is not valid: {exc}") from None


async def wait_for_rv(store: Store, rv: int, patience: float) -> None:
    """Block until the store has reached ``rv``; 504 like the real server otherwise."""
    deadline = time.monotonic() + patience
    while store.rv < rv:
        if time.monotonic() >= deadline:
            raise errors.timeout(
                f"Too large resource version: {rv}, current: {store.rv}",
                retry_after=1,
                causes=[
                    {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
                ],
            )
        await asyncio.sleep(0.05)


async def list_objects(
    store: Store,
    rt: ResourceType,
    namespace: str | None,
    opts: ListOptions,
    rep: Representation,
    *,
    too_large_wait: float,
    conversion: Converter,
) -> bytes:
    bucket = store.bucket(rt.storage)
    limit = opts.limit
    after: Key | None = None
    labels, fields = opts.labels, opts.fields
    # Every source yields only the entries matching both selectors, in key order.
    if opts.continue_token:
        list_rv, after = decode_continue(opts.continue_token)
        if list_rv < bucket.floor:
            raise errors.expired(CONTINUE_EXPIRED)
        source: Iterable[Entry] = bucket.snapshot(list_rv, namespace, labels, fields, after=after)
    elif opts.resource_version in ("", "0"):
        list_rv = store.rv
        source = bucket.select(namespace, labels, fields)
        if opts.resource_version == "0":
            limit = 0
    else:
        wanted = parse_rv(opts.resource_version)
        exact = opts.resource_version_match == "Exact" or (
            opts.resource_version_match == "" and limit > 0
        )
        if wanted > store.rv:
            await wait_for_rv(store, wanted, too_large_wait)
        if exact:
            list_rv = wanted
            source = bucket.snapshot(wanted, namespace, labels, fields)
        else:
            list_rv = store.rv
            source = bucket.select(namespace, labels, fields)
    page: list[Entry] = []
    more = False
    remaining = 0
    selective = not (labels.empty and fields.empty)
    # Counting what is left is cheap from the live index; a reconstructed past is walked.
    live = bucket.is_current(list_rv)
    for entry in source:
        if limit and len(page) >= limit:
            more = True
            if selective or live:
                break
            remaining += 1
            continue
        page.append(entry)
    list_meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
    if more:
        list_meta["continue"] = encode_continue(list_rv, page[-1].key)
        if not selective:
            if live:
                remaining = bucket.count_after(namespace, page[-1].key)
            list_meta["remainingItemCount"] = remaining
    served = await served_by_webhook(conversion, rt, page)
    return render_list(rt, page, list_meta, rep, served=served)


async def served_by_webhook(
    conversion: Converter, rt: ResourceType, page: list[Entry]
) -> list[Obj] | None:
    """The page in ``rt``'s version when the CRD's webhook must convert some of it (each item
    in a ConversionReview of its own, as kube-apiserver decodes them); None otherwise."""
    if rt.webhook is None or all(entry.api_version == rt.api_version for entry in page):
        return None
    return [await conversion.served(rt, entry.obj()) for entry in page]


def _stored_as_served(rt: ResourceType, page: list[Entry]) -> bool:
    """Whether the stored bytes are the served items as they are: a built-in kind listed in
    its stored version, or custom resources all stored in the version listed."""
    if not rt.custom:
        return rt.is_storage
    return all(entry.api_version == rt.api_version for entry in page)


def render_list(
    rt: ResourceType,
    page: list[Entry],
    list_meta: dict[str, Any],
    rep: Representation,
    *,
    served: list[Obj] | None = None,
) -> bytes:
    """The list body; ``served`` holds the items already in ``rt``'s version when a
    conversion webhook made them (``served_by_webhook``)."""
    if rep.kind == "table":
        objs = served if served is not None else [rt.from_storage(e.obj()) for e in page]
        body = tables.table(rt, objs, include_object=rep.include_object, list_meta=list_meta)
        body["apiVersion"] = f"meta.k8s.io/{rep.table_version}"
        return codec.encode(body)
    if rep.kind == "metadata":
        sources = served if served is not None else [e.obj() for e in page]
        items = [tables.partial_metadata(obj) for obj in sources]
        return codec.encode(
            {
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": list_meta,
                "items": items,
            }
        )
    head = codec.encode({"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": list_meta})
    if served is not None:
        chunks = [codec.encode(obj) for obj in served]
    elif _stored_as_served(rt, page):
        chunks = [entry.item for entry in page]
    else:
        chunks = [_converted_item(rt, entry) for entry in page]
    opening, closing = head[:-1] + b',"items":[', b"]}"
    if not chunks:
        return opening + closing
    # Glue the envelope onto the first and last item so the body is copied only once.
    chunks[0] = opening + chunks[0]
    chunks[-1] = chunks[-1] + closing
    return b",".join(chunks)


def _converted_item(rt: ResourceType, entry: Entry) -> bytes:
    obj = rt.from_storage(entry.obj())
    if not rt.custom:
        obj.pop("apiVersion", None)
        obj.pop("kind", None)
    return codec.encode(obj)
