"""Where a pod's time to Running goes: the stage breakdown of ``bench.e2e`` (pure, no I/O).

A pod passes six milestones, each a fact the system records on the pod:

- ``admitted``: the pod exists, carrying the ``cdo.dev/placement`` scheduling gate the clique
  allocator's webhook put on it (the webhook answers inside the create request, so the API
  never shows a pod that is created and not yet admitted);
- ``created``: ``admitted`` less the webhook's answer time (the allocator's
  ``cdo_admission_seconds``, a mean over the run: no object records it per pod);
- ``placed``: the gate is gone (the allocator has written the pod's seat into the domain's
  Placement, then pinned the pod and removed its gate);
- ``bound``: ``spec.nodeName`` is set (the scheduler's binding);
- ``prepared``: the kubelet wrote the CDI ids that NodePrepareResources answered
  (``sim.cdo.dev/cdi-devices``): the IMEX agent's prepare is done;
- ``running``: ``status.phase`` is Running (the kubelet's status write).

Kubernetes writes its timestamps in whole seconds (``metav1.Time``: creationTimestamp, condition
transitions), too coarse for a pod that runs a second after ``kubectl apply``. So each
milestone's time is when the bench's watch of the scenario's pods first received a version of
the pod showing that fact, in seconds from the start of ``kubectl apply``: what the API served,
timed within the watch's delivery (milliseconds). A milestone not seen on its own (two writes
between two versions the watch delivered) takes the time of the next one seen.

A stage is named by the milestone it ends at, and belongs to cdo or to the simulated cluster:

- ``created`` (apply -> created): kubectl, the API and the workload controller: the cluster's;
- ``admitted``: the webhook: cdo's;
- ``placed``: the allocator (its decision, the Placement write, the pod write): cdo's. It
  reserves the whole gang as soon as the gang's first pod appears and pins each pod as it
  comes, so no pod waits here for its gang-mates to be created;
- ``bound``: the scheduler: the cluster's;
- ``prepared``: the kubelet noticing the binding and calling the plugin, the cluster's, and the
  IMEX agent's prepare, cdo's (its ``cdo_dra_prepare_seconds`` on the pod's node, a mean of the
  node's claims over the run);
- ``running``: the kubelet's status write: the cluster's.

:func:`cdo_share_pct` is cdo's part of the pods' summed time from created to Running.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from shared.crds.names import PLACEMENT_GATE
from shared.kube.models import Pod

CDI_DEVICES_ANNOTATION = "sim.cdo.dev/cdi-devices"
"""Where the simulated kubelet writes the CDI ids NodePrepareResources answered."""

MILESTONES = ("created", "admitted", "placed", "bound", "prepared", "running")
SEEN = MILESTONES[1:]
"""The milestones a pod's versions show (``created`` is derived from ``admitted``)."""


def shown(pod: Pod) -> set[str]:
    """The milestones this version of ``pod`` shows it has passed."""
    facts = {"admitted"}
    if not any(gate.name == PLACEMENT_GATE for gate in pod.spec.scheduling_gates):
        facts.add("placed")
    if pod.spec.node_name:
        facts.add("bound")
    if CDI_DEVICES_ANNOTATION in pod.metadata.annotations:
        facts.add("prepared")
    if pod.status.phase == "Running":
        facts.add("running")
    return facts


@dataclass
class Sightings:
    """The first time (seconds on any one clock) each milestone of each pod was seen."""

    first: dict[str, dict[str, float]] = field(default_factory=dict)
    """By pod uid: milestone -> time."""
    names: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, str] = field(default_factory=dict)

    def see(self, pod: Pod, at: float) -> None:
        uid = pod.metadata.uid
        times = self.first.setdefault(uid, {})
        for milestone in shown(pod):
            times.setdefault(milestone, at)
        self.names[uid] = pod.metadata.name
        if pod.spec.node_name:
            self.nodes[uid] = pod.spec.node_name


def filled(times: Mapping[str, float]) -> dict[str, float] | None:
    """``times`` with every milestone up to ``running`` (one not seen takes the time of the next
    one seen; each no later than the next); None unless the pod was seen Running."""
    if "running" not in times:
        return None
    out: dict[str, float] = {}
    later = times["running"]
    for milestone in reversed(SEEN):
        later = min(later, times.get(milestone, later))
        out[milestone] = later
    return {milestone: out[milestone] for milestone in SEEN}


