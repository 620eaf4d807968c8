"""PATCH: JSON patch, merge patch, strategic merge patch and server-side apply.

A patch is applied to the live object in the request's version; the result then goes through
the same update path as a PUT (admission, preparation, validation, commit). Merge-style
patch documents are checked against the schema once, as documents; a ``resourceVersion`` in
the patched object is a precondition; concurrent changes are retried by re-applying the
patch to the fresh object.
"""

from __future__ import annotations

from typing import Any, Protocol

from sim.kubeapi.conversion.converter import Converter
from sim.kubeapi.machinery import codec, errors, meta
from sim.kubeapi.patches.failures import PatchError, PatchFormatError
from sim.kubeapi.patches.json_patch import json_patch
from sim.kubeapi.patches.merge_patch import merge_patch
from sim.kubeapi.patches.strategic_merge import strategic_merge_patch
from sim.kubeapi.storage.resources import Obj, ResourceType
from sim.kubeapi.storage.store import Entry, Store
from sim.kubeapi.writes.options import (
    APPLY_PATCH,
    JSON_PATCH,
    MAX_RETRIES,
    MERGE_PATCH,
    PATCH_TYPES,
    STRATEGIC_PATCH,
    ConcurrentChangeError,
    Result,
    WriteOptions,
)
from sim.kubeapi.writes.server_side_apply import server_side_apply


class UpdatePath(Protocol):
    """What PATCH builds on: the create and update path (the ``Engine`` provides it).

    A protocol rather than the engine's class, so that the engine can own a ``Patcher``
    without the two modules importing each other.
    """

    store: Store
    conversion: Converter

    def check_schema(
        self, rt: ResourceType, obj: Obj, opts: WriteOptions, warnings: list[str], *, patch: bool
    ) -> None: ...

    def decode(
        self,
        rt: ResourceType,
        body: Any,
        opts: WriteOptions,
        warnings: list[str],
        *,
        schema_checked: bool = False,
    ) -> Obj: ...

    def unknown_fields(
        self, unknown: list[str], opts: WriteOptions, warnings: list[str]
    ) -> None: ...

    async def create_decoded(
        self,
        rt: ResourceType,
        namespace: str,
        obj: Obj,
        opts: WriteOptions,
        warnings: list[str],
        *,
        managed: str | None,
    ) -> Result: ...

    async def update_from(
        self,
        rt: ResourceType,
        cur: Entry,
        new_version_form: Obj,
        opts: WriteOptions,
        warnings: list[str],
        *,
        subresource: str,
        managed: str | None,
    ) -> Result: ...


