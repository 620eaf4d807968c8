"""The scheduler's picture of the cluster: informer contents plus its own assumptions.

:class:`ClusterState` is fed by the informers' event handlers and by the scheduler itself:

- nodes as :class:`~sim.scheduler.facts.NodeFacts`, and per node the summed requests of the pods
  on it (:class:`~sim.scheduler.facts.NodeUsage`), kept up to date incrementally;
- bound pods, indexed by label, namespace and "has required anti-affinity", which is what
  inter-pod affinity needs (see :class:`~sim.scheduler.interpod.PodLookup`);
- ResourceClaims, DeviceClasses, ResourceSlices and which devices are allocated;
- **assumptions**: a pod the scheduler decided to bind counts on its node from the moment of
  the decision (:meth:`assume_pod`), before the API and the informer have caught up, so the next
  pod cannot take the same GPUs; likewise a claim allocation being written
  (:meth:`assume_claim`) holds its devices. An informer event that shows the pod bound (or the
  claim at the written resourceVersion or later) replaces the assumption; a failed write
  withdraws it (:meth:`forget_pod`, :meth:`forget_claim`).

Change methods return the :data:`Kind` values of unschedulable pods the change may help, so
the shell can requeue only those.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Literal

from shared.kube.models import DeviceTaintRule, Node
from sim.scheduler.devices import DeviceRef, DeviceView, SliceIndex
from sim.scheduler.facts import NodeFacts, NodeUsage, PodFacts, node_facts, pod_facts
from sim.scheduler.objects import DeviceClass, Namespace, Pod, ResourceClaim, ResourceSlice

Kind = Literal["node", "resources", "affinity", "anti-affinity", "dra"]
ALL_KINDS: frozenset[Kind] = frozenset(("node", "resources", "affinity", "anti-affinity", "dra"))
_POD_GONE: frozenset[Kind] = frozenset(("resources", "affinity", "anti-affinity"))
_POD_CAME: frozenset[Kind] = frozenset(("affinity", "anti-affinity"))
_DRA: frozenset[Kind] = frozenset(("dra",))
_NOTHING: frozenset[Kind] = frozenset()
_EMPTY_USAGE = NodeUsage()


def _rv(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def _claim_devices(claim: ResourceClaim | None) -> frozenset[DeviceRef]:
    if claim is None or claim.status.allocation is None:
        return frozenset()
    return frozenset((r.driver, r.pool, r.device) for r in claim.status.allocation.devices.results)


class ClusterState:
    """See the module docstring. Not thread-safe: used from the event loop only."""

    def __init__(self, *, honour_device_taints: bool = True) -> None:
        self.honour_device_taints = honour_device_taints
        """Whether device taints count (the release's DRADeviceTaints gate)."""
        self._nodes: dict[str, NodeFacts] = {}
        self._node_names: list[str] = []
        self._usage: dict[str, NodeUsage] = {}
        self._pods: dict[str, PodFacts] = {}
        self._assumed: set[str] = set()
        self._by_label: dict[tuple[str, str], set[str]] = {}
        self._by_namespace: dict[str, set[str]] = {}
        self._anti: set[str] = set()
        self._namespaces: dict[str, dict[str, str]] = {}
        self._claims: dict[str, ResourceClaim] = {}
        self._assumed_claims: dict[str, tuple[ResourceClaim, int | None]] = {}
        self._claim_held: dict[str, frozenset[DeviceRef]] = {}
        self._holders: dict[DeviceRef, set[str]] = {}
        self._classes: dict[str, DeviceClass] = {}
        self._taint_rules: dict[str, DeviceTaintRule] = {}
        self.slices = SliceIndex()

    # -- nodes ---------------------------------------------------------------------------------

    def set_node(self, node: Node) -> frozenset[Kind]:
        facts = node_facts(node)
        old = self._nodes.get(facts.name)
        if old == facts:
            return _NOTHING  # a heartbeat: nothing the scheduler looks at changed
        self._nodes[facts.name] = facts
        if old is None:
            self._node_names = sorted(self._nodes)
        if old is None or old.labels != facts.labels:
            self.slices.node_changed()
        return ALL_KINDS

    def delete_node(self, name: str) -> frozenset[Kind]:
        if self._nodes.pop(name, None) is not None:
            self._node_names = sorted(self._nodes)
            self.slices.node_changed()
        return _NOTHING

    def node_names(self) -> Sequence[str]:
        return self._node_names

    def node(self, name: str) -> NodeFacts | None:
        return self._nodes.get(name)

    def usage(self, name: str) -> NodeUsage:
        return self._usage.get(name, _EMPTY_USAGE)

    # -- pods ----------------------------------------------------------------------------------

    def _add(self, facts: PodFacts) -> None:
        key = facts.key
        self._pods[key] = facts
        self._usage[facts.node_name] = self.usage(facts.node_name).plus(facts)
        for pair in facts.labels.items():
            self._by_label.setdefault(pair, set()).add(key)
        self._by_namespace.setdefault(facts.namespace, set()).add(key)
        if facts.anti_affinity:
            self._anti.add(key)

    def _remove(self, key: str) -> PodFacts | None:
        facts = self._pods.pop(key, None)
        self._assumed.discard(key)
        if facts is None:
            return None
        usage = self.usage(facts.node_name).plus(facts, -1)
        if usage.pods:
            self._usage[facts.node_name] = usage
        else:
            self._usage.pop(facts.node_name, None)
        for pair in facts.labels.items():
            keys = self._by_label.get(pair)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_label[pair]
        keys = self._by_namespace.get(facts.namespace)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_namespace[facts.namespace]
        self._anti.discard(key)
        return facts

    def observe_pod(self, pod: Pod) -> frozenset[Kind]:
        """An informer's view of a pod (added or updated)."""
        key = pod.key
        if pod.spec.node_name and not pod.terminal:
            facts = pod_facts(pod)
            old = self._pods.get(key)
            confirmed = key in self._assumed
            if old == facts:
                if confirmed:
                    # The assumed bind has landed: a pod waiting for company may now find it.
                    self._assumed.discard(key)
                    return _POD_CAME
                return _NOTHING
            self._remove(key)
            self._add(facts)
            if old is None or (confirmed and old.node_name == facts.node_name):
                return _POD_CAME
            return _POD_GONE | _POD_CAME
        if key in self._assumed and not pod.terminal:
            return _NOTHING  # the informer has not seen the bind yet
        return _POD_GONE if self._remove(key) is not None else _NOTHING

    def delete_pod(self, key: str) -> frozenset[Kind]:
        return _POD_GONE if self._remove(key) is not None else _NOTHING

    def assume_pod(self, facts: PodFacts) -> None:
        """Count ``facts`` (with ``node_name`` set) on its node until the informer confirms."""
        self._remove(facts.key)
        self._add(facts)
        self._assumed.add(facts.key)

    def forget_pod(self, key: str) -> None:
        """Withdraw an assumption (the bind failed); a pod the informer saw bound stays."""
        if key in self._assumed:
            self._remove(key)

    def is_assumed(self, key: str) -> bool:
        return key in self._assumed

    def bound_pod(self, key: str) -> PodFacts | None:
        return self._pods.get(key)

    # -- PodLookup -----------------------------------------------------------------------------

    def _facts(self, keys: Iterable[str]) -> list[PodFacts]:
        return [self._pods[k] for k in sorted(keys)]

    def pods_in_namespace(self, namespace: str) -> Iterable[PodFacts]:
        return self._facts(self._by_namespace.get(namespace, ()))

    def pods_with_label(self, key: str, value: str) -> Iterable[PodFacts]:
        return self._facts(self._by_label.get((key, value), ()))

    def all_pods(self) -> Iterable[PodFacts]:
        return self._facts(self._pods)

    def pods_with_anti_affinity(self) -> Iterable[PodFacts]:
        return self._facts(self._anti)

    def node_labels(self, node_name: str) -> Mapping[str, str] | None:
        node = self._nodes.get(node_name)
        return node.labels if node is not None else None

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return self._namespaces.get(namespace, {})

    # -- namespaces ----------------------------------------------------------------------------

    def set_namespace(self, namespace: Namespace) -> frozenset[Kind]:
        name = namespace.metadata.name
        if self._namespaces.get(name) == namespace.metadata.labels:
            return _NOTHING
        self._namespaces[name] = namespace.metadata.labels
        return _POD_CAME

    def delete_namespace(self, name: str) -> frozenset[Kind]:
        return _POD_CAME if self._namespaces.pop(name, None) is not None else _NOTHING

    # -- claims --------------------------------------------------------------------------------

    def claim(self, namespace: str, name: str) -> ResourceClaim | None:
        """The claim as the scheduler must see it: its own pending write wins."""
        key = f"{namespace}/{name}"
        assumed = self._assumed_claims.get(key)
        return assumed[0] if assumed is not None else self._claims.get(key)

    def _refresh_claim(self, key: str) -> None:
        assumed = self._assumed_claims.get(key)
        devices = _claim_devices(assumed[0] if assumed is not None else self._claims.get(key))
        previous = self._claim_held.get(key, frozenset())
        if devices == previous:
            return
        for ref in previous - devices:
            holders = self._holders.get(ref)
            if holders is not None:
                holders.discard(key)
                if not holders:
                    del self._holders[ref]
        for ref in devices - previous:
            self._holders.setdefault(ref, set()).add(key)
        if devices:
            self._claim_held[key] = devices
        else:
            self._claim_held.pop(key, None)

    def set_claim(self, claim: ResourceClaim) -> frozenset[Kind]:
        """Store the informer's claim; DRA-blocked pods may look again if it is new, or it let
        go of devices or reservations, or it started going away."""
        key = claim.key
        old = self._claims.get(key)
        held_before = self._claim_held.get(key, frozenset())
        self._claims[key] = claim
        assumed = self._assumed_claims.get(key)
        if (
            assumed is not None
            and assumed[1] is not None
            and _rv(claim.metadata.resource_version) >= assumed[1]
        ):
            del self._assumed_claims[key]
        self._refresh_claim(key)
        if old is None:
            return _DRA
        freed = not held_before <= self._claim_held.get(key, frozenset())
        released = len(claim.status.reserved_for) < len(old.status.reserved_for)
        deleting = old.metadata.deletion_timestamp != claim.metadata.deletion_timestamp
        return _DRA if freed or released or deleting else _NOTHING

    def delete_claim(self, key: str) -> frozenset[Kind]:
        self._claims.pop(key, None)
        self._assumed_claims.pop(key, None)
        self._refresh_claim(key)
        return _DRA

    def assume_claim(self, claim: ResourceClaim) -> None:
        """Hold ``claim`` as the scheduler is about to write it (status included)."""
        self._assumed_claims[claim.key] = (claim, None)
        self._refresh_claim(claim.key)

    def claim_written(self, claim: ResourceClaim) -> None:
        """The API accepted the write; the answer replaces the assumption until the informer
        reaches its resourceVersion."""
        key = claim.key
        observed = self._claims.get(key)
        written = _rv(claim.metadata.resource_version)
        if observed is not None and _rv(observed.metadata.resource_version) >= written:
            self._assumed_claims.pop(key, None)
        else:
            self._assumed_claims[key] = (claim, written)
        self._refresh_claim(key)

    def forget_claim(self, key: str) -> None:
        if self._assumed_claims.pop(key, None) is not None:
            self._refresh_claim(key)

    def devices_in_use(self) -> Collection[DeviceRef]:
        return self._holders.keys()

    # -- device classes and slices -------------------------------------------------------------

    def set_device_class(self, device_class: DeviceClass) -> frozenset[Kind]:
        self._classes[device_class.metadata.name] = device_class
        return _DRA

    def delete_device_class(self, name: str) -> frozenset[Kind]:
        self._classes.pop(name, None)
        return _DRA

    def device_classes(self) -> Mapping[str, DeviceClass]:
        return self._classes

    def set_taint_rule(self, rule: DeviceTaintRule) -> frozenset[Kind]:
        self._taint_rules[rule.metadata.name] = rule
        return _DRA

    def delete_taint_rule(self, name: str) -> frozenset[Kind]:
        self._taint_rules.pop(name, None)
        return _DRA

    def device_taint_rules(self) -> Sequence[DeviceTaintRule]:
        return tuple(self._taint_rules.values())

    def set_slice(self, resource_slice: ResourceSlice) -> frozenset[Kind]:
        self.slices.upsert(resource_slice)
        return _DRA

    def delete_slice(self, name: str) -> frozenset[Kind]:
        self.slices.delete(name)
        return _DRA

    def devices_for(self, node: NodeFacts) -> Sequence[DeviceView]:
        return self.slices.devices_for(node)
