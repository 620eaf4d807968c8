"""What the emulator answers with: the response form a client's Accept asks for, JSON responses
with the server's headers (and ``Warning`` headers), and error Status responses."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from sim.kubeapi.machinery import codec, errors
from sim.kubeapi.reads.listing import Representation

JSON = "application/json"


def representation(accept: str) -> Representation | None:
    """Pick the response form from Accept; None when nothing acceptable is offered."""
    if not accept:
        return Representation()
    for media in accept.split(","):
        pieces = [p.strip() for p in media.split(";")]
        mime = pieces[0].lower()
        params = dict(p.split("=", 1) for p in pieces[1:] if "=" in p)
        if mime not in (JSON, "*/*", "application/*", "application/yaml"):
            continue
        as_kind = params.get("as")
        if as_kind is None:
            return Representation()
        if params.get("g") != "meta.k8s.io":
            continue
        if as_kind == "Table" and params.get("v") in ("v1", "v1beta1"):
            return Representation(kind="table", table_version=params["v"])
        if as_kind in ("PartialObjectMetadata", "PartialObjectMetadataList") and params.get(
            "v"
        ) in ("v1", "v1beta1"):
            return Representation(kind="metadata")
    return None


def content_type(rep: Representation) -> str:
    if rep.kind == "table":
        return f"{JSON};as=Table;v={rep.table_version};g=meta.k8s.io"
    return JSON


def json_response(
    body: Any,
    *,
    status: int = 200,
    warnings: list[str] | None = None,
    content_type: str = JSON,
    headers: dict[str, str] | None = None,
) -> web.Response:
    out: CIMultiDict[str] = CIMultiDict()
    out["Content-Type"] = content_type
    out["Cache-Control"] = "no-cache, private"
    for warning in warnings or ():
        out.add("Warning", '299 - "' + warning.replace("\\", "\\\\").replace('"', '\\"') + '"')
    for key, value in (headers or {}).items():
        out[key] = value
    data = body if isinstance(body, bytes) else codec.encode(body)
    return web.Response(body=data, status=status, headers=out)


def error_response(err: errors.ApiError) -> web.Response:
    return json_response(err.status(), status=err.code, headers=err.headers)
