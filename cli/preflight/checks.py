"""The checks of ``cdo preflight``, judged from :class:`~cli.preflight.facts.Facts` (pure).

Each check answers ``ok``, ``warn`` (cdo works, with less) or ``fail`` (cdo cannot work, or
not on some nodes), with one line of what it found and, when not ok, one of what to do;
``skip`` when it cannot be judged yet (cdo not installed, no agent has reported) and counts as
ok. The command's exit status is 2 with a fail, else 1 with a warn, else 0
(:func:`exit_code`).

The checks, by section (their ``name`` is stable, for ``-o json``):

- cluster: ``api-server`` (answers, release 1.34+), ``dra`` (DRA's ``resource.k8s.io/v1``),
  ``optional-api/<api>`` (one per :data:`shared.kube.apis.OPTIONAL_APIS`: what cdo does without
  it), ``nvidia-compute-domain-driver`` (NVIDIA's ComputeDomain driver still installed);
- nodes: ``gpus`` (device plugin or GPU DRA driver), ``cliques`` (``nvidia.com/gpu.clique``),
  ``clique-label`` (GPU Feature Discovery writing it too);
- cdo, once installed: ``services`` (its Deployments and DaemonSets ready), ``webhook`` (it
  answers, and a domain's pod is never admitted ungated), ``webhook-certificate`` (expiry),
  ``nats``, and the IMEX agents' findings on their nodes: ``host-imex-service``,
  ``imex-programs``, ``cdi``, ``imex-ready``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Literal

import msgspec

from cli.preflight.facts import Facts, NodeFacts
from shared.crds.coexistence import nvidia_installation
from shared.crds.names import (
    CDI_ENABLED_CONDITION,
    CLIQUE_LABEL,
    GPU_DRA_DRIVER,
    GPU_HEALTHY_CONDITION,
    IMEX_READY_CONDITION,
    NVLINK_DOMAIN_LABEL,
)
from shared.kube.apis import (
    MINIMUM_RELEASE,
    OPTIONAL_APIS,
    REQUIRED_APIS,
    group_version,
    missing_required_message,
)

Status = Literal["ok", "warn", "fail", "skip"]
Section = Literal["cluster", "nodes", "cdo"]

# The IMEX agent's reasons on cdo.dev/ImexReady (services/imex_agent/names.py; a test checks
# they are the same): the CLI does not load the services' code.
FOREIGN_IMEX = "ForeignImexDaemon"
PROGRAMS_MISSING = "ImexProgramsMissing"
NO_CLIQUE = "NoClique"
GFD_LABEL = "nvidia.com/gfd.timestamp"
"""GPU Feature Discovery's own label (on unless it runs with ``--no-timestamp``)."""
NFD_LABELS_ANNOTATION = "nfd.node.kubernetes.io/feature-labels"
"""Node Feature Discovery's list of the labels it manages on a node (GFD's among them)."""
CERTIFICATE_WARNING = timedelta(days=29)
"""A serving certificate closer than this to its end is a warning: the daily renewal (the
CronJob ``cdo-bootstrap``, or cert-manager) renews it 30 days before, so it is late."""
SHOWN_NODES = 5


class Check(msgspec.Struct, frozen=True, kw_only=True):
    section: Section
    name: str
    status: Status
    message: str
    hint: str = ""
    """What to do; empty when ok."""


def _check(section: Section, name: str) -> Callable[..., Check]:
    def make(status: Status, message: str, hint: str = "") -> Check:
        return Check(section=section, name=name, status=status, message=message, hint=hint)

    return make


def _count(number: int, noun: str = "node") -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _names(nodes: Iterable[str]) -> str:
    listed = sorted(nodes)
    shown = ", ".join(listed[:SHOWN_NODES])
    more = len(listed) - SHOWN_NODES
    return shown + (f" and {more} more" if more > 0 else "")


# -- cluster ----------------------------------------------------------------------------------