class Patcher:
    """The PATCH verb, on top of the update path."""

    def __init__(self, updates: UpdatePath) -> None:
        self.updates = updates

    async def patch(
        self,
        rt: ResourceType,
        *,
        namespace: str,
        name: str,
        content_type: str,
        raw: bytes,
        opts: WriteOptions,
        subresource: str = "",
        force: bool = False,
    ) -> Result:
        if content_type not in PATCH_TYPES:
            accepted = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
            if not rt.custom:
                accepted.insert(2, STRATEGIC_PATCH)
            raise errors.unsupported_media_type(content_type, accepted)
        if content_type == STRATEGIC_PATCH and rt.custom:
            raise errors.unsupported_media_type(
                content_type, [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
            )
        try:
            patch_doc = codec.decode_yaml(raw) if content_type == APPLY_PATCH else codec.decode(raw)
        except codec.DecodeError as exc:
            raise errors.bad_request(f"error decoding patch: {exc}") from None
        if content_type == APPLY_PATCH:
            if not opts.field_manager:
                raise errors.invalid_options(
                    "PatchOptions",
                    [errors.required("fieldManager", "is required for apply patch")],
                )
            if not isinstance(patch_doc, dict):
                raise errors.bad_request("error decoding YAML: apply patch must be an object")
        elif force:
            raise errors.invalid_options(
                "PatchOptions",
                [errors.invalid("force", True, "may not be specified for non-apply patch")],
            )
        ns = namespace if rt.namespaced else ""
        warnings: list[str] = []
        # Merge-style patches are checked once, as documents; the merged object then needs no
        # second decoding pass (the live object is already clean).
        checked = content_type in (MERGE_PATCH, STRATEGIC_PATCH) and isinstance(patch_doc, dict)
        if checked:
            self.updates.check_schema(rt, patch_doc, opts, warnings, patch=True)
        for _ in range(MAX_RETRIES):
            cur = self.updates.store.bucket(rt.storage).get(ns, name)
            if cur is None:
                if content_type == APPLY_PATCH and not subresource:
                    return await self._apply_create(rt, namespace, name, patch_doc, opts, warnings)
                raise errors.not_found(rt.plural, rt.group, name)
            live = await self.updates.conversion.served(rt, cur.obj())
            patched = self._patched(
                rt,
                live,
                content_type,
                patch_doc,
                opts,
                subresource=subresource,
                force=force,
                warnings=warnings,
            )
            pm = meta.meta(patched)
            if pm.get("name") != name:
                raise errors.invalid_object(
                    rt.kind, rt.group, name, [errors.immutable("metadata.name", pm.get("name"))]
                )
            given_rv = pm.get("resourceVersion")
            if given_rv and given_rv != str(cur.rv):
                raise errors.conflict(rt.plural, rt.group, name)
            pm["resourceVersion"] = str(cur.rv)
            if pm.get("uid") and pm["uid"] != cur.uid:
                raise errors.conflict(
                    rt.plural,
                    rt.group,
                    name,
                    f"Precondition failed: UID in precondition: {pm['uid']}, UID in object "
                    f"meta: {cur.uid}",
                )
            decoded = self.updates.decode(rt, patched, opts, warnings, schema_checked=checked)
            try:
                return await self.updates.update_from(
                    rt,
                    cur,
                    decoded,
                    opts,
                    warnings,
                    subresource=subresource,
                    managed="apply" if content_type == APPLY_PATCH else None,
                )
            except ConcurrentChangeError:
                continue
        raise errors.conflict(rt.plural, rt.group, name)

    def _patched(
        self,
        rt: ResourceType,
        live: Obj,
        content_type: str,
        doc: Any,
        opts: WriteOptions,
        *,
        subresource: str,
        force: bool,
        warnings: list[str],
    ) -> Obj:
        try:
            if content_type == JSON_PATCH:
                result = json_patch(live, doc)
            elif content_type == MERGE_PATCH:
                result = merge_patch(live, doc)
            elif content_type == STRATEGIC_PATCH:
                result = strategic_merge_patch(live, doc, rt.schema)
            else:
                config = self._apply_config(rt, doc, subresource, opts, warnings)
                result = server_side_apply(
                    live=live,
                    applied=config,
                    manager=opts.field_manager,
                    api_version=rt.api_version,
                    force=force,
                    subresource=subresource,
                    shape=rt.shape,
                )
        except PatchFormatError as exc:
            raise errors.bad_request(str(exc)) from None
        except PatchError as exc:
            raise errors.ApiError(code=422, reason="Invalid", message=str(exc)) from None
        if not isinstance(result, dict):
            raise errors.bad_request("the patched object is not a JSON object")
        return result

    def _apply_config(
        self,
        rt: ResourceType,
        doc: Obj,
        subresource: str,
        opts: WriteOptions | None = None,
        warnings: list[str] | None = None,
    ) -> Obj:
        config = codec.copy(doc)
        api_version, kind = config.get("apiVersion"), config.get("kind")
        if not api_version or not kind:
            raise errors.bad_request(
                "error decoding YAML: Object 'Kind' is missing or apiVersion is not set in "
                "the apply configuration"
            )
        if api_version != rt.api_version or kind != rt.kind:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                "version "
                f"({rt.api_version})"
                if api_version != rt.api_version
                else f"kind in the apply configuration ({kind}) does not match the expected "
                f"kind ({rt.kind})"
            )
        if rt.schema is not None:
            unknown = rt.schema.prune(config)
            if unknown and opts is not None and warnings is not None:
                self.updates.unknown_fields(unknown, opts, warnings)
        if subresource == "status":
            config = {
                k: v for k, v in config.items() if k in ("apiVersion", "kind", "metadata", "status")
            }
        elif rt.strategy.status_subresource:
            config.pop("status", None)
        return config

    async def _apply_create(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        doc: Obj,
        opts: WriteOptions,
        warnings: list[str],
    ) -> Result:
        config = self._apply_config(rt, doc, "", opts, warnings)
        cm = meta.meta(config)
        if cm.get("name") and cm["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({cm['name']}) does not match the name on the URL ({name})"
            )
        cm["name"] = name
        created = server_side_apply(
            live=None,
            applied=config,
            manager=opts.field_manager,
            api_version=rt.api_version,
            force=False,
            subresource="",
            shape=rt.shape,
        )
        obj = self.updates.decode(rt, created, opts, warnings)
        return await self.updates.create_decoded(
            rt, namespace, obj, opts, warnings, managed="apply"
        )
