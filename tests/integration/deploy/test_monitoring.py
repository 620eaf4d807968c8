"""The monitoring component: it scrapes what the services serve, its alerts and dashboard ask
for series the services really export, and promtool accepts (and unit-tests) the alerts."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from services.clique_allocator.gauges import CapacityGauges
from services.clique_allocator.metrics import AllocatorMetrics
from services.domain_controller.gauges import DomainGauges
from services.health_monitor.metrics import HealthMetrics
from services.imex_agent.metrics import AgentMetrics
from shared.metrics import Metrics
from tests.integration.deploy.conftest import (
    NAMESPACE,
    Manifest,
    find,
    render_with,
    service_workloads,
)
from tests.support import promtool

HERE = Path(__file__).resolve().parent
ALERT_TESTS = HERE / "alerts_test.yaml"
RULES_FILE = "cdo-rules.yaml"
"""The name alerts_test.yaml gives the rule file it tests."""
DASHBOARD_LABEL = "grafana_dashboard"
METRIC = re.compile(
    r"\b(?:cdo|workqueue|controller_runtime|leader_election|process|python)_[a-z0-9_]*[a-z0-9]\b"
)
JOB = re.compile(r'job=~?"([^"]+)"')


@pytest.fixture(scope="module")
def monitoring(tmp_path_factory: pytest.TempPathFactory) -> list[Manifest]:
    return render_with(tmp_path_factory.mktemp("monitoring"), ("monitoring",))


def rules(objs: list[Manifest]) -> list[dict[str, Any]]:
    rule: Manifest = find(objs, "PrometheusRule", "cdo")
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def dashboard(objs: list[Manifest]) -> dict[str, Any]:
    config = find(objs, "ConfigMap", "cdo-grafana-dashboard")
    loaded: dict[str, Any] = json.loads(config["data"]["cdo.json"])
    return loaded


def panel_expressions(board: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]


def expressions(objs: list[Manifest]) -> Iterator[tuple[str, str]]:
    for rule in rules(objs):
        yield rule["alert"], rule["expr"]
    yield from panel_expressions(dashboard(objs))


def exported_names() -> set[str]:
    """Every series name the services' registries export, suffixes included."""
    metrics = Metrics(service="any")
    AllocatorMetrics(metrics)
    HealthMetrics(metrics)
    AgentMetrics(metrics)
    registry: CollectorRegistry = metrics.registry
    registry.register(DomainGauges(list))
    registry.register(CapacityGauges(list))
    names = set()
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum")}
    for family in registry.collect():
        for suffix in suffixes.get(family.type, ("",)):
            names.add(family.name + suffix)
    return names


def test_the_objects_render_in_cdo_system(monitoring: list[Manifest]) -> None:
    for kind in ("PodMonitor", "PrometheusRule"):
        obj = find(monitoring, kind, "cdo")
        assert obj["apiVersion"] == "monitoring.coreos.com/v1"
        assert obj["metadata"]["namespace"] == NAMESPACE
    config = find(monitoring, "ConfigMap", "cdo-grafana-dashboard")
    assert config["metadata"]["labels"][DASHBOARD_LABEL] == "1"
    board = dashboard(monitoring)
    assert board["uid"] == "cdo-overview"
    titles = {panel["title"] for panel in board["panels"]}
    for wanted in (
        "Domains by phase",
        "Free GPUs per clique",
        "Placement decision latency",
        "Active faults by severity",
        "IMEX ready nodes",
    ):
        assert wanted in titles


