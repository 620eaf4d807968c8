"""The ``scale`` subresource: an autoscaling/v1 Scale view of a replicated object.

Deployments, ReplicaSets and StatefulSets serve one, and so does every custom resource whose
CRD version declares ``subresources.scale`` (``specReplicasPath``, ``statusReplicasPath``,
optional ``labelSelectorPath``). As on kube-apiserver:

- ``GET .../<name>/scale`` answers a Scale whose metadata is the object's name, namespace, uid,
  resourceVersion and creationTimestamp; ``spec.replicas`` is the object's desired count
  (omitted when 0, as autoscaling/v1 encodes it); ``status.replicas`` its observed count;
  ``status.selector`` the label selector in string form (built-ins: ``spec.selector``; custom
  resources: the string at ``labelSelectorPath``);
- ``PUT`` takes a Scale: ``spec.replicas`` must be a non-negative integer, a
  ``metadata.resourceVersion`` it carries is a precondition (409 when stale), and the object's
  desired count becomes that number, through the ordinary update path (generation, validation,
  watch events); the answer is the Scale of the updated object;
- ``PATCH`` (JSON patch, merge patch, strategic merge patch) applies the patch to the current
  Scale, then writes it as ``PUT`` does; a write that loses a race is decided again from the
  new object.

Limits: server-side apply on the subresource is refused (415), admission sees the write as an
update of the object itself, and managedFields record it without the ``scale`` subresource.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim.kubeapi.machinery import codec, errors, meta, selectors
from sim.kubeapi.patches.failures import PatchError, PatchFormatError
from sim.kubeapi.patches.json_patch import json_patch
from sim.kubeapi.patches.merge_patch import merge_patch
from sim.kubeapi.storage.resources import Obj, ResourceType, ScalePaths
from sim.kubeapi.writes.options import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_PATCH,
    WriteOptions,
)

if TYPE_CHECKING:
    from sim.kubeapi.writes.engine import Engine

SCALE = "scale"
SCALE_API_VERSION = "autoscaling/v1"
PATCHES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH)
MAX_RETRIES = 5


BUILTIN = ScalePaths()


def _nested(obj: Any, steps: tuple[str, ...]) -> Any:
    for step in steps:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(step)
    return obj


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _selector(paths: ScalePaths, obj: Obj) -> str:
    if paths.label_selector is None:
        selector = (obj.get("spec") or {}).get("selector")
        return selectors.from_label_selector_object(selector).text() if selector else ""
    if not paths.label_selector:
        return ""
    found = _nested(obj, paths.label_selector)
    return found if isinstance(found, str) else ""


def scale_of(rt: ResourceType, obj: Obj) -> Obj:
    """The Scale view of ``obj`` (see the module docstring)."""
    paths = rt.scale or BUILTIN
    m = meta.meta(obj)
    scale_meta = {
        key: m[key]
        for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        if m.get(key)
    }
    replicas = _count(_nested(obj, paths.spec_replicas))
    status: dict[str, Any] = {"replicas": _count(_nested(obj, paths.status_replicas))}
    selector = _selector(paths, obj)
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": SCALE_API_VERSION,
        "metadata": scale_meta,
        "spec": {"replicas": replicas} if replicas else {},
        "status": status,
    }


def _requested(name: str, scale: Any) -> tuple[int, str]:
    """The replicas and resourceVersion a Scale body asks for, or a 400/422 naming the field."""
    if not isinstance(scale, dict):
        raise errors.bad_request("the body of the request was in an unknown format")
    m = scale.get("metadata") or {}
    named = m.get("name") if isinstance(m, dict) else None
    if named and named != name:
        raise errors.bad_request(
            f"the name of the object ({named}) does not match the name on the URL ({name})"
        )
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        raise errors.invalid_object(
            "Scale",
            "autoscaling",
            name,
            [errors.type_invalid("spec.replicas", replicas, "must be an integer")],
        )
    if replicas < 0:
        raise errors.invalid_object(
            "Scale",
            "autoscaling",
            name,
            [errors.invalid("spec.replicas", replicas, "must be greater than or equal to 0")],
        )
    version = m.get("resourceVersion") if isinstance(m, dict) else None
    return replicas, version if isinstance(version, str) else ""


def _with_replicas(rt: ResourceType, obj: Obj, replicas: int) -> Obj:
    paths = rt.scale or BUILTIN
    target = obj
    for step in paths.spec_replicas[:-1]:
        child = target.get(step)
        if not isinstance(child, dict):
            child = {}
            target[step] = child
        target = child
    target[paths.spec_replicas[-1]] = replicas
    return obj


async def read(engine: Engine, rt: ResourceType, namespace: str, name: str) -> Obj:
    """``GET .../scale``."""
    return scale_of(rt, await engine.read(rt, namespace, name))


async def update(
    engine: Engine, rt: ResourceType, *, namespace: str, name: str, body: Any, opts: WriteOptions
) -> Obj:
    """``PUT .../scale``."""
    replicas, version = _requested(name, body)
    for _ in range(MAX_RETRIES):
        try:
            return await _write(engine, rt, namespace, name, replicas, version or None, opts)
        except errors.ApiError as exc:
            if exc.code != 409 or version:
                raise
    raise errors.conflict(rt.plural, rt.group, name)


async def patch(
    engine: Engine,
    rt: ResourceType,
    *,
    namespace: str,
    name: str,
    content_type: str,
    raw: bytes,
    opts: WriteOptions,
) -> Obj:
    """``PATCH .../scale``: the patch applies to the current Scale."""
    if content_type not in PATCHES:
        raise errors.unsupported_media_type(content_type, PATCHES)
    try:
        doc = codec.decode(raw)
    except codec.DecodeError as exc:
        raise errors.bad_request(f"error decoding patch: {exc}") from None
    for _ in range(MAX_RETRIES):
        current = await read(engine, rt, namespace, name)
        try:
            patched = (
                json_patch(current, doc)
                if content_type == JSON_PATCH
                else merge_patch(current, doc)
            )
        except PatchFormatError as exc:
            raise errors.bad_request(str(exc)) from None
        except PatchError as exc:
            raise errors.ApiError(code=422, reason="Invalid", message=str(exc)) from None
        replicas, version = _requested(name, patched)
        try:
            return await _write(engine, rt, namespace, name, replicas, version, opts)
        except errors.ApiError as exc:
            if exc.code != 409 or version != current["metadata"].get("resourceVersion"):
                raise  # a conflict the patch itself asked for (its own resourceVersion)
    raise errors.conflict(rt.plural, rt.group, name)


async def _write(
    engine: Engine,
    rt: ResourceType,
    namespace: str,
    name: str,
    replicas: int,
    version: str | None,
    opts: WriteOptions,
) -> Obj:
    obj = await engine.read(rt, namespace, name)
    if version:
        meta.meta(obj)["resourceVersion"] = version
    result = await engine.update(
        rt, namespace=namespace, name=name, body=_with_replicas(rt, obj, replicas), opts=opts
    )
    return scale_of(rt, result.body)