def api_server(facts: Facts) -> Check:
    check = _check("cluster", "api-server")
    api = facts.api
    if api.problem:
        return check(
            "fail",
            api.problem,
            "check the kubeconfig (--kubeconfig, KUBECONFIG, ~/.kube/config, --context) and "
            "that the API server runs",
        )
    minimum = tuple(int(part) for part in MINIMUM_RELEASE.split("."))
    shown = api.git_version or "an unknown release"
    if api.release is None:
        return check(
            "warn",
            f"Kubernetes {shown} at {api.where}: its release could not be read from /version",
            f"cdo needs Kubernetes {MINIMUM_RELEASE} or newer",
        )
    if api.release < minimum:
        return check(
            "fail",
            f"Kubernetes {shown} at {api.where} is older than {MINIMUM_RELEASE}",
            f"upgrade to Kubernetes {MINIMUM_RELEASE} or newer (DRA's resource.k8s.io/v1)",
        )
    return check("ok", f"Kubernetes {shown} at {api.where} ({MINIMUM_RELEASE} or newer)")


def _served(facts: Facts, group_version_key: str, plural: str) -> bool:
    return plural in facts.served.get(group_version_key, ())


def dra(facts: Facts) -> Check:
    check = _check("cluster", "dra")
    missing = [r for r in REQUIRED_APIS if not _served(facts, group_version(r), r.plural)]
    if missing:
        return check(
            "fail",
            missing_required_message(missing),
            f"upgrade to Kubernetes {MINIMUM_RELEASE} or newer; cdo's services do not start "
            "without these APIs",
        )
    served = ", ".join(r.plural for r in REQUIRED_APIS)
    return check("ok", f"DRA's resource.k8s.io/v1 serves {served}")


def optional_apis(facts: Facts) -> list[Check]:
    found = []
    for api in OPTIONAL_APIS:
        check = _check("cluster", f"optional-api/{api.name}")
        if _served(facts, group_version(api.resource), api.resource.plural):
            found.append(check("ok", f"served; {', '.join(api.users)} use it"))
        else:
            found.append(
                check(
                    "warn",
                    f"not served (Kubernetes {api.since} serves it by default); without it "
                    f"{api.without}",
                    api.enable or f"upgrade to Kubernetes {api.since}",
                )
            )
    return found


def permissions(facts: Facts) -> list[Check]:
    if not facts.unreadable:
        return []
    check = _check("cluster", "permissions")
    return [
        check(
            "warn",
            f"the API server refused {len(facts.unreadable)} reads, so the checks that need "
            f"them judge less: {'; '.join(facts.unreadable)}",
            "run cdo preflight as a user who may read nodes, resourceslices, deviceclasses, "
            "and cdo's namespace",
        )
    ]


def nvidia_driver(facts: Facts) -> Check:
    check = _check("cluster", "nvidia-compute-domain-driver")
    reason = nvidia_installation(facts.nvidia_device_classes)
    if reason is not None:
        return check(
            "fail",
            reason,
            "helm uninstall NVIDIA's nvidia-dra-driver-gpu release first (docs/migrating.md)",
        )
    return check("ok", "NVIDIA's ComputeDomain driver is not installed (none of its DeviceClasses)")


# -- nodes --------------------------------------------------------------------------------------


def gpus(facts: Facts) -> Check:
    check = _check("nodes", "gpus")
    plugin_nodes = [node for node in facts.nodes if node.gpus > 0]
    plugin_gpus = sum(node.gpus for node in plugin_nodes)
    dra_nodes = {piece.node for piece in facts.gpu_slices if piece.devices > 0}
    dra_gpus = sum(piece.devices for piece in facts.gpu_slices)
    if not plugin_nodes and not dra_nodes:
        return check(
            "fail",
            f"no node offers GPUs: no allocatable nvidia.com/gpu and no ResourceSlice of "
            f"{GPU_DRA_DRIVER}",
            "install NVIDIA's device plugin (GPU Operator) or its GPU DRA driver "
            "(gpu.nvidia.com) on the GPU nodes",
        )
    parts = []
    if plugin_nodes:
        parts.append(
            f"{plugin_gpus} GPUs on {len(plugin_nodes)} nodes from NVIDIA's device plugin "
            "(nvidia.com/gpu)"
        )
    if dra_nodes:
        parts.append(
            f"{dra_gpus} GPUs on {len(dra_nodes)} nodes from NVIDIA's GPU DRA driver "
            f"({GPU_DRA_DRIVER} ResourceSlices)"
        )
    return check("ok", "; ".join(parts))


