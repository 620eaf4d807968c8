"""The published OpenAPI schemas of the built-in kinds.

They come from the JSON Schema export of the Kubernetes OpenAPI document that the
``kubernetes-validate`` distribution ships (one directory per Kubernetes minor version; the
emulated release's is used, else the newest). The definitions carry everything the emulator
needs beyond field types: list types and map keys (server-side apply), patch strategies and
merge keys (strategic merge patch) and the group/version/kind of each top-level type.

When the distribution is not installed, built-in kinds are served without pruning and
with generic OpenAPI entries.
"""

from __future__ import annotations

import importlib.util
import re
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from sim.kubeapi.validation.schema import Node, Resolver, Schema


def _schema_dir(minor: int | None) -> Path | None:
    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(next(iter(spec.submodule_search_locations))) / "kubernetes-json-schema"
    if not base.is_dir():
        return None

    def version_key(path: Path) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", path.name))

    candidates = [p for p in base.iterdir() if p.name.endswith("-local")]
    if not candidates:
        return None
    chosen = base / f"v1.{minor}.0-local"
    return chosen if chosen in candidates else max(candidates, key=version_key)


class BuiltinSchemas:
    """Definitions by name and by (group, version, kind)."""

    def __init__(self, definitions: dict[str, Any]) -> None:
        self.definitions: dict[str, Any] = definitions
        self.resolver = Resolver(definitions)
        self.by_gvk: dict[tuple[str, str, str], str] = {}
        for name, node in definitions.items():
            for gvk in node.get("x-kubernetes-group-version-kind") or ():
                key = (gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))
                # The same Go type can be registered under several groups (Event); keep the
                # definition whose package matches the group.
                if key not in self.by_gvk or _prefers(name, key[0]):
                    self.by_gvk[key] = name

    def definition_name(self, group: str, version: str, kind: str) -> str | None:
        return self.by_gvk.get((group, version, kind))

    def node(self, group: str, version: str, kind: str) -> Node | None:
        name = self.definition_name(group, version, kind)
        return self.definitions.get(name) if name else None

    def schema(self, group: str, version: str, kind: str) -> Schema | None:
        node = self.node(group, version, kind)
        if node is None:
            return None
        return Schema(node, resolver=self.resolver, mode="builtin")


def _prefers(definition: str, group: str) -> bool:
    short = group.split(".", 1)[0] if group else "core"
    return f".{short}." in definition


def load(minor: int | None = None) -> BuiltinSchemas:
    """The schemas of Kubernetes 1.``minor`` (the newest shipped when None or not shipped)."""
    return _load(_schema_dir(minor))


@cache
def _load(directory: Path | None) -> BuiltinSchemas:
    if directory is None:
        return BuiltinSchemas({})
    raw = (directory / "_definitions.json").read_bytes()
    doc = msgspec.json.decode(raw)
    return BuiltinSchemas(doc.get("$defs") or doc.get("definitions") or {})
