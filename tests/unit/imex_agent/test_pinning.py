"""Who gets a domain's channel: only the pod the allocator pinned for it on this node.

Unit tests of :func:`pinning.pinned_here`, and properties of the whole claim decision
(:func:`claims.decide`, with the Placements picked as the resolver picks them) over forged
claims: in the domain's namespace or another, with labels copied from the domain or another,
recreated under the same name, reserved for a pod of another domain, for a pod recreated under a
member's name, for a pod pinned to another node, or for a pod never placed. None gets a channel
it is not entitled to, and each refusal names the claim or its pod.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.imex_agent.claims import (
    ClaimRefusedError,
    PlacementMeta,
    PlacementView,
    Resolution,
    decide,
)
from services.imex_agent.pinning import Refusal, Seating, pinned_here
from shared.crds.names import ALLOCATOR_USER, WRITTEN_BY_ANNOTATION
from shared.crds.placement import PlacementSpec, PodRef, SliceMember
from shared.kube.models import ResourceClaim, ResourceClaimConsumerReference
from shared.kubeletapi import Claim

DRIVER = "compute-domain.cdo.dev"
CLIQUE = "6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11.1"
NODES = ("n0", "n1", "n2", "n3")


class Member(msgspec.Struct, frozen=True):
    name: str
    uid: str
    node: str


class Domain(msgspec.Struct, frozen=True):
    namespace: str
    name: str
    uid: str
    channel: int
    members: tuple[Member, ...]


# Two domains in team-a, and one in team-b with the same name as team-a's first.
TRAIN = Domain(
    "team-a",
    "train",
    "d-train",
    7,
    tuple(Member(f"train-{i}", f"u-train-{i}", NODES[i // 2]) for i in range(4)),
)
OTHER = Domain(
    "team-a",
    "other",
    "d-other",
    9,
    tuple(Member(f"other-{i}", f"u-other-{i}", NODES[i]) for i in range(4)),
)
NAMESAKE = Domain(
    "team-b",
    "train",
    "d-namesake",
    11,
    tuple(Member(f"train-{i}", f"u-b-train-{i}", NODES[3 - i]) for i in range(2)),
)
DOMAINS = (TRAIN, OTHER, NAMESAKE)


def placement_of(domain: Domain) -> PlacementView:
    by_node: dict[str, list[dict[str, Any]]] = {}
    for rank, member in enumerate(domain.members):
        by_node.setdefault(member.node, []).append(
            {"name": member.name, "uid": member.uid, "rank": rank}
        )
    members = [
        {"node": node, "slot": NODES.index(node), "gpus": len(pods), "pods": pods}
        for node, pods in sorted(by_node.items())
    ]
    body = {
        "metadata": {
            "name": domain.name,
            "namespace": domain.namespace,
            "annotations": {WRITTEN_BY_ANNOTATION: ALLOCATOR_USER},
            "ownerReferences": [
                {
                    "apiVersion": "resource.nvidia.com/v1beta1",
                    "kind": "ComputeDomain",
                    "name": domain.name,
                    "uid": domain.uid,
                }
            ],
        },
        "spec": {
            "gpusPerPod": 1,
            "size": len(domain.members),
            "slices": [
                {
                    "index": 0,
                    "clique": CLIQUE,
                    "channel": domain.channel,
                    "firstRank": 0,
                    "size": len(domain.members),
                    "members": members,
                }
            ],
        },
    }
    return msgspec.convert(body, PlacementView)


PLACEMENTS = {(d.namespace, d.name): placement_of(d) for d in DOMAINS}


def claim_object(
    *, namespace: str, uid: str, labels: dict[str, str], pods: list[tuple[str, str]], node: str
) -> ResourceClaim:
    body = {
        "metadata": {"name": "forged", "namespace": namespace, "uid": uid, "labels": labels},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "channel", "driver": DRIVER, "pool": node, "device": "a-0"}
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": n, "uid": u} for n, u in pods],
        },
    }
    return msgspec.convert(body, ResourceClaim)


def resolve(claim: Claim, obj: ResourceClaim, *, node: str) -> Resolution:
    """:func:`decide` with the Placements :class:`claims.ClaimResolver` would read."""
    domain = obj.metadata.labels.get("cdo.dev/compute-domain", "")
    domain_uid = obj.metadata.labels.get("cdo.dev/compute-domain-uid", "")
    placement = PLACEMENTS.get((claim.namespace, domain)) if domain else None
    elsewhere: PlacementMeta | None = None
    if domain_uid and (placement is None or placement.domain_uid not in ("", domain_uid)):
        elsewhere = next(
            (
                p
                for p in PLACEMENTS.values()
                if p.domain_uid == domain_uid and p.metadata.namespace != claim.namespace
            ),
            None,
        )
    result = decide(
        claim=claim,
        obj=obj,
        placement=placement,
        elsewhere=elsewhere,
        node=node,
        clique=CLIQUE,
        driver=DRIVER,
        writer=ALLOCATOR_USER,
    )
    assert isinstance(result, Resolution)
    return result


def labels_of(domain: Domain) -> dict[str, str]:
    return {"cdo.dev/compute-domain": domain.name, "cdo.dev/compute-domain-uid": domain.uid}


# -- pinned_here ---------------------------------------------------------------------------------


def refs(*pods: tuple[str, str]) -> tuple[ResourceClaimConsumerReference, ...]:
    return tuple(ResourceClaimConsumerReference(resource="pods", name=n, uid=u) for n, u in pods)


def pinned(*pods: tuple[str, str], node: str = "n0", spec: PlacementSpec | None = None) -> Any:
    return pinned_here(
        consumers=refs(*pods),
        spec=PLACEMENTS[("team-a", "train")].spec if spec is None else spec,
        claim="ResourceClaim team-a/c",
        domain="ComputeDomain team-a/train",
        node=node,
        clique=CLIQUE,
    )


def test_the_member_pod_on_its_node_is_granted_its_seat() -> None:
    seating = pinned(("train-1", "u-train-1"), node="n0")
    assert isinstance(seating, Seating)
    assert (seating.node, seating.pod.name, seating.seat.rank, seating.piece.channel) == (
        "n0",
        "train-1",
        1,
        7,
    )


@pytest.mark.parametrize(
    ("pods", "node", "reason", "message"),
    [
        ((), "n0", "NoPod", "ResourceClaim team-a/c of ComputeDomain team-a/train on node n0 is "
         "reserved for no pod (status.reservedFor): a channel goes only to a pod the allocator "
         "placed"),
        ((("train-0", "u-train-0"), ("x", "u-x")), "n0", "SharedClaim",
         "ResourceClaim team-a/c of ComputeDomain team-a/train on node n0 is reserved for 2 pods "
         "(train-0, x); a channel claim serves one pod"),
        ((("x", "u-x"),), "n0", "NotPinned",
         "pod x (uid u-x) is not a member of ComputeDomain team-a/train: the allocator pinned no "
         "pod of that name for it, so ResourceClaim team-a/c gets no channel on node n0"),
        ((("other-0", "u-other-0"),), "n0", "NotPinned", "pod other-0 (uid u-other-0) is not a "
         "member of ComputeDomain team-a/train"),
        ((("train-0", "u-new"),), "n0", "OtherPod",
         "pod train-0 (uid u-new) is not the pod the allocator pinned as train-0 for "
         "ComputeDomain team-a/train (that one has uid u-train-0), so ResourceClaim team-a/c "
         "gets no channel on node n0"),
        ((("train-2", "u-train-2"),), "n0", "PinnedElsewhere",
         "pod train-2 (uid u-train-2) is pinned to node n1 for ComputeDomain team-a/train, not "
         "to node n0: ResourceClaim team-a/c gets no channel here"),
    ],
)  # fmt: skip
def test_refusals_name_the_pod_and_why(
    pods: tuple[tuple[str, str], ...], node: str, reason: str, message: str
) -> None:
    refusal = pinned(*pods, node=node)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == reason
    assert refusal.message.startswith(message)


def test_a_reservation_of_another_kind_is_no_pod() -> None:
    refusal = pinned_here(
        consumers=(
            ResourceClaimConsumerReference(resource="jobs", name="train-0", uid="u-train-0"),
            ResourceClaimConsumerReference(
                resource="pods", name="train-0", uid="u-train-0", api_group="example.com"
            ),
        ),
        spec=PLACEMENTS[("team-a", "train")].spec,
        claim="ResourceClaim team-a/c",
        domain="ComputeDomain team-a/train",
        node="n0",
        clique=CLIQUE,
    )
    assert isinstance(refusal, Refusal) and refusal.reason == "NoPod"


def test_a_node_without_a_clique_and_a_slice_of_another_clique_are_refused() -> None:
    consumers = refs(("train-0", "u-train-0"))
    spec = PLACEMENTS[("team-a", "train")].spec

    def refused(clique: str | None) -> str:
        refusal = pinned_here(
            consumers=consumers, spec=spec, claim="c", domain="d", node="n0", clique=clique
        )
        assert isinstance(refusal, Refusal)
        return refusal.reason

    assert refused(None) == "NoClique"
    assert refused("other.1") == "OtherClique"


def with_channel_only(node: str, *pods: tuple[str, str]) -> PlacementSpec:
    """Team-a/train's record with ``pods`` seated on ``node`` as pods without GPUs."""
    spec = PLACEMENTS[("team-a", "train")].spec
    piece = spec.slices[0]
    extra = tuple(PodRef(name=name, uid=uid) for name, uid in pods)
    members = tuple(
        msgspec.structs.replace(m, channel_only_pods=extra) if m.node == node else m
        for m in piece.members
    )
    if not any(m.node == node for m in members):
        seat = SliceMember(node=node, slot=NODES.index(node), channel_only_pods=extra)
        members = (*members, seat)
    return msgspec.structs.replace(
        spec, channel_only=len(pods), slices=(msgspec.structs.replace(piece, members=members),)
    )


