"""What ``cdo preflight`` read from the cluster and NATS, as data the checks judge.

:mod:`cli.preflight.gather` fills it (the only module that talks to anything);
:mod:`cli.preflight.checks` judges it without I/O, so every check is a table test.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from shared.crds.names import IMEX_READY_CONDITION


class ApiFacts(msgspec.Struct, frozen=True, kw_only=True):
    """The API server: where, whether it answered, its release."""

    where: str = ""
    """The kubeconfig (or service account) it was reached through, for messages."""
    problem: str = ""
    """Why there is no answer ("" when it answered)."""
    git_version: str = ""
    release: tuple[int, int] | None = None
    """(major, minor) from ``/version``; None when it could not be read."""


class Condition(msgspec.Struct, frozen=True, kw_only=True):
    status: str
    reason: str = ""
    message: str = ""


class NodeFacts(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    gpus: int = 0
    """Allocatable ``nvidia.com/gpu`` (NVIDIA's device plugin)."""
    conditions: dict[str, Condition] = msgspec.field(default_factory=dict)


class GpuSlice(msgspec.Struct, frozen=True, kw_only=True):
    """A ResourceSlice of NVIDIA's GPU DRA driver (``gpu.nvidia.com``)."""

    node: str
    devices: int


class Workload(msgspec.Struct, frozen=True, kw_only=True):
    """One of cdo's Deployments, DaemonSets or StatefulSets in its namespace."""

    kind: str
    name: str
    found: bool = False
    desired: int = 0
    ready: int = 0


class WebhookFacts(msgspec.Struct, frozen=True, kw_only=True):
    """The allocator's pod webhook: registered, answering, and its serving certificate."""

    configured: bool = False
    failure_policy: str = ""
    gate_policy: bool = False
    """The ValidatingAdmissionPolicy ``cdo-pod-gate`` and its binding exist: a domain's pod
    the webhook did not gate is refused."""
    probe: str = "not_probed"
    """How the webhook was found answering: ``admitted`` (a dry-run pod went through it,
    failurePolicy Fail), ``answered`` (it answered an AdmissionReview sent to its URL),
    ``endpoints`` (its Service has ready endpoints); or ``failed``, ``forbidden``,
    ``not_probed``."""
    probe_message: str = ""
    certificate_source: str = ""
    """Where the serving certificate was read: a Secret, or the endpoint itself."""
    certificate_expires: datetime | None = None
    certificate_problem: str = ""


class NatsFacts(msgspec.Struct, frozen=True, kw_only=True):
    url: str
    url_from: str
    problem: str = ""
    """Why it did not answer ("" when it did)."""


class Facts(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the checks look at; fields after ``api`` stay empty when it did not answer."""

    api: ApiFacts
    namespace: str = "cdo-system"
    """cdo's namespace (``--cdo-namespace``)."""
    served: dict[str, list[str]] = msgspec.field(default_factory=dict)
    """Discovery: ``<group>/<version>`` -> the resources it serves (empty: not served)."""
    nodes: list[NodeFacts] = msgspec.field(default_factory=list)
    gpu_slices: list[GpuSlice] = msgspec.field(default_factory=list)
    nvidia_device_classes: list[str] = msgspec.field(default_factory=list)
    """NVIDIA's ComputeDomain DeviceClasses that exist."""
    workloads: list[Workload] = msgspec.field(default_factory=list)
    webhook: WebhookFacts = msgspec.field(default_factory=WebhookFacts)
    nats: NatsFacts | None = None
    """None: not asked (cdo is not installed)."""
    unreadable: list[str] = msgspec.field(default_factory=list)
    """Reads the API server refused (no permission, say), one line each."""

    @property
    def installed(self) -> bool:
        """Whether any part of cdo is there: a workload, the webhook, an agent's condition."""
        return (
            any(workload.found for workload in self.workloads)
            or self.webhook.configured
            or any(IMEX_READY_CONDITION in node.conditions for node in self.nodes)
        )
