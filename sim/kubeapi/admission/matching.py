"""Which admission requests a rule or selector picks: shared by webhooks and admission policies.

Also what both read: the request (``AdmissionRequest`` and its AdmissionReview body) and the
stored configuration objects (``Configurations``).

A rule (``RuleWithOperations``) names operations, API groups, versions and resources, with
``resource/subresource`` forms and ``*`` wildcards, and a ``scope``; ``NamedRuleWithOperations``
(admission policies) adds ``resourceNames``. The namespace selector is tested against the
labels of the request's namespace (of the Namespace itself for namespaces; cluster-scoped
objects always match) and the object selector against the labels of the new or the old object.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sim.kubeapi.conversion.converter import Converter
from sim.kubeapi.machinery import codec, selectors
from sim.kubeapi.storage.resources import Obj, ResourceType, WebhookConversionRequiredError
from sim.kubeapi.storage.store import Store

MUTATING = "admissionregistration.k8s.io/mutatingwebhookconfigurations"
VALIDATING = "admissionregistration.k8s.io/validatingwebhookconfigurations"
WEBHOOK_STORAGES = frozenset({MUTATING, VALIDATING})
ADMIN_USER = {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}


@dataclass
class AdmissionRequest:
    """One request as admission sees it; ``obj``/``old`` are in the request's version."""

    rt: ResourceType
    operation: str
    namespace: str
    name: str
    obj: Obj | None
    old: Obj | None
    subresource: str = ""
    dry_run: bool = False
    options: Obj | None = None
    user: dict[str, Any] = field(default_factory=lambda: dict(ADMIN_USER))
    warnings: list[str] = field(default_factory=list)
    forms: dict[str, tuple[Obj | None, Obj | None]] = field(default_factory=dict)
    """``obj`` and ``old`` in other versions (by apiVersion) a webhook converted them to."""
    object_kind: tuple[str, str, str] | None = None
    """(group, version, kind) of ``obj`` when a subresource takes an object of its own kind
    (``pods/eviction`` an Eviction of policy/v1); None: the resource's kind."""


class Configurations:
    """Admission configuration objects (webhook configurations, policies, bindings) as
    stored: they change rarely and every write reads them, so each storage's objects are
    decoded once per set of versions. Treat what it returns as read-only."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._decoded: dict[str, tuple[tuple[int, ...], list[Obj]]] = {}

    def present(self, storage: str) -> bool:
        bucket = self.store.buckets.get(storage)
        return bucket is not None and bucket.count > 0

    def read(self, storage: str) -> tuple[list[Obj], bool]:
        """The objects of ``storage``, and whether they changed since the last read."""
        bucket = self.store.buckets.get(storage)
        if bucket is None or bucket.count == 0:
            return [], self._decoded.pop(storage, None) is not None
        entries = list(bucket.entries())
        versions = tuple(entry.rv for entry in entries)
        cached = self._decoded.get(storage)
        if cached is not None and cached[0] == versions:
            return cached[1], False
        self._decoded[storage] = (versions, [entry.obj() for entry in entries])
        return self._decoded[storage][1], True


def convert(obj: Obj | None, source: ResourceType, target: ResourceType) -> Any:
    """``obj`` (a copy) in ``target``'s version, converted in process; None stays None."""
    if obj is None or source is target:
        return obj
    return target.from_storage(source.to_storage(codec.copy(obj)))


def in_version(req: AdmissionRequest, target: ResourceType) -> tuple[Obj | None, Obj | None]:
    """The request's object and old object in ``target``'s version (a matched equivalent
    version); one a conversion webhook makes must have been prepared (``prepare_forms``)."""
    if target is req.rt:
        return req.obj, req.old
    prepared = req.forms.get(target.api_version)
    if prepared is not None:
        return prepared
    if target.webhook is not None:
        raise WebhookConversionRequiredError(
            f"admission of {req.rt.api_version} {req.rt.kind} as {target.api_version} was not "
            "prepared"
        )
    return convert(req.obj, req.rt, target), convert(req.old, req.rt, target)