def cliques(facts: Facts) -> Check:
    check = _check("nodes", "cliques")
    members: dict[str, int] = {}
    for node in facts.nodes:
        if clique := node.labels.get(CLIQUE_LABEL):
            members[clique] = members.get(clique, 0) + 1
    if members:
        sizes = ", ".join(f"{clique} ({count})" for clique, count in sorted(members.items()))
        return check(
            "ok",
            f"{_count(sum(members.values()))} in {_count(len(members), 'NVLink clique')} "
            f"({CLIQUE_LABEL}): {sizes}",
        )
    if facts.installed:
        return check(
            "warn",
            f"no node has {CLIQUE_LABEL}: no GPU node is in a multi-node NVLink clique",
            "domains run without IMEX on such nodes; on GB200 racks check the fabric "
            "(nvidia-smi -q | grep -A4 Fabric) and cdo's health monitor on the nodes",
        )
    return check(
        "warn",
        f"no node has {CLIQUE_LABEL} yet",
        "cdo's health monitor sets it from NVML fabric info once installed; nodes without "
        "multi-node NVLink run domains without IMEX",
    )


def writes_clique_label_through_gfd(node: NodeFacts) -> bool:
    """Whether GPU Feature Discovery labels the node's clique: Node Feature Discovery, which
    publishes GFD's labels, lists the labels it manages in an annotation; GFD's own timestamp
    label says GFD runs there (unless it runs with ``--no-timestamp``)."""
    managed = node.annotations.get(NFD_LABELS_ANNOTATION, "").split(",")
    return CLIQUE_LABEL in managed or GFD_LABEL in node.labels


def clique_label(facts: Facts) -> Check:
    check = _check("nodes", "clique-label")
    gfd = [node.name for node in facts.nodes if writes_clique_label_through_gfd(node)]
    # cdo's health monitor sets nvidia.com/gpu.clique and cdo.dev/nvlink-domain together and
    # removes them together: on a node it reports on, the first without the second is not its.
    foreign = [
        node.name
        for node in facts.nodes
        if GPU_HEALTHY_CONDITION in node.conditions
        and CLIQUE_LABEL in node.labels
        and NVLINK_DOMAIN_LABEL not in node.labels
    ]
    if foreign:
        return check(
            "warn",
            f"{_count(len(foreign))} carry {CLIQUE_LABEL} though cdo's health monitor took it "
            f"away (a fabric fault), put back by another writer: {_names(foreign)}",
            "nothing while the fabric recovers: the monitor removes the label at each write and "
            "its fault taint keeps new work off; see the node's cdo.dev/GpuHealthy condition "
            "(docs/install.md, GPU Operator components)",
        )
    if gfd:
        return check(
            "ok",
            f"GPU Feature Discovery writes {CLIQUE_LABEL} too, on {_count(len(gfd))}: the same "
            "value as cdo's health monitor on a healthy node; on a node in fabric trouble it "
            "puts back what the monitor removed, and the monitor removes it again",
        )
    return check("ok", f"only cdo's health monitor writes {CLIQUE_LABEL}")


# -- cdo ------------------------------------------------------------------------------------------


def services(facts: Facts) -> Check:
    check = _check("cdo", "services")
    found = [workload for workload in facts.workloads if workload.found]
    if not found:
        return check(
            "skip",
            f"no Deployment or DaemonSet of cdo in {facts.namespace}: its services run outside "
            "the cluster's workloads (as in the simulator); their readiness is not checked",
        )
    shown = ", ".join(
        f"{w.kind.lower()}/{w.name} {w.ready}/{w.desired}" if w.found else f"{w.name} missing"
        for w in facts.workloads
    )
    missing = [w for w in facts.workloads if not w.found and w.kind != "StatefulSet"]
    unready = [w for w in found if w.ready < w.desired or w.desired == 0]
    if missing or unready:
        first = (missing or unready)[0]
        return check(
            "fail",
            f"not every service is ready in {facts.namespace}: {shown}",
            f"kubectl -n {facts.namespace} describe {first.kind.lower()} {first.name}",
        )
    return check("ok", f"ready in {facts.namespace}: {shown}")


