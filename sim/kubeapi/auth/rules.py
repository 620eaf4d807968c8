"""Does one RBAC PolicyRule cover a request? Pure functions, the RBAC authorizer's matching.

- verbs: the request's verb or ``*``;
- apiGroups: the request's group or ``*``;
- resources: ``*``, the resource (only without a subresource), ``resource/subresource`` or
  ``*/subresource`` (``pods`` alone does not cover ``pods/status``, nor ``pods/*`` anything);
- resourceNames: empty means any name; otherwise the request must name one of them (so a
  list, a watch of a collection, or a create never matches a rule with names);
- nonResourceURLs: the exact path, ``*``, or a prefix ending in ``*``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sim.kubeapi.auth.attributes import Attributes

ALL = "*"


def _has(values: Any, wanted: str) -> bool:
    return isinstance(values, list) and (wanted in values or ALL in values)


def verb_matches(rule: Mapping[str, Any], verb: str) -> bool:
    return _has(rule.get("verbs"), verb)


def group_matches(rule: Mapping[str, Any], group: str) -> bool:
    return _has(rule.get("apiGroups"), group)


def resource_matches(rule: Mapping[str, Any], resource: str, subresource: str) -> bool:
    resources = rule.get("resources")
    if not isinstance(resources, list):
        return False
    combined = f"{resource}/{subresource}" if subresource else resource
    for candidate in resources:
        if candidate in (ALL, combined):
            return True
        if not subresource:
            continue
        if candidate == f"{ALL}/{subresource}":
            return True
    return False


def name_matches(rule: Mapping[str, Any], name: str) -> bool:
    names = rule.get("resourceNames")
    if not names:
        return True
    return bool(name) and isinstance(names, list) and name in names


def url_matches(rule: Mapping[str, Any], path: str) -> bool:
    urls = rule.get("nonResourceURLs")
    if not isinstance(urls, list):
        return False
    for url in urls:
        if url in (ALL, path):
            return True
        if isinstance(url, str) and url.endswith(ALL) and path.startswith(url[:-1]):
            return True
    return False


def rule_allows(rule: Any, attrs: Attributes) -> bool:
    if not isinstance(rule, Mapping) or not verb_matches(rule, attrs.verb):
        return False
    if not attrs.resource_request:
        return url_matches(rule, attrs.path)
    return (
        group_matches(rule, attrs.group)
        and resource_matches(rule, attrs.resource, attrs.subresource)
        and name_matches(rule, attrs.name)
    )


def any_allows(rules: Iterable[Any], attrs: Attributes) -> bool:
    return any(rule_allows(rule, attrs) for rule in rules)