async def prepare_forms(req: AdmissionRequest, target: ResourceType, conversion: Converter) -> None:
    """Convert the request's objects to ``target``'s version through the CRD's webhook, once
    per version, when a webhook or policy matched the request in that version."""
    if target is req.rt or target.webhook is None or target.api_version in req.forms:
        return
    obj = await conversion.converted(codec.copy(req.obj), target) if req.obj is not None else None
    old = await conversion.converted(codec.copy(req.old), target) if req.old is not None else None
    req.forms[target.api_version] = (obj, old)


def request_body(
    req: AdmissionRequest,
    target: ResourceType,
    *,
    include_objects: bool = True,
    include_options: bool | None = None,
) -> Obj:
    """The ``AdmissionRequest`` of AdmissionReview v1, with ``target`` the matched version.

    Without the objects it is the ``request`` CEL variable: webhooks' match conditions see
    it without ``options``, admission policies with them.
    """
    kind = {"group": target.group, "version": target.version, "kind": target.kind}
    request_kind = {"group": req.rt.group, "version": req.rt.version, "kind": req.rt.kind}
    if req.object_kind is not None:
        group, version, name = req.object_kind
        kind = request_kind = {"group": group, "version": version, "kind": name}
    body: Obj = {
        "uid": str(uuid.uuid4()),
        "kind": kind,
        "resource": {
            "group": target.group,
            "version": target.version,
            "resource": target.plural,
        },
        "requestKind": request_kind,
        "requestResource": {
            "group": req.rt.group,
            "version": req.rt.version,
            "resource": req.rt.plural,
        },
        "name": req.name,
        "operation": req.operation,
        "userInfo": req.user,
        "dryRun": req.dry_run,
    }
    if req.namespace:
        body["namespace"] = req.namespace
    if req.subresource:
        body["subResource"] = req.subresource
        body["requestSubResource"] = req.subresource
    if include_objects:
        body["object"], body["oldObject"] = in_version(req, target)
    if include_objects if include_options is None else include_options:
        body["options"] = req.options
    return body


def _resource_matches(resources: list[str], rt: ResourceType, subresource: str) -> bool:
    for resource in resources:
        if resource == "*/*":
            return True
        res, _, sub = resource.partition("/")
        if not sub:
            if not subresource and res in ("*", rt.plural):
                return True
        elif res in ("*", rt.plural) and sub in ("*", subresource):
            return True
    return False


def rule_matches(rule: Obj, req: AdmissionRequest, rt: ResourceType) -> bool:
    """Whether ``rule`` picks ``req`` seen as resource type ``rt`` (one of its versions)."""
    ops = rule.get("operations") or []
    if "*" not in ops and req.operation not in ops:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and rt.group not in groups:
        return False
    versions = rule.get("apiVersions") or []
    if "*" not in versions and rt.version not in versions:
        return False
    scope = rule.get("scope", "*")
    if scope == "Cluster" and rt.namespaced:
        return False
    if scope == "Namespaced" and not rt.namespaced:
        return False
    names = rule.get("resourceNames") or []
    if names and req.name not in names:
        return False
    return _resource_matches(rule.get("resources") or [], rt, req.subresource)


def _labels(obj: Obj | None) -> dict[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def selectors_match(
    namespace_selector: Any,
    object_selector: Any,
    req: AdmissionRequest,
    namespace_labels: Callable[[str], dict[str, str] | None],
) -> bool:
    """Both label selectors (``LabelSelector`` objects; empty or None matches all)."""
    ns_selector = selectors.from_label_selector_object(namespace_selector or {})
    if not ns_selector.empty:
        if req.rt.storage == "namespaces":
            labels = _labels(req.obj or req.old)
        elif req.rt.namespaced:
            labels = namespace_labels(req.namespace) or {}
        else:
            labels = None  # cluster-scoped objects are not in a namespace to select
        if labels is not None and not ns_selector.matches(labels):
            return False
    obj_selector = selectors.from_label_selector_object(object_selector or {})
    if not obj_selector.empty:
        candidates = [o for o in (req.obj, req.old) if o is not None]
        if not any(obj_selector.matches(_labels(o)) for o in candidates):
            return False
    return True
