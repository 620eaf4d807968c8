"""Health monitor: GPU, NVLink and fabric health of one node, classified for reactions.

This package holds the decisions and the NVML reading; the Kubernetes and NATS shell builds
on them.

    reading = read_node(nvml)                       # readings: blocking NVML reads
    signals = node_signals(reading, previous=last)  # derive: pure
    verdicts = [classifier.classify(s) for s in signals]

``classifier = load_classifier()`` applies the operator overrides of CDO_HEALTH_XID_OVERRIDES
and CDO_HEALTH_SIGNAL_OVERRIDES (ConfigError on a bad entry). The table and its sources are
in docs/health-classification.md.
"""

from services.health_monitor.classification import (
    DEFAULT_RULES,
    Classifier,
    classify,
    rule_key,
)
from services.health_monitor.derive import event_signal, gpu_signals, node_signals
from services.health_monitor.overrides import Override, parse_value
from services.health_monitor.readings import GpuReading, NodeReading, read_gpu, read_node
from services.health_monitor.rules import Action, Rule, Severity, Verdict, worst
from services.health_monitor.settings import (
    ENV_PREFIX,
    ClassificationSettings,
    classifier_from_settings,
    load_classifier,
)
from services.health_monitor.signals import Signal

__all__ = [
    "DEFAULT_RULES",
    "ENV_PREFIX",
    "Action",
    "ClassificationSettings",
    "Classifier",
    "GpuReading",
    "NodeReading",
    "Override",
    "Rule",
    "Severity",
    "Signal",
    "Verdict",
    "classifier_from_settings",
    "classify",
    "event_signal",
    "gpu_signals",
    "load_classifier",
    "node_signals",
    "parse_value",
    "read_gpu",
    "read_node",
    "rule_key",
    "worst",
]
