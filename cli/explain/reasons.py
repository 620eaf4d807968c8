"""Every reason cdo's services give, and what it means to the person asking why (pure data).

A reason is looked up under the topic where it appears, because the services reuse words
(``NoClique`` is a node's IMEX condition and an IMEX agent's refusal of a claim; ``Placed`` a
pod's condition and a domain's):

=================  ===========================================================================
topic              where the reason appears, and who writes it
=================  ===========================================================================
``placement``      a pod's ``cdo.dev/Placed`` condition and the Warning Events on the domain
                   (clique allocator: the placement engine's reasons, ``GangComplete``,
                   ``GangSizeUndeclared``, ``InvalidRequest``, ``Placed``)
``allocator``      the allocator's other Events on the domain (reserved, grown, failover ...)
``domain``         the domain's conditions ``Ready``, ``Placed``, ``Degraded``, ``Deleting``,
                   ``PerGpuFaults``, and the domain controller's Events
``imex-node``      a node's ``cdo.dev/ImexReady`` condition (IMEX agent)
``imex-claim``     the IMEX agent refusing a pod's claim a channel (``refused (Reason)`` in a
                   ``FailedPrepareDynamicResources`` Event of the pod)
``imex-domain``    the clique's IMEX domain state in a node's ``NodeImexState`` (IMEX agent)
``gpu-health``     a node's ``cdo.dev/GpuHealthy`` condition (health monitor)
=================  ===========================================================================

A test enumerates the reasons from the services' own constants and fails for one missing here.
"""

from __future__ import annotations

import enum

import msgspec


class Topic(enum.StrEnum):
    PLACEMENT = "placement"
    ALLOCATOR = "allocator"
    DOMAIN = "domain"
    IMEX_NODE = "imex-node"
    IMEX_CLAIM = "imex-claim"
    IMEX_DOMAIN = "imex-domain"
    GPU_HEALTH = "gpu-health"


class Meaning(msgspec.Struct, frozen=True, kw_only=True):
    """What a reason means (``what``) and what to do or wait for (``then``; "" when nothing)."""

    what: str
    then: str = ""
    problem: bool = True
    """False for reasons that say all is well (``Placed``, ``ImexReady``, ``Healthy``)."""


def _ok(what: str) -> Meaning:
    return Meaning(what=what, problem=False)


_CAPACITY_THEN = "it is placed when capacity frees up; see CLIQUES below"

