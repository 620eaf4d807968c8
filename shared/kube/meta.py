"""The parts of Kubernetes objects every controller reads, as msgspec Structs.

Services decode API responses straight into Structs of the fields they use (``rename="camel"``
maps snake_case attributes to the API's camelCase names); unknown fields are ignored, so a Struct
stays small however large the object. ``KubeObject`` is the base: anything with ``metadata``.
"""

from __future__ import annotations

from datetime import datetime

import msgspec


class OwnerReference(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    finalizers: tuple[str, ...] = ()
    owner_references: tuple[OwnerReference, ...] = ()


class KubeObject(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Any API object; subclasses add the spec and status fields they read."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)

    @property
    def key(self) -> str:
        """``namespace/name`` or ``name``, the form work queues and caches use."""
        meta = self.metadata
        return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


class ListMeta(msgspec.Struct, frozen=True, kw_only=True, rename={"continue_": "continue"}):
    resource_version: str = msgspec.field(default="", name="resourceVersion")
    continue_: str = ""


class StatusDetails(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    name: str = ""
    kind: str = ""
    retry_after_seconds: int = 0


class Status(msgspec.Struct, frozen=True, kw_only=True):
    """The API's error (and some success) response body."""

    status: str = ""
    message: str = ""
    reason: str = ""
    code: int = 0
    details: StatusDetails | None = None


class RawWatchEvent(msgspec.Struct, frozen=True):
    """One line of a watch stream; ``object`` is decoded later by the informer's type."""

    type: str
    object: msgspec.Raw
