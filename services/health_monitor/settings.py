"""Settings of the health monitor, read from CDO_HEALTH_* environment variables.

    python -m services.health_monitor --settings     # every variable, default and meaning

Classification overrides (ClassificationSettings) and the monitor's own pacing
(MonitorSettings) share the prefix. The runtime's CDO_* settings (NATS, probes, logging,
tracing) come on top; see docs/runtime.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from msgspec import Meta

from services.health_monitor.classification import DEFAULT_RULES, Classifier
from services.health_monitor.overrides import (
    apply_overrides,
    parse_signal_overrides,
    parse_xid_overrides,
)
from shared.kube.informer import InformerSettings
from shared.settings import Settings, describe_settings, env_name, load_settings

ENV_PREFIX = "CDO_HEALTH_"


class ClassificationSettings(Settings, frozen=True, kw_only=True):
    xid_overrides: Annotated[
        tuple[str, ...],
        Meta(
            description="XID classification overrides, XID[-LAST]=ignore|SEVERITY[:ACTION], "
            "e.g. 79=warning:reset_gpu,13=ignore"
        ),
    ] = ()
    signal_overrides: Annotated[
        tuple[str, ...],
        Meta(
            description="classification overrides for other rules, RULE=ignore|SEVERITY[:ACTION]"
            ", e.g. nvlink.down=fatal,nvml.unavailable=warning:none"
        ),
    ] = ()


def classifier_from_settings(
    settings: ClassificationSettings, *, prefix: str = ENV_PREFIX
) -> Classifier:
    """The default table with the settings' overrides (XID entries first, then signals)."""
    xid = parse_xid_overrides(settings.xid_overrides, variable=env_name(prefix, ("xid_overrides",)))
    signal = parse_signal_overrides(
        settings.signal_overrides,
        variable=env_name(prefix, ("signal_overrides",)),
        known=DEFAULT_RULES,
    )
    return Classifier(apply_overrides(DEFAULT_RULES, {**xid, **signal}))


def load_classifier(
    environ: Mapping[str, str] | None = None, *, prefix: str = ENV_PREFIX
) -> Classifier:
    """Read ClassificationSettings from the environment and build the classifier."""
    settings = load_settings(ClassificationSettings, prefix=prefix, environ=environ)
    return classifier_from_settings(settings, prefix=prefix)


class ServiceSettings(Settings, frozen=True, kw_only=True):
    """Which node the monitor process watches and how it reaches the API."""

    node_name: Annotated[
        str, Meta(description="This node's name (downward API spec.nodeName).", min_length=1)
    ]
    kubeconfig: Annotated[
        str,
        Meta(
            description="Path of a kubeconfig; empty: KUBECONFIG, else the pod's service "
            "account, else ~/.kube/config."
        ),
    ] = ""
    request_timeout_s: Annotated[float, Meta(description="Timeout of one API request.", gt=0)] = (
        30.0
    )
    pod_resources_socket: Annotated[
        str,
        Meta(
            description="The kubelet's PodResources socket, to find the pods holding a faulted "
            "device-plugin GPU (empty: faults of such GPUs taint the node)."
        ),
    ] = "/var/lib/kubelet/pod-resources/kubelet.sock"


class BreakerSettings(Settings, frozen=True, kw_only=True):
    """The node's side of the circuit breaker on NoExecute taints (docs/health-monitor.md,
    "Circuit breaker"); the caps are the clique allocator's (CDO_CLIQUE_ALLOCATOR_BREAKER_*)."""

    enabled: Annotated[
        bool,
        Meta(
            description="Claim NoExecute from the circuit breaker (the clique allocator's "
            "leader answers, capping the share of a clique's and of the cluster's nodes that "
            "carry it); past the cap a fatal fault only reports (NoSchedule, condition, "
            "Event). Off: every fatal fault taints NoExecute."
        ),
    ] = True
    claim_timeout_s: Annotated[
        float,
        Meta(
            description="An answer to a claim for NoExecute is acted on only within half of "
            "this after the claim; without one the claim is made again, and the node carries "
            "NoSchedule until an answer comes.",
            gt=0,
        ),
    ] = 30.0


