"""What each user was allowed and refused, as the authorizer decided it: the access record.

Allowed requests are kept as the set of distinct (verb, API group, resource, subresource)
per user (and the verb and path of allowed non-resource requests); refused ones each with its
namespace, name and the 403's message, the first :data:`DENIED_KEPT` per user and a count of
all. :meth:`AccessUsage.snapshot` is the JSON document the emulator writes
(``ServerConfig.access_record``)::

    {"users": {"system:serviceaccount:cdo-system:cdo-imex-agent": {
        "allowed": [{"verb": "patch", "group": "", "resource": "nodes",
                     "subresource": "status", "path": ""}, ...],
        "denied": [{"verb": ..., "group": ..., "resource": ..., "subresource": ...,
                    "path": ..., "namespace": ..., "name": ..., "message": ...}],
        "denied_total": 0}}}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sim.kubeapi.auth.attributes import Attributes

DENIED_KEPT = 100

Key = tuple[str, str, str, str, str]
"""(verb, group, resource, subresource, path): path only for non-resource requests."""


def _key(attrs: Attributes) -> Key:
    if not attrs.resource_request:
        return (attrs.verb, "", "", "", attrs.path)
    return (attrs.verb, attrs.group, attrs.resource, attrs.subresource, "")


def _entry(key: Key) -> dict[str, str]:
    verb, group, resource, subresource, path = key
    return {
        "verb": verb,
        "group": group,
        "resource": resource,
        "subresource": subresource,
        "path": path,
    }


@dataclass
class _UserUsage:
    allowed: set[Key] = field(default_factory=set)
    denied: list[dict[str, str]] = field(default_factory=list)
    denied_total: int = 0


class AccessUsage:
    """The access record of one server; ``version`` grows with every change."""

    def __init__(self) -> None:
        self._users: dict[str, _UserUsage] = {}
        self.version = 0

    def allowed(self, attrs: Attributes) -> None:
        usage = self._users.setdefault(attrs.user.name, _UserUsage())
        key = _key(attrs)
        if key not in usage.allowed:
            usage.allowed.add(key)
            self.version += 1

    def denied(self, attrs: Attributes, message: str) -> None:
        usage = self._users.setdefault(attrs.user.name, _UserUsage())
        usage.denied_total += 1
        if len(usage.denied) < DENIED_KEPT:
            usage.denied.append(
                {
                    **_entry(_key(attrs)),
                    "namespace": attrs.namespace,
                    "name": attrs.name,
                    "message": message,
                }
            )
        self.version += 1

    def resume(self, snapshot: dict[str, Any]) -> None:
        """Go on from a record this server wrote before it was restarted."""
        for user, usage in (snapshot.get("users") or {}).items():
            mine = self._users.setdefault(user, _UserUsage())
            for entry in usage.get("allowed") or ():
                mine.allowed.add(
                    (
                        entry["verb"],
                        entry["group"],
                        entry["resource"],
                        entry["subresource"],
                        entry["path"],
                    )
                )
            mine.denied.extend((usage.get("denied") or [])[: DENIED_KEPT - len(mine.denied)])
            mine.denied_total += int(usage.get("denied_total") or 0)
        self.version += 1

    def snapshot(self) -> dict[str, Any]:
        return {
            "users": {
                user: {
                    "allowed": [_entry(key) for key in sorted(usage.allowed)],
                    "denied": list(usage.denied),
                    "denied_total": usage.denied_total,
                }
                for user, usage in sorted(self._users.items())
            }
        }
