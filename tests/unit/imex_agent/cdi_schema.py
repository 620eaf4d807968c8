"""What a CDI spec of the version the agent writes (0.6.0) must hold, as a JSON Schema.

Written from the Container Device Interface specification (SPEC.md of
cncf-tags/container-device-interface): the required top-level fields, the kind's
``vendor/class`` form and its character sets, device names, and the device-node fields that
0.5.0 and later allow (``hostPath`` since 0.5.0).
"""

from __future__ import annotations

from typing import Any

VENDOR = r"[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?"
CLASS = r"[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?"

DEVICE_NODE: dict[str, Any] = {
    "type": "object",
    "required": ["path"],
    "additionalProperties": False,
    "properties": {
        "path": {"type": "string", "pattern": "^/"},
        "hostPath": {"type": "string", "pattern": "^/"},
        "type": {"enum": ["b", "c", "u", "p"]},
        "major": {"type": "integer", "minimum": 0},
        "minor": {"type": "integer", "minimum": 0},
        "fileMode": {"type": "integer"},
        "permissions": {"type": "string", "pattern": "^[rwm]+$"},
        "uid": {"type": "integer"},
        "gid": {"type": "integer"},
    },
}

CONTAINER_EDITS: dict[str, Any] = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": False,
    "properties": {
        "env": {"type": "array", "items": {"type": "string", "pattern": "^[^=]+=.*$"}},
        "deviceNodes": {"type": "array", "items": DEVICE_NODE},
        "hooks": {"type": "array"},
        "mounts": {"type": "array"},
        "intelRdt": {"type": "object"},
        "additionalGids": {"type": "array"},
    },
}

CDI_SPEC_0_6: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["cdiVersion", "kind", "devices"],
    "additionalProperties": False,
    "properties": {
        "cdiVersion": {"const": "0.6.0"},
        "kind": {"type": "string", "pattern": f"^{VENDOR}/{CLASS}$"},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "devices": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["name", "containerEdits"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "pattern": "^[a-zA-Z0-9][a-zA-Z0-9_.:-]*$"},
                    "annotations": {"type": "object"},
                    "containerEdits": CONTAINER_EDITS,
                },
            },
        },
        "containerEdits": CONTAINER_EDITS,
    },
}