class MonitorSettings(Settings, frozen=True, kw_only=True):
    """How the monitor of one node reads NVML, paces its reactions and writes its Node."""

    field_manager: Annotated[
        str, Meta(description="fieldManager of the monitor's writes.", min_length=1)
    ] = "cdo-health-monitor"
    read_interval_s: Annotated[
        float,
        Meta(
            description="Read fabric, NVLink, ECC, row remapping and recovery action this often "
            "(XIDs arrive as events, between readings).",
            gt=0,
        ),
    ] = 1.0
    event_wait_s: Annotated[
        float,
        Meta(
            description="Longest single wait for an NVML event in the worker thread (bounds "
            "how long stopping takes; an event ends the wait at once).",
            gt=0,
        ),
    ] = 1.0
    hold_down_s: Annotated[
        float,
        Meta(
            description="A taint is removed, and recovery announced, only after the node has "
            "been without fault for this long.",
            ge=0,
        ),
    ] = 30.0
    xid_latch_s: Annotated[
        float,
        Meta(
            description="An XID or a rise of the uncorrected ECC count counts as an active "
            "fault for this long after it was last reported.",
            gt=0,
        ),
    ] = 300.0
    event_burst: Annotated[
        int, Meta(description="Fault events the node may publish in a burst.", ge=1)
    ] = 10
    event_rate_per_s: Annotated[
        float,
        Meta(
            description="Steady rate of fault events once a burst is spent; the rest are "
            "counted as suppressed (escalations and recoveries are never suppressed).",
            ge=0,
        ),
    ] = 0.2
    nvml_retry_s: Annotated[
        float, Meta(description="First pause before initialising NVML again.", gt=0)
    ] = 1.0
    nvml_retry_max_s: Annotated[
        float, Meta(description="Longest pause between NVML initialisation attempts.", gt=0)
    ] = 30.0
    write_retry_s: Annotated[
        float, Meta(description="First pause before writing the Node again after a failure.", gt=0)
    ] = 0.5
    write_retry_max_s: Annotated[
        float, Meta(description="Longest pause between failed writes of the Node.", gt=0)
    ] = 30.0
    conflict_retries: Annotated[
        int,
        Meta(description="Re-reads of the Node after a write conflict (409), per write.", ge=0),
    ] = 5
    kube_events: Annotated[
        bool, Meta(description="Record Kubernetes Events on the Node for faults and recoveries.")
    ] = True
    per_gpu_faults: Annotated[
        bool,
        Meta(
            description="A fault confined to one GPU affects only the pods holding it (device "
            "taint or eviction) instead of tainting the node (docs/health-classification.md)."
        ),
    ] = True
    informer: InformerSettings = InformerSettings()
    breaker: BreakerSettings = BreakerSettings()


def load_service_settings(
    environ: Mapping[str, str] | None = None, *, prefix: str = ENV_PREFIX
) -> ServiceSettings:
    """Read ServiceSettings from CDO_HEALTH_* variables; ConfigError names a bad one."""
    return load_settings(ServiceSettings, prefix=prefix, environ=environ)


def load_monitor_settings(
    environ: Mapping[str, str] | None = None, *, prefix: str = ENV_PREFIX
) -> MonitorSettings:
    """Read MonitorSettings from CDO_HEALTH_* variables; ConfigError names a bad one."""
    return load_settings(MonitorSettings, prefix=prefix, environ=environ)


def describe(*, prefix: str = ENV_PREFIX) -> str:
    """Every CDO_HEALTH_* variable with its default and meaning, one per line."""
    rows = [
        row
        for settings in (ServiceSettings, MonitorSettings, ClassificationSettings)
        for row in describe_settings(settings, prefix=prefix)
    ]
    shown = [(name, default or "(required)", doc) for name, default, doc in rows]
    width = max(len(name) for name, _default, _doc in shown)
    value_width = max(len(default) for _name, default, _doc in shown)
    return "\n".join(
        f"{name:<{width}}  {default:<{value_width}}  {doc}" for name, default, doc in shown
    )