def webhook(facts: Facts) -> Check:
    check = _check("cdo", "webhook")
    hook = facts.webhook
    if not hook.configured:
        return check(
            "fail",
            "the MutatingWebhookConfiguration cdo-clique-allocator is missing: a domain's pods "
            "get no scheduling gate",
            "apply deploy/ again (kubectl apply -k deploy/kustomize/overlays/<overlay>)",
        )
    if hook.failure_policy == "Ignore" and not hook.gate_policy:
        return check(
            "fail",
            "the pod webhook's failurePolicy is Ignore but the ValidatingAdmissionPolicy "
            "cdo-pod-gate (or its binding) is missing: a domain's pod the allocator does not "
            "answer for is admitted ungated and scheduled anywhere",
            "apply deploy/ again (deploy/kustomize/base/clique-allocator/pod-gate-policy.yaml)",
        )
    answering = {
        "admitted": "the API server reaches the pod webhook (a dry-run pod went through it)",
        "answered": f"the pod webhook answers: {hook.probe_message}",
        "endpoints": f"the pod webhook has somewhere to answer: {hook.probe_message}",
    }
    if hook.probe in answering:
        return check("ok", answering[hook.probe])
    if hook.probe == "failed":
        return check(
            "fail",
            f"the pod webhook does not answer: {hook.probe_message}",
            f"kubectl -n {facts.namespace} get pods,endpointslices -l "
            "app.kubernetes.io/name=cdo-clique-allocator; check the allocator's pods and the "
            "webhook's caBundle",
        )
    return check(
        "warn",
        f"the pod webhook could not be tried: {hook.probe_message or 'not probed'}",
        "run cdo preflight as a user who may create pods (a server-side dry run) and read "
        "EndpointSlices",
    )


def webhook_certificate(facts: Facts, now: datetime) -> Check:
    check = _check("cdo", "webhook-certificate")
    hook = facts.webhook
    if hook.certificate_expires is None:
        return check(
            "warn",
            f"the webhook's serving certificate could not be read: {hook.certificate_problem}",
            f"kubectl -n {facts.namespace} get secret cdo-clique-allocator-webhook-tls",
        )
    left = hook.certificate_expires - now
    when = hook.certificate_expires.strftime("%Y-%m-%d %H:%M UTC")
    where = f"({hook.certificate_source})"
    renew = (
        f"the renewal is late: kubectl -n {facts.namespace} get cronjob cdo-bootstrap and its "
        "last job's log, or cert-manager's Certificate (docs/deploy.md)"
    )
    if left <= timedelta(0):
        return check("fail", f"the webhook's serving certificate expired on {when} {where}", renew)
    days = left.days
    if left < CERTIFICATE_WARNING:
        return check(
            "warn",
            f"the webhook's serving certificate expires in {days} days, {when} {where}",
            renew,
        )
    return check("ok", f"the webhook's serving certificate is valid for {days} days {where}")


def nats(facts: Facts) -> Check:
    check = _check("cdo", "nats")
    found = facts.nats
    if found is None:
        return check("skip", "NATS not asked")
    if found.problem:
        return check(
            "warn",
            f"NATS at {found.url} (from {found.url_from}) does not answer: {found.problem}; cdo "
            "runs without it, but events and snapshots wait",
            f"pass --nats-url (from outside: kubectl -n {facts.namespace} port-forward "
            "svc/cdo-nats 4222)",
        )
    return check("ok", f"NATS at {found.url} answers")


def _reporting(facts: Facts, condition: str) -> list[NodeFacts]:
    return [node for node in facts.nodes if condition in node.conditions]


def _imex_reason(facts: Facts, name: str, reason: str, fix: str, what: str, fine: str) -> Check:
    check = _check("cdo", name)
    reporting = _reporting(facts, IMEX_READY_CONDITION)
    if not reporting:
        return check("skip", "no IMEX agent has reported on its node yet")
    found = [n for n in reporting if n.conditions[IMEX_READY_CONDITION].reason == reason]
    if not found:
        return check("ok", f"{fine} (as the IMEX agents of {_count(len(reporting))} report)")
    message = found[0].conditions[IMEX_READY_CONDITION].message
    return check(
        "fail",
        f"{what} on {_count(len(found))}: {_names(n.name for n in found)} ({message})",
        fix,
    )


def host_imex_service(facts: Facts) -> Check:
    return _imex_reason(
        facts,
        "host-imex-service",
        FOREIGN_IMEX,
        "stop and disable the host's service on them (systemctl disable --now nvidia-imex); "
        "the agent starts its own at its next look",
        "the host's own nvidia-imex service holds the IMEX ports (cdo's agent runs none there)",
        "no node runs the host's nvidia-imex service",
    )