MEANINGS: dict[tuple[Topic, str], Meaning] = {
    # -- clique allocator: why a pod is (not) placed ---------------------------------------
    (Topic.PLACEMENT, "Placed"): _ok("the allocator pinned the pod to a member node"),
    (Topic.PLACEMENT, "InvalidRequest"): Meaning(
        what="the gang can never be placed as written (e.g. a pod's GPU count does not divide "
        "a node's)",
        then="fix the workload or the domain's spec.gang; the message names the field",
    ),
    (Topic.PLACEMENT, "LargerThanAnyClique"): Meaning(
        what="one slice needs more GPUs than any clique has even when empty",
        then="lower spec.gang.sliceSize (or spec.numNodes), or let the allocator cut slices",
    ),
    (Topic.PLACEMENT, "LargerThanCluster"): Meaning(
        what="the gang needs more GPUs than all cliques together have even when empty",
        then="it waits for the cluster to grow; shrink the gang to run now",
    ),
    (Topic.PLACEMENT, "InsufficientCapacity"): Meaning(
        what="no clique (or set of cliques) has room for the gang now", then=_CAPACITY_THEN
    ),
    (Topic.PLACEMENT, "CliqueFull"): Meaning(
        what="a slice the domain holds must grow and its clique has no room for the new pods",
        then="it grows when pods in that clique end; a slice never grows into another clique",
    ),
    (Topic.PLACEMENT, "CliqueUnavailable"): Meaning(
        what="a slice's clique is no longer in the cluster (its nodes were relabelled or removed)",
        then="with spec.failover.policy Move the slice fails over after its grace",
    ),
    (Topic.PLACEMENT, "NoFreeChannel"): Meaning(
        what="every clique with room has all of its IMEX channels in use",
        then="it is placed when a domain in such a clique ends",
    ),
    (Topic.PLACEMENT, "PodConstraints"): Meaning(
        what="the GPUs exist, but the pods' own constraints (selector, affinity, taints not "
        "tolerated, CPU/memory, anti-affinity) rule out the nodes that have them",
        then="the message names the constraint and the nodes; relax it or free those nodes",
    ),
    (Topic.PLACEMENT, "GangComplete"): Meaning(
        what="every slot the gang wants is taken; this pod is one more than the gang size",
        then="it waits for one of the gang's pods to end (or raise spec.gang.size)",
    ),
    (Topic.PLACEMENT, "WaitingForGpuPods"): Meaning(
        what="the pod asks for no GPU, only the domain's IMEX channel: it goes to a clique the "
        "domain's pods that take GPUs are placed in, and none of them is placed yet",
        then="it is placed as soon as they are; the message says why they wait",
    ),
    (Topic.PLACEMENT, "NoChannelAvailable"): Meaning(
        what="the pod asks for no GPU, but no node can give it the domain's IMEX channel: every "
        "node of the domain's cliques (of any clique, for a domain of such pods only) has no "
        "free channel attachment device, takes no new pods, or is ruled out by the pod's "
        "constraints; or those cliques have no free channel",
        then="it is placed when a device or channel frees up; the message counts the nodes by "
        "reason (kubectl get resourceslices shows each node's devices)",
    ),
    (Topic.PLACEMENT, "GangSizeUndeclared"): Meaning(
        what="a pod of the domain is controlled by a kind cdo cannot size (not a ReplicaSet, "
        "StatefulSet, Job, JobSet or LeaderWorkerSet), so the gang's size is unknown",
        then="set spec.gang.size on the ComputeDomain (and spec.gang.unitLabel to place groups "
        "of pods independently)",
    ),
    # -- clique allocator: its other Events ------------------------------------------------
    (Topic.ALLOCATOR, "Reserved"): _ok("the allocator reserved the gang's nodes and channel"),
    (Topic.ALLOCATOR, "Grown"): _ok("the allocator reserved room for more pods"),
    (Topic.ALLOCATOR, "Shrunk"): _ok("the allocator released pod slots the gang no longer needs"),
    (Topic.ALLOCATOR, "PlacementDeleted"): _ok(
        "no pod uses the domain's claims any more: its nodes and channels were released"
    ),
    (Topic.ALLOCATOR, "PlacedWithoutNvlink"): _ok(
        "no node the pods can use has multi-node NVLink: the scheduler places them, without IMEX"
    ),
    (Topic.ALLOCATOR, "SliceStuck"): Meaning(
        what="a slice cannot be made whole in its clique (clique gone or too few healthy nodes)",
        then="it fails over after spec.failover.graceSeconds (policy Move) or waits (Wait)",
    ),
    (Topic.ALLOCATOR, "FailedOver"): _ok(
        "a stuck slice moved to another clique; its old pods are evicted and recreated there"
    ),
    (Topic.ALLOCATOR, "FailoverBlocked"): Meaning(
        what="a stuck slice's grace is over but no other clique has room for it",
        then="it moves when another clique has room; the message says what is missing",
    ),
    # -- domain controller: conditions and Events ------------------------------------------
    (Topic.DOMAIN, "AllMembersReady"): _ok("every pod runs on its member node, IMEX ready"),
    (Topic.DOMAIN, "Placed"): _ok("the allocator placed the domain"),
    (Topic.DOMAIN, "PlacedWithoutNvlink"): _ok(
        "the domain runs without IMEX: no node of its pods has multi-node NVLink"
    ),
    (Topic.DOMAIN, "Released"): _ok("the allocator released the domain's nodes and channel"),
    (Topic.DOMAIN, "WaitingForPlacement"): Meaning(
        what="the allocator has not placed (all of) the gang yet",
        then="see PODS below: each waiting pod's cdo.dev/Placed condition says why",
    ),
    (Topic.DOMAIN, "PodsNotRunning"): Meaning(
        what="the gang is placed but some pods do not run yet",
        then="see the pods' events (image pulls, claims the IMEX agent refused)",
    ),
    (Topic.DOMAIN, "Deleting"): Meaning(what="the domain is being deleted", then=""),
    (Topic.DOMAIN, "TemplateNameConflict"): Meaning(
        what="the domain's ResourceClaimTemplate name is taken by an object it does not own",
        then="rename spec.channel.resourceClaimTemplate.name or delete the other template",
    ),
    (Topic.DOMAIN, "Healthy"): _ok("every member node is healthy"),
    (Topic.DOMAIN, "NotPlaced"): Meaning(
        what="the domain is not placed, so nothing can be degraded yet", problem=False
    ),
    (Topic.DOMAIN, "NodeFault"): Meaning(
        what="a member node carries the cdo.dev/gpu-fault taint",
        then="see NODES below; its pods are replaced in the slice's clique",
    ),
    (Topic.DOMAIN, "NodeMissing"): Meaning(
        what="a member node is gone from the cluster",
        then="its pods are replaced; the slice fails over if its clique cannot hold it",
    ),
    (Topic.DOMAIN, "NodeOutOfClique"): Meaning(
        what="a member node left its slice's clique (its clique label changed: fabric lost)",
        then="check the node's fabric state; the slice fails over after its grace",
    ),
    (Topic.DOMAIN, "NodeNotReady"): Meaning(
        what="a member node's kubelet is not Ready",
        then="its pods are evicted after the node's NoExecute toleration",
    ),
    (Topic.DOMAIN, "ImexNotReady"): Meaning(
        what="a member node's IMEX daemon is not ready",
        then="see IMEX below: the node's cdo.dev/ImexReady reason",
    ),
    (Topic.DOMAIN, "MembersMissing"): Meaning(
        what="the placement holds room for fewer pods than the gang: replacements wait",
        then="see PODS below for why the replacements are not placed",
    ),
    (Topic.DOMAIN, "WaitingForPods"): Meaning(
        what="deletion waits for the pods that use the domain's claims to end",
        then="delete the workload",
    ),
    (Topic.DOMAIN, "WaitingForPlacementRelease"): Meaning(
        what="deletion waits for the allocator to release the domain's placement",
        then="the clique allocator must run",
    ),
    (Topic.DOMAIN, "Releasing"): Meaning(
        what="deletion is releasing the claim template", then="", problem=False
    ),
    (Topic.DOMAIN, "DeviceTaintRules"): _ok(
        "a fault of one DRA GPU of the domain's pods is marked on that GPU alone"
    ),
    (Topic.DOMAIN, "DeviceTaintRuleNotServed"): Meaning(
        what="the cluster serves no DeviceTaintRule (before Kubernetes 1.37): a fault of one DRA "
        "GPU of the domain's pods taints its whole node",
        then="upgrade to Kubernetes 1.37 to keep such faults to their GPU; "
        "`cdo preflight` lists the optional APIs",
    ),
    (Topic.DOMAIN, "Ready"): _ok("the domain became Ready"),
    (Topic.DOMAIN, "NotReady"): Meaning(what="the domain stopped being Ready"),
    (Topic.DOMAIN, "Degraded"): Meaning(what="the domain became Degraded"),
    (Topic.DOMAIN, "Recovered"): _ok("the domain is no longer Degraded"),
    # -- IMEX agent: the node's condition ---------------------------------------------------
    (Topic.IMEX_NODE, "ImexReady"): _ok("the node's IMEX daemon answers READY"),
    (Topic.IMEX_NODE, "NoClique"): Meaning(
        what="the node has no NVLink clique (no nvidia.com/gpu.clique label)",
        then="check the health monitor on the node and its GPUs' fabric state",
    ),
    (Topic.IMEX_NODE, "NotInRoster"): Meaning(
        what="the node is not a member of its clique's IMEX node map (slot or address clash)",
        then="the message names the clash; see the IMEX agent's log",
    ),
    (Topic.IMEX_NODE, "ForeignImexDaemon"): Meaning(
        what="another IMEX daemon (not cdo's) runs on the node; cdo does not start its own",
        then="remove the other IMEX installation (e.g. NVIDIA's driver's daemon)",
    ),
    (Topic.IMEX_NODE, "NotRunning"): Meaning(
        what="the node's IMEX daemon is not running (exited; the agent restarts it)"
    ),
    (Topic.IMEX_NODE, "DaemonNotReady"): Meaning(
        what="the node's IMEX daemon runs but does not answer READY yet",
        then="pods wait for it when their claims are prepared",
    ),
    # -- IMEX agent: refusing a claim a channel ---------------------------------------------
    (Topic.IMEX_CLAIM, "NoPod"): Meaning(
        what="the pod's channel claim is reserved for no pod",
        then="a channel goes only to a pod the allocator placed",
    ),
    (Topic.IMEX_CLAIM, "SharedClaim"): Meaning(
        what="one channel claim is reserved for several pods; a channel claim serves one pod",
        then="use the domain's ResourceClaimTemplate so each pod gets its own claim",
    ),
    (Topic.IMEX_CLAIM, "NoClique"): Meaning(
        what="the pod's node has no NVLink clique, so it cannot join a domain"
    ),
    (Topic.IMEX_CLAIM, "NotPinned"): Meaning(
        what="the allocator placed no pod of that name for the domain",
        then="a pod of another domain, or bound past the allocator's gate",
    ),
    (Topic.IMEX_CLAIM, "SeatWithoutUid"): Meaning(
        what="the placement predates pod uids; the allocator adds it on its next reconcile",
        then="the kubelet's retry succeeds then",
        problem=False,
    ),
    (Topic.IMEX_CLAIM, "OtherPod"): Meaning(
        what="the seat belongs to an earlier pod of the same name",
        then="the allocator seats the new pod; the kubelet retries",
    ),
    (Topic.IMEX_CLAIM, "PinnedElsewhere"): Meaning(
        what="the pod runs on another node than the one the allocator pinned it to"
    ),
    (Topic.IMEX_CLAIM, "OtherClique"): Meaning(
        what="the pod's slice is in another clique than its node's"
    ),
    # -- IMEX agent: the clique's IMEX domain as a node sees it ------------------------------
    (Topic.IMEX_DOMAIN, "UP"): _ok("every member's daemon is READY and connected"),
    (Topic.IMEX_DOMAIN, "DEGRADED"): Meaning(
        what="some members' daemons are not READY or not connected to each other",
        then="a node joining or leaving passes through this; lasting, see the agents' logs",
    ),
    (Topic.IMEX_DOMAIN, "DOWN"): Meaning(what="no member's IMEX daemon is READY"),
    (Topic.IMEX_DOMAIN, "UNKNOWN"): Meaning(what="the node's own daemon is not READY yet"),
    # -- health monitor: the node's GPU condition --------------------------------------------
    (Topic.GPU_HEALTH, "GpuHealthy"): _ok("no GPU, NVLink or fabric fault"),
    (Topic.GPU_HEALTH, "GpuWarning"): Meaning(
        what="a GPU warning that needs nothing of the node", problem=False
    ),
    (Topic.GPU_HEALTH, "GpuDegraded"): Meaning(
        what="a GPU warning that keeps new work away (NoSchedule taint)"
    ),
    (Topic.GPU_HEALTH, "GpuFault"): Meaning(
        what="a fatal GPU fault: workloads must move (NoExecute taint)"
    ),
    (Topic.GPU_HEALTH, "RecoveryHoldDown"): Meaning(
        what="the faults cleared; the taint stays for the hold-down",
        then="it goes after CDO_HEALTH_HOLD_DOWN_S of health",
    ),
    (Topic.GPU_HEALTH, "NvmlUnavailable"): Meaning(what="the health monitor cannot read NVML"),
    (Topic.GPU_HEALTH, "CircuitBreakerOpen"): Meaning(
        what="a fatal fault, but the circuit breaker holds the NoExecute taint back (too much "
        "of the clique or cluster is tainted already)"
    ),
    (Topic.GPU_HEALTH, "GpuDeviceFault"): Meaning(
        what="a GPU of the node is faulty; only the pods holding it are affected (device taint)"
    ),
}

UNKNOWN = Meaning(what="(a reason this version of cdo does not know)")


def meaning(topic: Topic, reason: str) -> Meaning:
    return MEANINGS.get((topic, reason), UNKNOWN)


def known(topic: Topic, reason: str) -> bool:
    return (topic, reason) in MEANINGS
