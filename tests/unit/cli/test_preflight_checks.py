"""``cdo preflight``'s checks judged from facts: each status, its message and what to do, and the
exit code they make. tests/integration/cli/test_preflight.py reads the same facts from clusters
broken on purpose."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from cli.preflight import checks as preflight
from cli.preflight.checks import Check, exit_code, run_checks
from cli.preflight.facts import (
    ApiFacts,
    Condition,
    Facts,
    GpuSlice,
    NatsFacts,
    NodeFacts,
    WebhookFacts,
    Workload,
)
from cli.preflight.render import render
from services.imex_agent import names as agent_names
from shared.kube.apis import OPTIONAL_APIS, REQUIRED_APIS, group_version, missing_required_message

NOW = datetime(2026, 6, 1, tzinfo=UTC)
CLIQUE = "9e1c3a52-0000-4000-8000-00000000c0de.1"
READY = Condition(status="True", reason="ImexReady", message="READY")
CDI_ON = Condition(status="True", reason="CdiEnabled", message="containerd 2.x")
HEALTHY = Condition(status="True", reason="GpuHealthy")


def served(*, without: tuple[str, ...] = ()) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for resource in (*REQUIRED_APIS, *(api.resource for api in OPTIONAL_APIS)):
        if resource.plural not in without:
            found.setdefault(group_version(resource), []).append(resource.plural)
    return found


def node(name: str, **conditions: Condition) -> NodeFacts:
    return NodeFacts(
        name=name,
        labels={"nvidia.com/gpu.clique": CLIQUE, "cdo.dev/nvlink-domain": CLIQUE.split(".")[0]},
        gpus=4,
        conditions={
            "cdo.dev/ImexReady": READY,
            "cdo.dev/CdiEnabled": CDI_ON,
            "cdo.dev/GpuHealthy": HEALTHY,
            **conditions,
        },
    )


def installed(**changes: object) -> Facts:
    """A healthy cluster with cdo installed and running."""
    facts = Facts(
        api=ApiFacts(where="kubeconfig k", git_version="v1.36.2", release=(1, 36)),
        served=served(),
        nodes=[node("a1"), node("a2")],
        workloads=[
            Workload(
                kind="Deployment", name="cdo-domain-controller", found=True, desired=2, ready=2
            ),
            Workload(kind="DaemonSet", name="cdo-imex-agent", found=True, desired=2, ready=2),
            Workload(kind="StatefulSet", name="cdo-nats"),
        ],
        webhook=WebhookFacts(
            configured=True,
            probe="admitted",
            certificate_source="Secret cdo-system/cdo-clique-allocator-webhook-tls",
            certificate_expires=NOW + timedelta(days=300),
        ),
        nats=NatsFacts(url="nats://x:4222", url_from="--nats-url"),
    )
    return msgspec.structs.replace(facts, **changes)


def by_name(found: list[Check]) -> dict[str, Check]:
    return {check.name: check for check in found}


def test_the_imex_reasons_are_the_agents() -> None:
    assert preflight.FOREIGN_IMEX == agent_names.REASON_FOREIGN_DAEMON
    assert preflight.PROGRAMS_MISSING == agent_names.REASON_PROGRAMS_MISSING
    assert preflight.NO_CLIQUE == agent_names.REASON_NO_CLIQUE


def test_a_healthy_installation_is_all_ok_and_exits_0() -> None:
    found = run_checks(installed(), now=NOW)
    assert {check.status for check in found} == {"ok"}, render(found)
    assert exit_code(found) == 0
    assert [check.name for check in found] == [
        "api-server", "dra", *(f"optional-api/{api.name}" for api in OPTIONAL_APIS),
        "nvidia-compute-domain-driver", "gpus", "cliques", "clique-label", "services",
        "webhook", "webhook-certificate", "nats", "host-imex-service", "imex-programs", "cdi",
        "imex-ready",
    ]  # fmt: skip
    text = render(found)
    assert text.endswith("ready for cdo: 15 ok, 0 warnings, 0 failures")


def test_an_api_server_that_does_not_answer_is_the_only_check_and_fails() -> None:
    facts = Facts(api=ApiFacts(problem="the Kubernetes API does not answer (kubeconfig k): x"))
    found = run_checks(facts, now=NOW)
    assert [(c.name, c.status) for c in found] == [("api-server", "fail")]
    assert found[0].message.startswith("the Kubernetes API does not answer")
    assert exit_code(found) == 2


@pytest.mark.parametrize(
    ("api", "status", "says"),
    [
        (ApiFacts(git_version="v1.33.4", release=(1, 33)), "fail", "older than 1.34"),
        (ApiFacts(git_version="v1.34.0", release=(1, 34)), "ok", "1.34 or newer"),
        (ApiFacts(git_version="weird"), "warn", "could not be read"),
    ],
)
def test_the_release(api: ApiFacts, status: str, says: str) -> None:
    check = preflight.api_server(Facts(api=api))
    assert (check.status, says in check.message) == (status, True)


def test_without_dra_it_fails_naming_the_apis_and_the_release() -> None:
    facts = installed(served=served(without=("resourceclaims", "resourceslices")))
    check = by_name(run_checks(facts, now=NOW))["dra"]
    missing = [r for r in REQUIRED_APIS if r.plural in ("resourceclaims", "resourceslices")]
    assert check.status == "fail" and check.message == missing_required_message(missing)


def test_an_optional_api_not_served_warns_with_what_cdo_does_without_it() -> None:
    api = OPTIONAL_APIS[0]
    found = run_checks(installed(served=served(without=(api.resource.plural,))), now=NOW)
    check = by_name(found)[f"optional-api/{api.name}"]
    assert check.status == "warn"
    assert api.without in check.message and check.hint == api.enable
    assert exit_code(found) == 1


def test_nvidia_driver_present_fails() -> None:
    found = by_name(run_checks(installed(
        nvidia_device_classes=["compute-domain-default-channel.nvidia.com"]), now=NOW))  # fmt: skip
    check = found["nvidia-compute-domain-driver"]
    assert check.status == "fail" and "compute-domain-default-channel.nvidia.com" in check.message


def test_gpus_from_the_device_plugin_or_the_dra_driver_or_none() -> None:
    bare = [NodeFacts(name="c1"), NodeFacts(name="c2")]
    assert preflight.gpus(installed(nodes=bare)).status == "fail"
    check = preflight.gpus(
        installed(
            nodes=bare, gpu_slices=[GpuSlice(node="c1", devices=4), GpuSlice(node="c2", devices=4)]
        )
    )
    assert (
        check.status == "ok" and "8 GPUs on 2 nodes from NVIDIA's GPU DRA driver" in check.message
    )
    assert "8 GPUs on 2 nodes from NVIDIA's device plugin" in preflight.gpus(installed()).message


def test_gpu_feature_discovery_writing_the_clique_label_is_told() -> None:
    managed = {
        "nfd.node.kubernetes.io/feature-labels": "nvidia.com/gpu.present,nvidia.com/gpu.clique"
    }
    through_nfd = msgspec.structs.replace(node("a1"), annotations=managed)
    timestamp = msgspec.structs.replace(
        node("a2"), labels={**node("a2").labels, "nvidia.com/gfd.timestamp": "1700000000"}
    )
    check = preflight.clique_label(installed(nodes=[through_nfd, timestamp, node("a3")]))
    assert check.status == "ok" and "GPU Feature Discovery writes" in check.message
    assert "on 2 nodes" in check.message
    assert "only cdo" in preflight.clique_label(installed()).message
    # The monitor took its labels away (a fabric fault), someone put the clique label back.
    back = msgspec.structs.replace(node("a2"), labels={"nvidia.com/gpu.clique": CLIQUE})
    check = preflight.clique_label(installed(nodes=[node("a1"), back]))
    assert check.status == "warn" and "put back by another writer: a2" in check.message


def test_no_clique_label_warns_before_and_after_install() -> None:
    bare = [NodeFacts(name="c1", gpus=4)]
    before = preflight.cliques(Facts(api=installed().api, nodes=bare))
    assert before.status == "warn" and "yet" in before.message
    after = preflight.cliques(installed(nodes=[NodeFacts(name="c1", gpus=4, conditions={
        "cdo.dev/ImexReady": Condition(status="False", reason="NoClique")})]))  # fmt: skip
    assert after.status == "warn" and "multi-node NVLink" in after.message


def test_before_install_the_cdo_checks_are_skipped() -> None:
    facts = Facts(api=installed().api, served=served(), nodes=[NodeFacts(name="c1", gpus=4)])
    found = run_checks(facts, now=NOW)
    assert found[-1].name == "installed" and found[-1].status == "skip"
    assert "nats" not in by_name(found)


@pytest.mark.parametrize(
    ("workloads", "status", "says"),
    [
        ([Workload(kind="DaemonSet", name="cdo-imex-agent", found=True, desired=18, ready=16)],
         "fail", "daemonset/cdo-imex-agent 16/18"),
        ([Workload(kind="Deployment", name="cdo-domain-controller", found=True, desired=2, ready=2),
          Workload(kind="Deployment", name="cdo-clique-allocator")],
         "fail", "cdo-clique-allocator missing"),
        ([Workload(kind="Deployment", name="cdo-clique-allocator")], "skip", "outside"),
    ],
)  # fmt: skip
def test_services(workloads: list[Workload], status: str, says: str) -> None:
    check = preflight.services(installed(workloads=workloads))
    assert check.status == status and says in check.message, check


def test_the_webhook_and_its_certificate() -> None:
    missing = preflight.webhook(installed(webhook=WebhookFacts()))
    assert missing.status == "fail" and "is missing" in missing.message
    refused = 'failed calling webhook "x": refused'
    failed = preflight.webhook(
        installed(webhook=WebhookFacts(configured=True, probe="failed", probe_message=refused))
    )
    assert failed.status == "fail" and "refused" in failed.message
    forbidden = preflight.webhook(
        installed(webhook=WebhookFacts(configured=True, probe="forbidden"))
    )
    assert forbidden.status == "warn"
    # deploy/'s: failurePolicy Ignore, with the policy that refuses a domain's ungated pod.
    ignore = WebhookFacts(configured=True, failure_policy="Ignore", gate_policy=True)
    answered = msgspec.structs.replace(ignore, probe="answered", probe_message="https://x answered")
    assert preflight.webhook(installed(webhook=answered)).status == "ok"
    endpoints = msgspec.structs.replace(ignore, probe="endpoints", probe_message="2 ready")
    assert preflight.webhook(installed(webhook=endpoints)).status == "ok"
    unguarded = msgspec.structs.replace(answered, gate_policy=False)
    check = preflight.webhook(installed(webhook=unguarded))
    assert check.status == "fail" and "cdo-pod-gate" in check.message
    no_pod = msgspec.structs.replace(ignore, probe="failed", probe_message="no ready endpoint")
    assert preflight.webhook(installed(webhook=no_pod)).status == "fail"

    def certificate(days: float) -> Check:
        hook = WebhookFacts(configured=True, certificate_source="s",
                            certificate_expires=NOW + timedelta(days=days))  # fmt: skip
        return preflight.webhook_certificate(installed(webhook=hook), NOW)

    assert certificate(90).status == "ok"
    assert certificate(10).status == "warn" and "expires in 10 days" in certificate(10).message
    assert certificate(-1).status == "fail" and "expired" in certificate(-1).message
    unread = preflight.webhook_certificate(
        installed(webhook=WebhookFacts(configured=True, certificate_problem="no Secret")), NOW
    )
    assert unread.status == "warn" and "no Secret" in unread.message


def test_nats_down_warns() -> None:
    facts = installed(nats=NatsFacts(url="nats://x:1", url_from="--nats-url", problem="refused"))
    found = run_checks(facts, now=NOW)
    check = by_name(found)["nats"]
    assert check.status == "warn" and "does not answer: refused" in check.message
    assert exit_code(found) == 1


def test_the_agents_findings_name_the_nodes() -> None:
    foreign = Condition(status="False", reason="ForeignImexDaemon", message="ports 50000 answer")
    missing = Condition(status="False", reason="ImexProgramsMissing", message="not found")
    cdi_off = Condition(status="False", reason="CdiDisabled", message="enable_cdi = false")
    cdi_unknown = Condition(status="Unknown", reason="CdiUnknown", message="docker://")
    waiting = Condition(status="False", reason="DaemonNotReady", message="INITIALIZING")
    nodes = [
        node("a1", **{"cdo.dev/ImexReady": foreign}),
        node("a2", **{"cdo.dev/ImexReady": missing}),
        node("a3", **{"cdo.dev/CdiEnabled": cdi_off}),
        node("a4", **{"cdo.dev/CdiEnabled": cdi_unknown}),
        node("a5", **{"cdo.dev/ImexReady": waiting}),
    ]
    found = by_name(run_checks(installed(nodes=nodes), now=NOW))
    assert found["host-imex-service"].status == "fail"
    assert found["host-imex-service"].message == (
        "the host's own nvidia-imex service holds the IMEX ports (cdo's agent runs none there) "
        "on 1 node: a1 (ports 50000 answer)"
    )
    assert "systemctl disable --now nvidia-imex" in found["host-imex-service"].hint
    assert found["imex-programs"].status == "fail" and "a2" in found["imex-programs"].message
    assert found["cdi"].status == "fail" and "a3" in found["cdi"].message
    assert "a4" not in found["cdi"].message  # the failure is told first
    assert found["imex-ready"].status == "warn"
    assert "a5 (DaemonNotReady)" in found["imex-ready"].message
    assert "a1" not in found["imex-ready"].message  # judged by its own check

    unknown_only = by_name(run_checks(installed(nodes=[node("a4", **{
        "cdo.dev/CdiEnabled": cdi_unknown})]), now=NOW))  # fmt: skip
    assert unknown_only["cdi"].status == "warn"


def test_exit_codes() -> None:
    def made(*statuses: str) -> list[Check]:
        return [Check(section="cluster", name=s, status=s, message="") for s in statuses]  # type: ignore[arg-type]

    assert exit_code(made("ok", "skip")) == 0
    assert exit_code(made("ok", "warn", "skip")) == 1
    assert exit_code(made("warn", "fail")) == 2
