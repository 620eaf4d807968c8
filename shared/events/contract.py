"""The language-neutral event contract in proto/, generated from the event Structs.

- ``proto/events/<ce-type>.schema.json``: a JSON Schema (2020-12) of each event's JSON body;
- ``proto/asyncapi.yaml``: an AsyncAPI 3.0 document of every subject cdo publishes on, with the
  CloudEvent headers and the payload schemas.

    python -m shared.events.contract --write proto     # regenerate (./task schemas)
    python -m shared.events.contract --check proto     # exit 1 if the files drifted
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import msgspec
import yaml

from shared.events.base import Event
from shared.events.registry import EVENT_TYPES
from shared.events.subjects import SubjectTemplate

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID_ROOT = "https://cdo.dev/schemas/"

_TOKEN_DESCRIPTIONS = {
    "namespace": "Namespace of the ComputeDomain",
    "name": "Name of the ComputeDomain",
    "clique": 'NVLink clique id "<cluster UUID>.<clique id>"',
    "node": "Kubernetes node name",
}
_TOKEN_ESCAPING = (
    " (escaped: characters outside [A-Za-z0-9_-] are written as =XX, the UTF-8 bytes in "
    "upper-case hex, so '.' becomes =2E)"
)


def event_schema(cls: type[Event]) -> dict[str, Any]:
    """The JSON Schema of one event's body."""
    schema: dict[str, Any] = {
        "$schema": SCHEMA_DIALECT,
        "$id": f"{SCHEMA_ID_ROOT}{cls.ce_type()}.json",
        "title": cls.__name__,
        **msgspec.json.schema(cls),
    }
    return schema


def _cloudevent_headers(cls: type[Event]) -> dict[str, Any]:
    def text(description: str, **extra: Any) -> dict[str, Any]:
        return {"type": "string", "description": description, **extra}

    return {
        "type": "object",
        "required": ["ce-specversion", "ce-id", "ce-source", "ce-type", "content-type"],
        "properties": {
            "ce-specversion": text("CloudEvents version.", const="1.0"),
            "ce-id": text("Event id, unique per source."),
            "ce-source": text("Producer: cdo/<service>/<instance>."),
            "ce-type": text("Event type.", const=cls.ce_type()),
            "ce-time": text("When the event occurred (RFC 3339).", format="date-time"),
            "ce-subject": text("The entity: the subject tokens joined by '/'."),
            "content-type": text("Body encoding.", const="application/json"),
            "Nats-Msg-Id": text("Same as ce-id; JetStream drops duplicates."),
            "traceparent": text("W3C trace context of the PRODUCER span."),
            "tracestate": text("W3C trace state, when present."),
        },
    }


def _channel(template: SubjectTemplate) -> dict[str, Any]:
    address = template.template
    return {
        "address": address,
        "parameters": {
            name: {"description": _TOKEN_DESCRIPTIONS.get(name, name) + _TOKEN_ESCAPING}
            for name in template.fields
        },
    }


NATS_BINDING_VERSION = "0.1.0"
SERVERS: dict[str, Any] = {
    "cdo-nats": {
        "host": "cdo-nats.cdo-system.svc:4222",
        "protocol": "nats",
        "description": (
            "The NATS servers of deploy/kustomize (Service cdo-nats in cdo-system, JetStream on; "
            "the prod overlay adds TLS on the same port). Each cdo service publishes only its own "
            "subjects; readers subscribe (docs/deploy.md)."
        ),
    }
}


def _nats_binding(**fields: Any) -> dict[str, Any]:
    return {"nats": {**fields, "bindingVersion": NATS_BINDING_VERSION}}


def asyncapi_document() -> dict[str, Any]:
    """The AsyncAPI 3.0 document of every cdo subject."""
    _, components = msgspec.json.schema_components(
        EVENT_TYPES, ref_template="#/components/schemas/{name}"
    )
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    for cls in EVENT_TYPES:
        name = cls.__name__
        channel = _channel(cls.subject_template)
        channel["messages"] = {name: {"$ref": f"#/components/messages/{name}"}}
        snapshot = cls.snapshot_template
        if snapshot is not None:
            channel["description"] = (
                f"The latest event is also kept in KV bucket cdo-snapshots under key "
                f"{snapshot.template}."
            )
        channel["servers"] = [{"$ref": f"#/servers/{server}"} for server in SERVERS]
        channels[name] = channel
        operations[f"publish{name}"] = {
            "action": "send",
            "channel": {"$ref": f"#/channels/{name}"},
            "messages": [{"$ref": f"#/channels/{name}/messages/{name}"}],
            "bindings": _nats_binding(),
        }
        operations[f"receive{name}"] = {
            "action": "receive",
            "channel": {"$ref": f"#/channels/{name}"},
            "messages": [{"$ref": f"#/channels/{name}/messages/{name}"}],
            "summary": "Live delivery to every subscriber (no queue group), or replay from "
            "JetStream stream CDO. A publisher re-sends an event the stream has not acknowledged "
            "(same ce-id): live subscribers may get it more than once, the stream keeps one copy.",
            "bindings": _nats_binding(),
        }
        messages[name] = {
            "name": name,
            "title": cls.ce_type(),
            "summary": (cls.__doc__ or "").strip().split("\n")[0],
            "contentType": "application/json",
            "headers": _cloudevent_headers(cls),
            "payload": {"$ref": f"#/components/schemas/{name}"},
        }
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "cdo events",
            "version": "1.0.0",
            "description": (
                "Events the ComputeDomain Orchestrator publishes on NATS: CloudEvents 1.0 in "
                "binary mode (ce-* headers, JSON body). JetStream stream CDO keeps the history "
                "of cdo.v1.> (at least once: each event is re-sent until the stream acknowledges "
                "it, and Nats-Msg-Id keeps one copy); KV bucket cdo-snapshots keeps the latest "
                "state per entity. "
                "Schemas evolve additively: new fields have defaults, unknown fields are ignored."
            ),
        },
        "defaultContentType": "application/json",
        "servers": SERVERS,
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages, "schemas": components},
    }


def render() -> dict[str, str]:
    """Every generated file, relative path -> text (pure)."""
    files = {
        f"events/{cls.ce_type()}.schema.json": json.dumps(event_schema(cls), indent=2) + "\n"
        for cls in EVENT_TYPES
    }
    files["asyncapi.yaml"] = (
        "# Generated by `./task schemas` from shared/events; do not edit.\n"
        + (yaml.safe_dump(asyncapi_document(), sort_keys=False, width=100))
    )
    return files


def drifted(root: Path) -> list[str]:
    """Generated files under ``root`` that are missing or differ from what the code renders."""
    return [
        path
        for path, text in render().items()
        if not (root / path).exists() or (root / path).read_text() != text
    ]


def write(root: Path) -> None:
    for path, text in render().items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description="Generate or check proto/ event contracts.")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", type=Path, metavar="DIR")
    action.add_argument("--check", type=Path, metavar="DIR")
    args = parser.parse_args()
    if args.write:
        write(args.write)
        return
    stale = drifted(args.check)
    if stale:
        print("out of date (run ./task schemas): " + ", ".join(stale), file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