def test_a_seated_pod_without_gpus_gets_the_slices_channel_without_a_rank() -> None:
    # On a node of the slice that holds no GPU of the domain (n3), and on a GPU member (n0).
    for node in ("n3", "n0"):
        spec = with_channel_only(node, ("coordinator", "u-coordinator"))
        seating = pinned(("coordinator", "u-coordinator"), node=node, spec=spec)
        assert isinstance(seating, Seating)
        assert (seating.node, seating.piece.channel) == (node, 7)
        assert (seating.seat.rank, seating.seat.slice_rank) == (None, None)
        assert seating.seat.clique == CLIQUE


def test_a_pod_without_gpus_is_held_to_its_seat_like_any_member() -> None:
    spec = with_channel_only("n3", ("coordinator", "u-coordinator"))
    elsewhere = pinned(("coordinator", "u-coordinator"), node="n1", spec=spec)
    assert isinstance(elsewhere, Refusal) and elsewhere.reason == "PinnedElsewhere"
    impostor = pinned(("coordinator", "u-other"), node="n3", spec=spec)
    assert isinstance(impostor, Refusal) and impostor.reason == "OtherPod"
    unseated = pinned(("helper", "u-helper"), node="n3", spec=spec)
    assert isinstance(unseated, Refusal) and unseated.reason == "NotPinned"


