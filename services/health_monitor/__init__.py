"""Health monitor: GPU, NVLink and fabric health of one node, and the node's reactions to it.

The decisions are pure; the I/O lives in thin shells around them (docs/health-monitor.md):

    reading = read_node(nvml)                       # readings: blocking NVML reads
    signals = node_signals(reading, previous=last)  # derive: pure
    verdicts = [classifier.classify(s) for s in signals]
    faults = [fault_of(s, v) for s, v in zip(signals, verdicts)]     # faults: pure
    step = advance(episode, faults=faults, now=now, hold_down_s=30)  # state: pure
    step.announcements   # AnnounceFaults / AnnounceRecovery: what the announcer publishes
    health = desired_health(faults=faults, clique=clique, episode=step.episode, ...)
    capped = breaker_step(wants=health.reaction, ...)  # breaker: pure, the circuit breaker
    health = desired_health(..., cap=capped.cap, withheld=...)

:class:`HealthMonitor` (``monitor``) runs all of it for one node, in three rooms: the
:class:`NvmlWatcher` (``watcher``) turns NVML readings and XID events into observations, the
loop over the Node informer evaluates them and writes the Node's taint, condition and clique
labels (``writer``), and the :class:`FaultAnnouncer` (``announcer``) publishes what
``advance`` returns to announce, rate-limited, one trace per episode. The circuit breaker's
claim and its answer are on the node's own Node (shared/breaker; the clique allocator's leader
answers), read through the monitor's Node informer (``fleet``).
``classifier = load_classifier()`` applies the operator overrides of CDO_HEALTH_XID_OVERRIDES
and CDO_HEALTH_SIGNAL_OVERRIDES (ConfigError on a bad entry). The table and its sources are
in docs/health-classification.md.
"""

from services.health_monitor.announcer import FaultAnnouncer, Publisher
from services.health_monitor.breaker import BreakerStep, breaker_step
from services.health_monitor.classification import (
    DEFAULT_RULES,
    Classifier,
    classify,
    rule_key,
)
from services.health_monitor.derive import event_signal, gpu_signals, node_signals
from services.health_monitor.faults import Fault, Reaction, fault_of
from services.health_monitor.monitor import HealthMonitor
from services.health_monitor.overrides import Override, parse_value
from services.health_monitor.readings import GpuReading, NodeReading, read_gpu, read_node
from services.health_monitor.rules import Action, Rule, Severity, Verdict, worst
from services.health_monitor.settings import (
    ENV_PREFIX,
    BreakerSettings,
    ClassificationSettings,
    MonitorSettings,
    ServiceSettings,
    classifier_from_settings,
    load_classifier,
)
from services.health_monitor.signals import Signal
from services.health_monitor.state import (
    AnnounceFaults,
    Announcement,
    AnnounceRecovery,
    ConditionState,
    Episode,
    NodeHealth,
    Step,
    advance,
    desired_health,
)
from services.health_monitor.watcher import NvmlWatcher

__all__ = [
    "DEFAULT_RULES",
    "ENV_PREFIX",
    "Action",
    "AnnounceFaults",
    "AnnounceRecovery",
    "Announcement",
    "BreakerSettings",
    "BreakerStep",
    "ClassificationSettings",
    "Classifier",
    "ConditionState",
    "Episode",
    "Fault",
    "FaultAnnouncer",
    "GpuReading",
    "HealthMonitor",
    "MonitorSettings",
    "NodeHealth",
    "NodeReading",
    "NvmlWatcher",
    "Override",
    "Publisher",
    "Reaction",
    "Rule",
    "ServiceSettings",
    "Severity",
    "Signal",
    "Step",
    "Verdict",
    "advance",
    "breaker_step",
    "classifier_from_settings",
    "classify",
    "desired_health",
    "event_signal",
    "fault_of",
    "gpu_signals",
    "load_classifier",
    "node_signals",
    "parse_value",
    "read_gpu",
    "read_node",
    "rule_key",
    "worst",
]
