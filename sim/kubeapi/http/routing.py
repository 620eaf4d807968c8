"""Parsing request paths into what they address, the way the API server's RequestInfo does."""

from __future__ import annotations

from dataclasses import dataclass

NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True, slots=True)
class ResourcePath:
    group: str
    version: str
    resource: str = ""
    namespace: str | None = None
    name: str | None = None
    subresource: str = ""
    legacy_watch: bool = False

    @property
    def is_discovery(self) -> bool:
        return not self.resource


def parse(path: str) -> ResourcePath | None:
    """``/api/v1/namespaces/ns/pods/p/status`` -> its parts; None when not an API path."""
    parts = [p for p in path.split("/") if p]
    if not parts:
        return None
    if parts[0] == "api":
        if len(parts) < 2:
            return None
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis":
        if len(parts) < 3:
            return None
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if not rest:
        return ResourcePath(group, version)
    legacy_watch = False
    if rest[0] == "watch":
        legacy_watch = True
        rest = rest[1:]
        if not rest:
            return None
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) > 1:
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            namespace = rest[1]
            rest = rest[2:]
        else:
            return ResourcePath(
                group,
                version,
                "namespaces",
                None,
                rest[1],
                rest[2] if len(rest) > 2 else "",
                legacy_watch,
            )
    if len(rest) > 3:
        return None
    return ResourcePath(
        group,
        version,
        rest[0],
        namespace,
        rest[1] if len(rest) > 1 else None,
        rest[2] if len(rest) > 2 else "",
        legacy_watch,
    )
