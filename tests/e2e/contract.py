"""Every event a system published, read back from its JetStream stream and validated against the
contract in proto/ with a JSON Schema validator, independently of the code's own decoding.

:func:`replay` reads the stream from its first message to the last one there when it starts
(services still running may add more; those are left for the next reader) and checks each
message: its ``ce-type`` names a schema in proto/events, its body validates against that schema
(formats included: ``time`` must be an RFC 3339 date-time), and its ``ce-time`` header is one.
The whole-system fixture runs it before it stops each system, so every end-to-end module checks
everything its scenarios made the services publish.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import nats
from jsonschema import Draft202012Validator
from nats.js import api

from shared.bus.token import TokenFile

ROOT = Path(__file__).resolve().parents[2]
EVENT_SCHEMAS = ROOT / "proto" / "events"
SCHEMA_SUFFIX = ".schema.json"
STREAM = "CDO"
SUBJECTS = "cdo.v1.>"
READ_TIMEOUT_S = 5.0


@dataclass
class Replay:
    """What a replay read, and every way a message broke the contract."""

    events: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)


@cache
def validators() -> dict[str, Draft202012Validator]:
    """One validator per CloudEvent type, from the committed schemas, checking formats too."""
    out: dict[str, Draft202012Validator] = {}
    for path in sorted(EVENT_SCHEMAS.glob(f"*{SCHEMA_SUFFIX}")):
        schema = json.loads(path.read_text())
        Draft202012Validator.check_schema(schema)
        out[path.name.removesuffix(SCHEMA_SUFFIX)] = Draft202012Validator(
            schema, format_checker=Draft202012Validator.FORMAT_CHECKER
        )
    return out


def violations_of(headers: dict[str, str], body: bytes, *, where: str) -> list[str]:
    """How one message breaks the contract (empty when it keeps it)."""
    ce_type = headers.get("ce-type", "")
    validator = validators().get(ce_type)
    if validator is None:
        return [f"{where}: ce-type {ce_type!r} has no schema in proto/events"]
    try:
        payload: Any = json.loads(body)
    except ValueError as exc:
        return [f"{where} ({ce_type}): the body is not JSON: {exc}"]
    found = [
        f"{where} ({ce_type}): {error.json_path}: {error.message}"
        for error in sorted(validator.iter_errors(payload), key=lambda e: e.json_path)
    ]
    ce_time = headers.get("ce-time", "")
    if not Draft202012Validator.FORMAT_CHECKER.conforms(ce_time, "date-time"):
        found.append(f"{where} ({ce_type}): header ce-time {ce_time!r} is not a date-time")
    return found


async def replay(
    nats_url: str,
    *,
    stream: str = STREAM,
    token_file: str = "",
    on_message: Callable[[dict[str, str], bytes], None] | None = None,
) -> Replay:
    """Read ``stream`` from the start to its last message now, checking every one; with
    ``token_file`` (NATS identities) as the reader whose token it holds; ``on_message`` gets
    each message's (lower-cased) headers and body too."""
    result = Replay()
    token = TokenFile(token_file, variable="token_file") if token_file else None
    nc = await nats.connect(nats_url, allow_reconnect=False, connect_timeout=5, token=token)
    try:
        js = nc.jetstream()
        state = (await js.stream_info(stream)).state
        if state.messages == 0:
            return result
        subscription = await js.subscribe(
            SUBJECTS,
            stream=stream,
            ordered_consumer=True,
            deliver_policy=api.DeliverPolicy.ALL,
        )
        try:
            while True:
                message = await subscription.next_msg(timeout=READ_TIMEOUT_S)
                sequence = message.metadata.sequence.stream
                headers = {key.lower(): value for key, value in (message.headers or {}).items()}
                result.events += 1
                result.by_type[headers.get("ce-type", "")] += 1
                result.violations += violations_of(
                    headers, message.data, where=f"{message.subject} #{sequence}"
                )
                if on_message is not None:
                    on_message(headers, message.data)
                if sequence >= state.last_seq:
                    return result
        finally:
            await subscription.unsubscribe()
    finally:
        await nc.close()