def test_a_seat_without_a_uid_waits_for_the_allocator_to_record_it() -> None:
    spec = PLACEMENTS[("team-a", "train")].spec
    piece = spec.slices[0]
    members = tuple(
        msgspec.structs.replace(m, pods=tuple(msgspec.structs.replace(p, uid="") for p in m.pods))
        for m in piece.members
    )
    old = msgspec.structs.replace(spec, slices=(msgspec.structs.replace(piece, members=members),))
    refusal = pinned(("train-0", "u-train-0"), spec=old)
    assert isinstance(refusal, Refusal) and refusal.reason == "SeatWithoutUid"
    assert isinstance(pinned(("train-0", "u-train-0")), Seating)


# -- properties over forged claims ---------------------------------------------------------------

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12)
any_member = st.sampled_from([(d, m) for d in DOMAINS for m in d.members])


@st.composite
def forged(draw: st.DrawFn) -> tuple[Claim, ResourceClaim, str, Domain]:
    """A claim made to get ``target``'s channel on a node where it has no right to it."""
    target = draw(st.sampled_from(DOMAINS))
    node = draw(st.sampled_from(NODES))
    namespace = draw(st.sampled_from(["team-a", "team-b", target.namespace]))
    labels = draw(
        st.sampled_from(
            [
                labels_of(target),
                {"cdo.dev/compute-domain": target.name},
                labels_of(draw(st.sampled_from(DOMAINS))),
                {**labels_of(target), "app": draw(names)},
            ]
        )
    )
    kind = draw(
        st.sampled_from(["stranger", "recreated-pod", "other-domain", "elsewhere", "shared"])
    )
    here = [m for m in target.members if m.node == node]
    if kind == "stranger":
        pods = [(draw(names.filter(lambda n: n not in {m.name for m in target.members})), "u-x")]
    elif kind == "recreated-pod":
        victim = draw(st.sampled_from(target.members))
        pods = [(victim.name, draw(names.filter(lambda u: u != victim.uid)))]
    elif kind == "other-domain":
        _owner, member = draw(any_member.filter(lambda pair: pair[0] != target))
        pods = [(member.name, member.uid)]
    elif kind == "elsewhere":
        away = [m for m in target.members if m.node != node]
        victim = draw(st.sampled_from(away))
        pods = [(victim.name, victim.uid)]
    else:
        # A member's pod and another pod on one claim.
        victim = draw(st.sampled_from(here or list(target.members)))
        pods = [(victim.name, victim.uid), (draw(names), "u-y")]
    recreated = draw(st.booleans())
    claim = Claim(namespace=namespace, uid="c-1", name="forged")
    obj = claim_object(
        namespace=namespace,
        uid="c-2" if recreated else "c-1",
        labels=labels,
        pods=pods,
        node=node,
    )
    return claim, obj, node, target


