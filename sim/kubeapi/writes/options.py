"""Values shared by the write path: options, results, and its constants."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sim.kubeapi.storage.resources import Obj

CRD_STORAGE = "apiextensions.k8s.io/customresourcedefinitions"
PROTECTED_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
MAX_RETRIES = 8

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """Query options of a write (dryRun, fieldManager, fieldValidation) and the caller
    (its user agent and, when requests are authenticated, the ``userInfo`` webhooks see)."""

    dry_run: bool = False
    field_manager: str = ""
    field_validation: str = "Warn"
    user_agent: str = ""
    user: dict[str, Any] | None = None

    @property
    def manager(self) -> str:
        if self.field_manager:
            return self.field_manager
        agent = self.user_agent.split("/", 1)[0]
        return agent or "unknown"


@dataclass(frozen=True, slots=True)
class DeleteOptions:
    grace_period_seconds: int | None = None
    propagation_policy: str | None = None
    orphan_dependents: bool | None = None
    precondition_uid: str | None = None
    precondition_rv: str | None = None
    dry_run: bool = False


@dataclass
class Result:
    """A write's response body (in the request's version), HTTP code and warnings."""

    body: Obj
    code: int = 200
    warnings: list[str] = field(default_factory=list)


class ConcurrentChangeError(Exception):
    """The object changed while webhooks were running; recompute."""
