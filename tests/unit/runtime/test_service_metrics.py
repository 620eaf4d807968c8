"""A service's registry describes its build and its process; a bare one does not."""

from __future__ import annotations

import platform
import sys

import pytest

from shared.metrics import Metrics
from shared.version import version


def test_a_service_registry_has_build_info_and_the_standard_collectors() -> None:
    metrics = Metrics(service="domain-controller")
    registry = metrics.registry
    labels = {
        "service": "domain-controller",
        "version": version(),
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
    }
    assert registry.get_sample_value("cdo_build_info", labels) == 1
    info = {
        "implementation": platform.python_implementation(),
        "version": platform.python_version(),
    }
    assert (
        registry.get_sample_value(
            "python_info",
            {
                **info,
                "major": str(sys.version_info.major),
                "minor": str(sys.version_info.minor),
                "patchlevel": str(sys.version_info.micro),
            },
        )
        == 1
    )
    assert registry.get_sample_value("python_gc_collections_total", {"generation": "0"}) is not None
    text = metrics.exposition().decode()
    assert "# TYPE process_cpu_seconds_total counter" in text


@pytest.mark.skipif(sys.platform != "linux", reason="the process collector reads /proc")
def test_the_process_collector_reports_this_process() -> None:
    registry = Metrics(service="imex-agent").registry
    resident = registry.get_sample_value("process_resident_memory_bytes")
    assert resident is not None and resident > 0


def test_services_hosted_in_one_process_each_have_their_own() -> None:
    agent = Metrics(service="imex-agent").registry
    monitor = Metrics(service="health-monitor").registry
    for registry, service in ((agent, "imex-agent"), (monitor, "health-monitor")):
        samples = [
            sample
            for family in registry.collect()
            if family.name == "cdo_build_info"
            for sample in family.samples
        ]
        assert [sample.labels["service"] for sample in samples] == [service]


def test_a_bare_registry_describes_no_process() -> None:
    text = Metrics().exposition().decode()
    assert "cdo_build_info" not in text
    assert "process_" not in text