@dataclass(frozen=True)
class PodStages:
    """One pod's milestones, in seconds from the start of ``kubectl apply``."""

    name: str
    node: str
    at: Mapping[str, float]
    """Every milestone of :data:`MILESTONES`."""
    webhook_s: float
    prepare_s: float
    """The IMEX agent's prepare of the pod's claim (at most the whole ``prepared`` stage)."""

    def stage(self, milestone: str) -> float:
        """Seconds of the stage that ends at ``milestone`` (``created``: since apply)."""
        index = MILESTONES.index(milestone)
        before = self.at[MILESTONES[index - 1]] if index else 0.0
        return self.at[milestone] - before

    @property
    def to_running_s(self) -> float:
        """From ``kubectl apply`` to Running."""
        return self.at["running"]

    @property
    def life_s(self) -> float:
        """From created to Running: the pod's own time."""
        return self.at["running"] - self.at["created"]

    @property
    def cdo_s(self) -> float:
        """cdo's part of :attr:`life_s`: the webhook, the allocator, the IMEX agent's prepare."""
        return self.webhook_s + self.stage("placed") + self.prepare_s


def pod_stages(
    sightings: Sightings,
    *,
    origin: float,
    webhook_s: float,
    prepare_s: Mapping[str, float],
) -> list[PodStages]:
    """The pods seen Running, their times from ``origin`` (the start of ``kubectl apply``);
    ``webhook_s`` the webhook's mean answer time, ``prepare_s`` each node's mean prepare."""
    pods = []
    for uid, times in sightings.first.items():
        seen = filled(times)
        if seen is None:
            continue
        at = {milestone: t - origin for milestone, t in seen.items()}
        webhook = min(webhook_s, at["admitted"])
        at = {"created": at["admitted"] - webhook, **at}
        node = sightings.nodes.get(uid, "")
        prepare = min(prepare_s.get(node, 0.0), at["prepared"] - at["bound"])
        pods.append(
            PodStages(
                name=sightings.names[uid], node=node, at=at, webhook_s=webhook, prepare_s=prepare
            )
        )
    return pods


def cdo_share_pct(pods: Iterable[PodStages]) -> float | None:
    """cdo's share, in percent, of the pods' summed time from created to Running; None without
    pods."""
    cdo = total = 0.0
    for pod in pods:
        cdo += pod.cdo_s
        total += pod.life_s
    return None if total <= 0 else 100.0 * cdo / total


@dataclass(frozen=True)
class Breakdown:
    """The pods of a scenario's runs: their time to Running, each stage's median, and where the
    slowest pod's time went."""

    pods: tuple[PodStages, ...]

    @property
    def slowest(self) -> PodStages | None:
        return max(self.pods, key=lambda pod: pod.to_running_s, default=None)

    def p50(self, milestone: str) -> float | None:
        """The median over the pods of the stage that ends at ``milestone``."""
        stages = [pod.stage(milestone) for pod in self.pods]
        return statistics.median(stages) if stages else None

    @property
    def to_running_p50(self) -> float | None:
        times = [pod.to_running_s for pod in self.pods]
        return statistics.median(times) if times else None

    @property
    def to_running_max(self) -> float | None:
        slowest = self.slowest
        return None if slowest is None else slowest.to_running_s


STAGE_HEADER = (
    f"{'':24}{'pods':>5}"
    + "".join(f"{milestone:>10}" for milestone in MILESTONES)
    + f"{'(IMEX)':>8}{'to Running':>12}"
)
"""The columns of :func:`breakdown_rows`: each stage, then the IMEX agent's prepare (a part
of ``prepared``), then the time from ``kubectl apply`` to Running."""


def _seconds(value: float | None, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:{width}.2f}"


def breakdown_rows(title: str, breakdown: Breakdown) -> list[str]:
    """The scenario's title, then two rows under :data:`STAGE_HEADER`: each stage's median over
    the pods, and the slowest pod's stages (its name and node after them)."""
    pods = breakdown.pods
    prepare = statistics.median(pod.prepare_s for pod in pods) if pods else None
    rows = [
        title,
        f"{'  p50 of pods':24}{len(pods):5d}"
        + "".join(_seconds(breakdown.p50(milestone), 10) for milestone in MILESTONES)
        + _seconds(prepare, 8)
        + _seconds(breakdown.to_running_p50, 12),
    ]
    slowest = breakdown.slowest
    if slowest is not None:
        rows.append(
            f"{'  slowest pod':24}{'':5}"
            + "".join(_seconds(slowest.stage(milestone), 10) for milestone in MILESTONES)
            + _seconds(slowest.prepare_s, 8)
            + f"{slowest.to_running_s:12.2f}  {slowest.name} on {slowest.node}"
        )
    return rows
