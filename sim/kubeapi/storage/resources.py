"""What the server serves: resource types, their per-kind rules, and the registry.

A ``ResourceType`` is one served group/version/resource (``apps/v1 deployments``). Several
versions of one resource share a storage bucket and a ``Strategy`` (the per-kind rules:
defaulting, status handling, validation, selectable fields, table columns); each version
brings its schema and a converter to and from the stored version. A custom resource whose CRD
converts through a webhook carries that webhook (``WebhookConversion``); its objects change
version only through ``sim.kubeapi.conversion``, which calls it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from sim.kubeapi.machinery import names
from sim.kubeapi.machinery.errors import FieldError
from sim.kubeapi.validation.schema import Schema
from sim.kubeapi.validation.shape import Shape

Obj = dict[str, Any]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")


@dataclass(frozen=True, slots=True)
class Column:
    """One column of server-side table output (``kubectl get``)."""

    name: str
    type: str
    cell: Callable[[Obj], Any]
    format: str = ""
    description: str = ""
    priority: int = 0

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


class Strategy:
    """Per-kind rules. The defaults suit a plain namespaced kind without status."""

    status_subresource = False
    has_generation = False
    allow_create_on_update = False
    allow_unconditional_update = True
    return_deleted_object = False
    name_rule: Callable[[str], list[str]] = staticmethod(names.dns1123_subdomain)
    # Extra selectable fields beyond metadata.name / metadata.namespace.
    field_getters: dict[str, Callable[[Obj], str]] = {}

    def default(self, obj: Obj) -> None:
        """Fill defaulted fields (runs on create and update, before validation)."""

    def canonical(self, obj: Obj) -> None:
        """Put fields in the form the server decodes them into (a quantity given as a number
        becomes its string) before admission sees the object: kube-apiserver hands webhooks
        the object as it decoded it, never the client's raw JSON."""

    def prepare_create(self, obj: Obj) -> None:
        """Reset what clients may not set at creation (status is cleared by the engine)."""

    def prepare_update(self, new: Obj, old: Obj) -> None:
        """Reset what clients may not change through the main endpoint."""

    def stamp_requester(self, obj: Obj, user: Mapping[str, Any]) -> None:
        """Record the authenticated requester on a new object (a CertificateSigningRequest's
        ``spec.username``); most kinds record nothing."""

    def prepare_subresource_update(self, subresource: str, new: Obj, old: Obj) -> None:
        """Reset what a write through ``status`` (or another status-like subresource, such as
        a CSR's ``approval``) may not change, after the engine took the client's status."""

    def initial_status(self, obj: Obj) -> Any:
        """The status a newly created object gets (None: no status)."""
        return None

    def validate(self, obj: Obj) -> list[FieldError]:
        return []

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return self.validate(new)

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return []

    def validate_subresource_update(self, subresource: str, new: Obj, old: Obj) -> list[FieldError]:
        """Validate a write through ``status`` or a status-like subresource (a CSR's
        ``approval``); kinds whose rules differ by subresource override this."""
        return self.validate_status_update(new, old)

    def columns(self) -> list[Column] | None:
        """Table columns; None means the default Name / Created At."""
        return None


@dataclass(frozen=True, slots=True)
class Converter:
    """Between one served version and the stored version (only apiVersion by default)."""

    to_storage: Callable[[Obj], Obj] | None = None
    from_storage: Callable[[Obj], Obj] | None = None


@dataclass(frozen=True, eq=False)
class WebhookConversion:
    """A CRD's ``spec.conversion`` with ``strategy: Webhook``."""

    client_config: dict[str, Any]
    """``url`` or ``service`` (namespace, name, port, path), and ``caBundle``."""
    review_versions: tuple[str, ...]
    """``conversionReviewVersions``, in the CRD's order of preference."""


class WebhookConversionRequiredError(RuntimeError):
    """A change of version that only the CRD's conversion webhook may make was asked of the
    in-process converter: a bug in the emulator (the caller must go through
    ``sim.kubeapi.conversion``)."""


@dataclass(frozen=True, slots=True)
class ScalePaths:
    """Where a kind keeps its replica counts; ``label_selector`` None means the built-in rule
    (``spec.selector``, a LabelSelector object)."""

    spec_replicas: tuple[str, ...] = ("spec", "replicas")
    status_replicas: tuple[str, ...] = ("status", "replicas")
    label_selector: tuple[str, ...] | None = None

    @classmethod
    def of_crd(cls, declared: dict[str, Any]) -> ScalePaths:
        """From a (validated) CRD version's ``subresources.scale``."""
        selector = declared.get("labelSelectorPath")
        return cls(
            spec_replicas=_steps(declared["specReplicasPath"]),
            status_replicas=_steps(declared["statusReplicasPath"]),
            label_selector=_steps(selector) if selector else (),
        )


