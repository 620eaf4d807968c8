"""The audit log of admission policies' ``Audit`` action, as kube-apiserver's log backend writes it.

With ``ServerConfig.audit_log`` set, every request for which a ValidatingAdmissionPolicy
binding with ``validationActions: [..., Audit]`` recorded a failed validation becomes one line
of that file: an ``audit.k8s.io/v1`` Event at level ``Metadata`` (the JSON format of
kube-apiserver's ``--audit-log-path``), carrying the request's user, its object and the
``validation.policy.admission.k8s.io/validation_failure`` annotation with every failure of the
request. A request a policy also denied carries that denial as its ``responseStatus``; one it
let through has none, since admission does not know how the request ends. Other requests are
not logged (as under an audit policy that logs nothing else), and the line has no
``requestURI``, ``sourceIPs`` or ``userAgent``, which admission does not see.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sim.kubeapi.admission.matching import AdmissionRequest
from sim.kubeapi.admission.policies import AUDIT_KEY, AuditRecord
from sim.kubeapi.machinery.errors import ApiError

VERBS = {"CREATE": "create", "UPDATE": "update", "DELETE": "delete", "CONNECT": "create"}


def audit_event(
    req: AdmissionRequest,
    records: Sequence[AuditRecord],
    denied: ApiError | None,
    *,
    now: datetime,
) -> dict[str, Any]:
    """The audit Event of one request whose policies recorded ``records`` (pure)."""
    failures = [json.loads(record.annotation()[1])[0] for record in records]
    stamp = now.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    event: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": str(uuid.uuid4()),
        "stage": "ResponseComplete",
        "verb": VERBS.get(req.operation, req.operation.lower()),
        "user": dict(req.user),
        "objectRef": {
            "resource": req.rt.plural,
            "namespace": req.namespace,
            "name": req.name,
            "apiGroup": req.rt.group,
            "apiVersion": req.rt.version,
            "subresource": req.subresource,
        },
        "requestReceivedTimestamp": stamp,
        "stageTimestamp": stamp,
        "annotations": {AUDIT_KEY: json.dumps(failures, separators=(",", ":"))},
    }
    if denied is not None:
        event["responseStatus"] = {
            "metadata": {},
            "status": "Failure",
            "message": denied.message,
            "reason": denied.reason,
            "code": denied.code,
        }
    return event


class AuditLog:
    """Appends audit Events to one file, a JSON line each."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(
        self, req: AdmissionRequest, records: Sequence[AuditRecord], denied: ApiError | None
    ) -> None:
        event = audit_event(req, records, denied, now=datetime.now(UTC))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as log:
            log.write(json.dumps(event, separators=(",", ":")) + "\n")