def test_the_pod_monitor_selects_every_service_on_its_metrics_port(
    monitoring: list[Manifest],
) -> None:
    monitor = find(monitoring, "PodMonitor", "cdo")
    selector = monitor["spec"]["selector"]["matchLabels"]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics"
    (job,) = [r for r in endpoint["relabelings"] if r["targetLabel"] == "job"]
    jobs = set()
    for service, workload in service_workloads(monitoring).items():
        template = workload["spec"]["template"]
        assert selector.items() <= template["metadata"]["labels"].items(), service
        ports = {p["name"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
        assert endpoint["port"] in ports, service
        component = template["metadata"]["labels"]["app.kubernetes.io/component"]
        jobs.add(job["replacement"].replace("$1", component))
    # Every job the alerts and the dashboard name is one the PodMonitor makes.
    for where, expr in expressions(monitoring):
        for named in JOB.findall(expr):
            assert any(re.fullmatch(named, j) for j in jobs), (where, named)


def test_alerts_and_dashboard_ask_for_series_the_services_export(
    monitoring: list[Manifest],
) -> None:
    exported = exported_names()
    asked = set()
    for where, expr in expressions(monitoring):
        for name in METRIC.findall(expr):
            assert name in exported, f"{where}: {name} is not exported by any cdo service"
            asked.add(name)
    assert len(asked) > 20


def test_the_alerts_named_in_the_brief_exist(monitoring: list[Manifest]) -> None:
    alerts = {rule["alert"] for rule in rules(monitoring)}
    assert {
        "CdoWorkQueueStuck",
        "CdoLeaderLost",
        "CdoLeadershipFlapping",
        "CdoDomainDegraded",
        "CdoImexNotReady",
        "CdoMessagesDropped",
        "CdoFaultCircuitBreakerOpen",
    } <= alerts
    for rule in rules(monitoring):
        assert rule["labels"]["severity"] in ("info", "warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def write_rules(monitoring: list[Manifest], directory: Path) -> Path:
    rule = find(monitoring, "PrometheusRule", "cdo")
    path = directory / RULES_FILE
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    return path


def test_promtool_checks_the_rules(monitoring: list[Manifest], tmp_path: Path) -> None:
    path = write_rules(monitoring, tmp_path)
    status, output = promtool.run("check", "rules", str(path))
    assert status == 0, output
    assert f"SUCCESS: {len(rules(monitoring))} rules found" in output


def test_promtool_unit_tests_of_the_alerts_pass(monitoring: list[Manifest], tmp_path: Path) -> None:
    write_rules(monitoring, tmp_path)
    shutil.copy(ALERT_TESTS, tmp_path / ALERT_TESTS.name)
    status, output = promtool.run("test", "rules", ALERT_TESTS.name, cwd=tmp_path)
    assert status == 0, output
    assert "SUCCESS" in output


def test_promtool_finds_a_broken_rule(monitoring: list[Manifest], tmp_path: Path) -> None:
    """The check can fail: a rule whose expression does not parse is refused."""
    rule = find(monitoring, "PrometheusRule", "cdo")
    groups = json.loads(json.dumps(rule["spec"]["groups"]))
    groups[0]["rules"][0]["expr"] = "max by (name (workqueue_depth)"
    path = tmp_path / RULES_FILE
    path.write_text(yaml.safe_dump({"groups": groups}))
    status, output = promtool.run("check", "rules", str(path))
    assert status != 0 and "parse error" in output


RUNBOOKS = HERE.parents[2] / "docs" / "runbooks.md"


def anchors(markdown: str) -> set[str]:
    """The anchors of a Markdown file's headings, as GitHub makes them."""
    return {
        re.sub(r"[^a-z0-9 _-]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in markdown.splitlines()
        if line.startswith("#")
    }


def test_every_alert_has_a_runbook_that_exists(monitoring: list[Manifest]) -> None:
    written = anchors(RUNBOOKS.read_text())
    for rule in rules(monitoring):
        url = rule["annotations"]["runbook_url"]
        path, _, anchor = url.partition("#")
        assert path == "docs/runbooks.md" and anchor == rule["alert"].lower(), url
        assert anchor in written, f"{rule['alert']}: docs/runbooks.md has no section {anchor}"
    # The two outages an operator must hear of.
    assert {"CdoWebhookUnreachable", "CdoEventFeedDown"} <= {r["alert"] for r in rules(monitoring)}


def test_the_dashboard_has_variables_a_state_timeline_and_fault_annotations(
    monitoring: list[Manifest],
) -> None:
    board = dashboard(monitoring)
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert list(variables) == ["datasource", "cluster", "clique", "node"]
    for name in ("cluster", "clique", "node"):
        assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*"
    # Every query follows the cluster variable; node and clique series their own too.
    for title, expr in panel_expressions(board):
        assert 'cluster=~"$cluster"' in expr, title
        if "cdo_clique_" in expr:
            assert 'clique=~"$clique"' in expr, title
        if "cdo_imex_ready" in expr or "cdo_health_" in expr:
            assert 'node=~"$node"' in expr, title
    timelines = {p["title"]: p for p in board["panels"] if p["type"] == "state-timeline"}
    assert sorted(timelines) == ["IMEX readiness per node", "Node health (fault taint per node)"]
    exprs = " ".join(t["expr"] for p in timelines.values() for t in p["targets"])
    assert "cdo_health_taint" in exprs and "cdo_imex_ready" in exprs
    exported = exported_names()
    annotations = board["annotations"]["list"]
    assert [a["name"] for a in annotations] == ["Fault episodes", "Recoveries"]
    for annotation in annotations:
        for name in METRIC.findall(annotation["expr"]):
            assert name in exported, (annotation["name"], name)
