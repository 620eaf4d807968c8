"""The key a reconcile loop queues: which object, never what happened to it.

``ObjectKey`` is ``namespace/name`` for a namespaced object and ``name`` for a cluster-scoped
one (empty namespace), the same text form kubectl and client-go use. It is a frozen, hashable,
ordered value, so it can sit in sets, dicts and the work queue and sort deterministically.
"""

from __future__ import annotations

import msgspec

from shared.kube.objects import metadata_str


class ObjectKey(msgspec.Struct, frozen=True, kw_only=True, order=True):
    """One API object of the kind a loop owns; ``namespace`` is "" when cluster-scoped."""

    namespace: str = ""
    name: str

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("an object key needs a name")
        # A slash would make the text form ambiguous; Kubernetes forbids it in both anyway.
        if "/" in self.name or "/" in self.namespace:
            raise ValueError(f"'/' is not allowed in an object key: {self.namespace}/{self.name}")

    @classmethod
    def parse(cls, text: str) -> ObjectKey:
        """``"ns/name"`` or ``"name"`` (cluster-scoped) into a key; ValueError otherwise."""
        namespace, slash, name = text.rpartition("/")
        if slash and not namespace:
            raise ValueError(f"object key {text!r} has an empty namespace")
        return cls(namespace=namespace, name=name)

    @property
    def cluster_scoped(self) -> bool:
        return not self.namespace

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def key_of(obj: object) -> ObjectKey:
    """The key of an API object, from its ``metadata.namespace`` and ``metadata.name``."""
    return ObjectKey(namespace=metadata_str(obj, "namespace"), name=metadata_str(obj, "name"))
