"""What a request's body and query say: the decoded body, and DeleteOptions checked like the
server checks them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web
from multidict import MultiMapping

from sim.kubeapi.http import protobuf_decoder
from sim.kubeapi.machinery import codec, errors
from sim.kubeapi.machinery.query import dry_run, parse_bool, parse_int
from sim.kubeapi.writes.options import DeleteOptions

JSON = "application/json"
PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")
ACCEPTED_BODIES = ("application/json", "application/yaml", protobuf_decoder.CONTENT_TYPE)
BODY_TYPES = ("", JSON, "application/yaml", "application/x-yaml", "text/yaml", "*/*")


async def request_body(request: web.Request) -> Any:
    """The decoded body: JSON, YAML or the protobuf kinds kubectl sends."""
    raw = await request.read()
    content_type = request.headers.get("Content-Type", JSON).split(";", 1)[0].strip().lower()
    if content_type == protobuf_decoder.CONTENT_TYPE:
        try:
            return protobuf_decoder.decode(raw)
        except protobuf_decoder.UnsupportedProtobufError:
            raise errors.unsupported_media_type(content_type, ACCEPTED_BODIES) from None
    if content_type not in BODY_TYPES:
        raise errors.unsupported_media_type(content_type, ACCEPTED_BODIES)
    try:
        if content_type in ("application/yaml", "application/x-yaml", "text/yaml"):
            return codec.decode_yaml(raw)
        return codec.decode(raw)
    except codec.DecodeError as exc:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from None


async def request_delete_options(request: web.Request) -> DeleteOptions:
    """DeleteOptions from the request's body and query."""
    body: dict[str, Any] = {}
    raw = await request.read()
    if raw.strip():
        try:
            decoded = codec.decode(raw)
        except codec.DecodeError as exc:
            raise errors.bad_request(f"couldn't decode DeleteOptions: {exc}") from None
        if isinstance(decoded, dict):
            body = decoded
    return delete_options(body, request.query)


def delete_options(body: Mapping[str, Any], query: MultiMapping[str]) -> DeleteOptions:
    """DeleteOptions from a request's body and query (the query wins), checked like the server."""
    grace = parse_int(query, "gracePeriodSeconds")
    if grace is None and isinstance(body.get("gracePeriodSeconds"), int):
        grace = body["gracePeriodSeconds"]
    policy = query.get("propagationPolicy") or body.get("propagationPolicy")
    orphan: bool | None = None
    if query.get("orphanDependents", "") != "":
        orphan = parse_bool(query, "orphanDependents")
    elif isinstance(body.get("orphanDependents"), bool):
        orphan = body["orphanDependents"]
    problems = []
    if policy is not None and policy not in PROPAGATION_POLICIES:
        problems.append(
            errors.not_supported("propagationPolicy", policy, (*PROPAGATION_POLICIES, "nil"))
        )
    if policy is not None and orphan is not None:
        problems.append(
            errors.invalid(
                "propagationPolicy",
                policy,
                "orphanDependents and deletionPropagation cannot be both set",
            )
        )
    if problems:
        raise errors.invalid_options("DeleteOptions", problems)
    preconditions = body.get("preconditions") or {}
    dry = query.getall("dryRun", []) or list(body.get("dryRun") or [])
    return DeleteOptions(
        grace_period_seconds=grace,
        propagation_policy=policy,
        orphan_dependents=orphan,
        precondition_uid=preconditions.get("uid"),
        precondition_rv=preconditions.get("resourceVersion"),
        dry_run=dry_run(dry),
    )