def entitled(claim: Claim, obj: ResourceClaim, node: str, resolution: Resolution) -> bool:
    """Whether the grant is one the Placement of the granted domain really makes: its
    namespace is the claim's, and it pins the claim's one pod, by name and uid, to ``node``."""
    grant = resolution.grant
    domain = next(
        d for d in DOMAINS if (d.namespace, d.name) == (grant.domain_namespace, grant.domain_name)
    )
    (ref,) = obj.status.reserved_for
    return (
        domain.namespace == claim.namespace
        and obj.metadata.uid == claim.uid
        and grant.channel == domain.channel
        and Member(ref.name, ref.uid, node) in domain.members
    )


@settings(max_examples=400, deadline=None)
@given(case=forged())
def test_no_forged_claim_gets_the_channel_of_the_domain_it_targets(
    case: tuple[Claim, ResourceClaim, str, Domain],
) -> None:
    claim, obj, node, target = case
    try:
        resolution = resolve(claim, obj, node=node)
    except ClaimRefusedError as refused:
        message = str(refused)
        assert message
        assert claim.name in message or any(r.name in message for r in obj.status.reserved_for)
        return
    # Anything granted is another domain's, to a pod it pinned here: never the target's.
    assert (resolution.grant.domain_namespace, resolution.grant.domain_name) != (
        target.namespace,
        target.name,
    ) or resolution.grant.channel != target.channel
    assert entitled(claim, obj, node, resolution)


@settings(max_examples=200, deadline=None)
@given(
    namespace=st.sampled_from(["team-a", "team-b"]),
    labels=st.sampled_from([labels_of(d) for d in DOMAINS] + [{"x": "y"}]),
    pod=st.one_of(
        any_member.map(lambda pair: (pair[1].name, pair[1].uid)),
        st.tuples(names, names),
    ),
    node=st.sampled_from(NODES),
)
def test_whatever_the_labels_a_grant_goes_only_to_a_member_pinned_on_its_node(
    namespace: str, labels: dict[str, str], pod: tuple[str, str], node: str
) -> None:
    claim = Claim(namespace=namespace, uid="c-1", name="forged")
    obj = claim_object(namespace=namespace, uid="c-1", labels=labels, pods=[pod], node=node)
    try:
        resolution = resolve(claim, obj, node=node)
    except ClaimRefusedError:
        return
    assert entitled(claim, obj, node, resolution)


@pytest.mark.parametrize(
    ("domain", "member"),
    [pytest.param(d, m, id=f"{d.namespace}-{m.name}") for d in DOMAINS for m in d.members],
)
def test_every_real_member_gets_its_own_domains_channel_on_its_node(
    domain: Domain, member: Member
) -> None:
    claim = Claim(namespace=domain.namespace, uid="c-1", name="forged")
    obj = claim_object(
        namespace=domain.namespace,
        uid="c-1",
        labels=labels_of(domain),
        pods=[(member.name, member.uid)],
        node=member.node,
    )
    resolution = resolve(claim, obj, node=member.node)
    assert (resolution.grant.domain_uid, resolution.grant.channel) == (domain.uid, domain.channel)