def imex_programs(facts: Facts) -> Check:
    return _imex_reason(
        facts,
        "imex-programs",
        PROGRAMS_MISSING,
        "install the driver's nvidia-imex package on them, with NVIDIA Container Toolkit "
        "1.17.5 or newer in cdi (or jit-cdi) mode, which puts the programs into the agent's "
        "containers (docs/install.md)",
        "nvidia-imex or nvidia-imex-ctl is missing",
        "every node's agent finds nvidia-imex and nvidia-imex-ctl",
    )


def cdi(facts: Facts) -> Check:
    check = _check("cdo", "cdi")
    reporting = _reporting(facts, CDI_ENABLED_CONDITION)
    if not reporting:
        return check("skip", f"no IMEX agent has reported {CDI_ENABLED_CONDITION} yet")
    off = [n for n in reporting if n.conditions[CDI_ENABLED_CONDITION].status == "False"]
    unknown = [n for n in reporting if n.conditions[CDI_ENABLED_CONDITION].status == "Unknown"]
    fix = (
        'containerd 1.7: enable_cdi = true in [plugins."io.containerd.grpc.v1.cri"] of '
        "/etc/containerd/config.toml, then restart containerd; containerd 2.x and CRI-O 1.23+ "
        "have it on by default"
    )
    if off:
        message = off[0].conditions[CDI_ENABLED_CONDITION].message
        return check(
            "fail",
            f"CDI is off in the container runtime of {_count(len(off))}: "
            f"{_names(n.name for n in off)} ({message}); their pods would run without their "
            "IMEX channel",
            fix,
        )
    if unknown:
        message = unknown[0].conditions[CDI_ENABLED_CONDITION].message
        return check(
            "warn",
            f"cdo cannot tell whether CDI is on for {_count(len(unknown))}: "
            f"{_names(n.name for n in unknown)} ({message})",
            fix,
        )
    return check("ok", f"CDI is on in the container runtime of all {_count(len(reporting))}")


def imex_ready(facts: Facts) -> Check:
    check = _check("cdo", "imex-ready")
    reporting = _reporting(facts, IMEX_READY_CONDITION)
    if not reporting:
        return check("skip", "no IMEX agent has reported on its node yet")
    ready = [n for n in reporting if n.conditions[IMEX_READY_CONDITION].status == "True"]
    # Nodes without a clique need no IMEX; the two findings above have checks of their own.
    judged = {FOREIGN_IMEX, PROGRAMS_MISSING, NO_CLIQUE}
    waiting = [
        n
        for n in reporting
        if n.conditions[IMEX_READY_CONDITION].status != "True"
        and n.conditions[IMEX_READY_CONDITION].reason not in judged
    ]
    if waiting:
        shown = _names(f"{n.name} ({n.conditions[IMEX_READY_CONDITION].reason})" for n in waiting)
        return check(
            "warn",
            f"IMEX is not ready on {len(waiting)} of {len(reporting)} nodes: {shown}",
            "kubectl describe node <node> (condition cdo.dev/ImexReady); cdo explain DOMAIN",
        )
    return check("ok", f"IMEX is READY on {len(ready)} of {len(reporting)} nodes")


def run_checks(facts: Facts, *, now: datetime) -> list[Check]:
    """Every check, in order; after a failed ``api-server`` only that one."""
    first = api_server(facts)
    if facts.api.problem:
        return [first]
    found = [first, dra(facts), *optional_apis(facts), nvidia_driver(facts), *permissions(facts)]
    found += [gpus(facts), cliques(facts), clique_label(facts)]
    if not facts.installed:
        found.append(
            Check(
                section="cdo",
                name="installed",
                status="skip",
                message=f"cdo is not installed (nothing of it in {facts.namespace}, no webhook "
                "cdo-clique-allocator, no agent on a node): the checks of a running cdo wait "
                "until it is",
            )
        )
        return found
    found += [services(facts), webhook(facts), webhook_certificate(facts, now), nats(facts)]
    found += [host_imex_service(facts), imex_programs(facts), cdi(facts), imex_ready(facts)]
    return found


def exit_code(checks: Sequence[Check]) -> int:
    """2 with a failed check, 1 with a warning, else 0."""
    statuses = {check.status for check in checks}
    return 2 if "fail" in statuses else 1 if "warn" in statuses else 0