def _steps(path: str) -> tuple[str, ...]:
    return tuple(part for part in path.split(".") if part)


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    strategy: Strategy
    storage: str
    storage_version: str
    storage_group: str | None = None
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[str, ...] = ()
    schema: Schema | None = None
    converter: Converter = field(default_factory=Converter)
    custom: bool = False
    # Filled for custom resources: the owning CRD's name, printer columns, selectable fields.
    crd_name: str = ""
    printer_columns: tuple[Column, ...] | None = None
    selectable: tuple[str, ...] = ()
    scale: ScalePaths | None = None
    """Where the ``scale`` subresource reads and writes replicas (None: the built-in paths)."""
    webhook: WebhookConversion | None = None
    """The conversion webhook of a CRD with ``strategy: Webhook`` (None: ``strategy: None``)."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @cached_property
    def shape(self) -> Shape:
        """Schema navigation for field ownership, memoised per type."""
        return Shape(self.schema)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def storage_api_version(self) -> str:
        group = self.group if self.storage_group is None else self.storage_group
        return f"{group}/{self.storage_version}" if group else self.storage_version

    @property
    def is_storage(self) -> bool:
        """Whether objects are stored in this type's own group and version."""
        return self.storage_api_version == self.api_version

    def selectable_fields(self) -> set[str]:
        out = {"metadata.name"}
        if self.namespaced:
            out.add("metadata.namespace")
        out.update(self.strategy.field_getters)
        out.update(self.selectable)
        return out

    def to_storage(self, obj: Obj) -> Obj:
        self._refuse_webhook_change(obj, self.storage_api_version)
        if not self.is_storage and self.converter.to_storage is not None:
            obj = self.converter.to_storage(obj)
        obj["apiVersion"] = self.storage_api_version
        return obj

    def from_storage(self, obj: Obj) -> Obj:
        self._refuse_webhook_change(obj, self.api_version)
        if not self.is_storage and self.converter.from_storage is not None:
            obj = self.converter.from_storage(obj)
        obj["apiVersion"] = self.api_version
        obj["kind"] = self.kind
        return obj

    def _refuse_webhook_change(self, obj: Obj, target: str) -> None:
        if self.webhook is not None and obj.get("apiVersion", target) != target:
            raise WebhookConversionRequiredError(
                f"{obj.get('apiVersion')} -> {target} of {self.plural}.{self.group} needs the "
                "CRD's conversion webhook"
            )


class Registry:
    """Served resource types, looked up by path segments or by kind; changes with CRDs."""

    def __init__(self) -> None:
        self._by_resource: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str, str], ResourceType] = {}
        self._group_order: list[str] = []
        self._preferred: dict[str, str] = {}
        self.generation = 0

    def add(self, rt: ResourceType, *, preferred: bool = False) -> None:
        self._by_resource[(rt.group, rt.version, rt.plural)] = rt
        self._by_kind[(rt.group, rt.version, rt.kind)] = rt
        if rt.group not in self._group_order:
            self._group_order.append(rt.group)
        if preferred or rt.group not in self._preferred:
            self._preferred[rt.group] = rt.version
        self.generation += 1

    def set_preferred(self, group: str, version: str) -> None:
        self._preferred[group] = version
        self.generation += 1

    def remove(self, group: str, version: str, plural: str) -> None:
        rt = self._by_resource.pop((group, version, plural), None)
        if rt is None:
            return
        self._by_kind.pop((group, version, rt.kind), None)
        if not any(k[0] == group for k in self._by_resource):
            self._group_order.remove(group)
            self._preferred.pop(group, None)
        elif self._preferred.get(group) == version and not self.versions(group).count(version):
            self._preferred[group] = self.versions(group)[0]
        self.generation += 1

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_resource.get((group, version, plural))

    def by_kind(self, group: str, version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((group, version, kind))

    def by_storage(self, storage: str) -> list[ResourceType]:
        return [rt for rt in self._by_resource.values() if rt.storage == storage]

    def storage_type(self, storage: str) -> ResourceType | None:
        """The type serving the stored version of a bucket, else any type serving the bucket
        (a release may serve a kind only at versions other than the one it is stored as)."""
        served = self.by_storage(storage)
        return next((rt for rt in served if rt.is_storage), served[0] if served else None)

    def groups(self) -> list[str]:
        return list(self._group_order)

    def versions(self, group: str) -> list[str]:
        found = sorted({k[1] for k in self._by_resource if k[0] == group}, key=version_priority)
        preferred = self._preferred.get(group)
        if preferred in found:
            found.remove(preferred)
            found.insert(0, preferred)
        return found

    def preferred_version(self, group: str) -> str | None:
        return self._preferred.get(group)

    def resources(self, group: str, version: str) -> list[ResourceType]:
        return [rt for k, rt in self._by_resource.items() if k[0] == group and k[1] == version]

    def all(self) -> Iterable[ResourceType]:
        return list(self._by_resource.values())

    def namespaced_storages(self) -> set[str]:
        return {rt.storage for rt in self._by_resource.values() if rt.namespaced}


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Kubernetes version ordering: GA > beta > alpha, then by number, newest first."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if match is None:
        return (3, 0, 0, version)
    major = int(match.group(1))
    stage = {"alpha": 2, "beta": 1, None: 0}[match.group(2)]
    minor = int(match.group(3) or 0)
    return (stage, -major, -minor, version)
