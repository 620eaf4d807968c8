"""From a claim the kubelet names to the channel its pod may have, and where that pod sits.

claim (namespace, name, uid) -> the ResourceClaim -> its pod (``status.reservedFor``) and its
label ``cdo.dev/compute-domain`` (copied from the domain's claim template, with
``cdo.dev/compute-domain-uid``) -> the domain's ``Placement`` (same namespace and name as the
domain) -> the slice that seats that pod on this node -> the slice's channel, clique and the
pod's ranks. Placements of the previous release (one clique, pods as plain names) are read
through :attr:`PlacementSpec.all_slices`, as their one slice.

The decision is the pure :func:`decide`; :class:`ClaimResolver` only reads the objects. A claim is
refused, with a message for the pod's events, when:

- it is gone or was recreated (its uid differs from the kubelet's);
- it has no device of this driver allocated on this node;
- it was not made from a domain's template (no domain label);
- its namespace is not its domain's: the domain uid it names belongs to a Placement in another
  namespace (a claim can only ever get the channel of a domain of its own namespace);
- the domain has no Placement yet, the Placement does not decode, or it belongs to another
  incarnation of the name;
- the Placement was not last written by the clique allocator: its ``cdo.dev/written-by``
  annotation, which the ``cdo-placement-writer`` admission policy holds to the user of every
  write, is not the allocator's user (a Placement written by anyone else, or before the policy
  was in place, gives no channel until the allocator writes it again);
- its pod is not a member the allocator pinned for the domain on this node
  (:func:`pinning.pinned_here`: the one ``reservedFor`` pod, by name **and uid**, seated on this
  node in a slice of this node's clique); so a hand-made claim that copies a domain's labels
  gets nothing, whatever pod uses it.

A claim of a domain whose record says it runs without IMEX (``multiNodeNvlink: false``) is
prepared with nothing injected (:class:`WithoutChannel`) once the checks up to the Placement
hold: there is no channel to keep from anyone.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from services.imex_agent.cdi import ChannelGrant
from services.imex_agent.checkpoint import DeviceRecord
from services.imex_agent.pinning import Refusal, pinned_here
from shared.crds.definitions import COMPUTE_DOMAINS, PLACEMENTS
from shared.crds.names import (
    DOMAIN_LABEL,
    DOMAIN_UID_LABEL,
    WRITTEN_BY_ANNOTATION,
)
from shared.crds.placement import PlacementSpec
from shared.errors import CdoError
from shared.kube.client import KubeClient
from shared.kube.meta import KubeObject, ListMeta
from shared.kube.models import ResourceClaim
from shared.kube.resources import RESOURCE_CLAIMS
from shared.kubeletapi import Claim
from shared.tracing.story import story_annotations


class ClaimRefusedError(CdoError):
    """The claim cannot be given a channel (now); the message says why, ``reason`` in a word."""

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


def refused_error(error: ClaimRefusedError) -> str:
    """The error the kubelet gets (and shows in the pod's Events): ``refused (Reason): why``,
    so that ``cdo explain`` can tell the reason."""
    return f"refused ({error.reason}): {error}" if error.reason else str(error)


class PlacementMeta(KubeObject, frozen=True, kw_only=True):
    """A Placement's metadata: enough to tell whose it is."""

    @property
    def domain_uid(self) -> str:
        """The uid of the ComputeDomain that owns the Placement ("" when it names none)."""
        for ref in self.metadata.owner_references:
            group = ref.api_version.rpartition("/")[0]
            if ref.kind == COMPUTE_DOMAINS.kind and group == COMPUTE_DOMAINS.group:
                return ref.uid
        return ""


class PlacementView(PlacementMeta, frozen=True, kw_only=True):
    """A Placement as the agent reads it: the shared spec, in either shape."""

    spec: PlacementSpec


class _PlacementList(msgspec.Struct, frozen=True, kw_only=True):
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: tuple[PlacementMeta, ...] = ()


class WithoutChannel(msgspec.Struct, frozen=True, kw_only=True):
    """A claim of a domain that runs without IMEX (its record says ``multiNodeNvlink: false``):
    prepared with nothing injected, as NVIDIA's driver does on nodes without a clique."""

    devices: tuple[DeviceRecord, ...]


class Resolution(msgspec.Struct, frozen=True, kw_only=True):
    grant: ChannelGrant
    devices: tuple[DeviceRecord, ...]
    story: dict[str, str] = msgspec.field(default_factory=dict)
    """The Placement's trace annotations: which trace preparing the claim belongs to."""


def allocated_devices(obj: ResourceClaim, *, driver: str, node: str) -> tuple[DeviceRecord, ...]:
    """The claim's devices of ``driver`` in this node's pool."""
    allocation = obj.status.allocation
    if allocation is None:
        return ()
    return tuple(
        DeviceRecord(request=result.request, pool=result.pool, device=result.device)
        for result in allocation.devices.results
        if result.driver == driver and result.pool == node
    )


def _the_claim(claim: Claim, obj: ResourceClaim | None, *, where: str) -> ResourceClaim:
    """The claim the kubelet names, as it is now, or ClaimRefusedError."""
    if obj is None:
        raise ClaimRefusedError(f"{where} does not exist")
    if obj.metadata.uid != claim.uid:
        raise ClaimRefusedError(
            f"{where} has uid {obj.metadata.uid}, not {claim.uid}: it was deleted and recreated"
        )
    return obj


def _the_domain(obj: ResourceClaim, *, where: str) -> tuple[str, str]:
    """The name and uid ("" when it names none) of the domain whose template made the claim,
    or ClaimRefusedError."""
    labels = obj.metadata.labels
    domain = labels.get(DOMAIN_LABEL, "")
    if not domain:
        raise ClaimRefusedError(
            f"{where} has no label {DOMAIN_LABEL}: it was not made from a ComputeDomain's "
            "claim template"
        )
    return domain, labels.get(DOMAIN_UID_LABEL, "")


def decide(
    *,
    claim: Claim,
    obj: ResourceClaim | None,
    placement: PlacementView | None,
    elsewhere: PlacementMeta | None,
    node: str,
    clique: str | None,
    driver: str,
    writer: str,
) -> Resolution | WithoutChannel:
    """The claim's channel grant and devices, or ClaimRefusedError (see the module docstring).

    ``placement`` is the Placement named like the claim's domain in the claim's namespace;
    ``elsewhere`` a Placement of the domain uid the claim names, found in another namespace;
    ``writer`` the clique allocator's user.
    """
    where = f"ResourceClaim {claim.namespace}/{claim.name}"
    obj = _the_claim(claim, obj, where=where)
    devices = allocated_devices(obj, driver=driver, node=node)
    if not devices:
        raise ClaimRefusedError(f"{where} has no {driver} device allocated on node {node}")
    domain, domain_uid = _the_domain(obj, where=where)
    if elsewhere is not None:
        raise ClaimRefusedError(
            f"{where} names ComputeDomain {elsewhere.metadata.namespace}/"
            f"{elsewhere.metadata.name} (uid {domain_uid}), which is in another namespace; a "
            "claim gets a channel only from a domain of its own namespace"
        )
    named = f"ComputeDomain {claim.namespace}/{domain}"
    if placement is None:
        raise ClaimRefusedError(
            f"{named} has no Placement yet (not placed), so {where} gets no channel; "
            "retriable: the allocator writes it before it pins the domain's pods"
        )
    if domain_uid and placement.domain_uid and placement.domain_uid != domain_uid:
        raise ClaimRefusedError(
            f"Placement {claim.namespace}/{domain} belongs to ComputeDomain uid "
            f"{placement.domain_uid}, but {where} was made for uid {domain_uid}"
        )
    written_by = placement.metadata.annotations.get(WRITTEN_BY_ANNOTATION, "")
    if written_by != writer:
        raise ClaimRefusedError(
            f"Placement {claim.namespace}/{domain} was last written by "
            f"{written_by or 'an unknown user'} ({WRITTEN_BY_ANNOTATION}), not by the clique "
            f"allocator ({writer}), so {where} gets no channel from it; retriable: the "
            "allocator writes it again",
            reason="NotWrittenByAllocator",
        )
    if not placement.spec.multi_node_nvlink:
        return WithoutChannel(devices=devices)
    seating = pinned_here(
        consumers=obj.status.reserved_for,
        spec=placement.spec,
        claim=where,
        domain=named,
        node=node,
        clique=clique,
    )
    if isinstance(seating, Refusal):
        raise ClaimRefusedError(seating.message, reason=seating.reason)
    grant = ChannelGrant(
        claim_uid=claim.uid,
        domain_namespace=claim.namespace,
        domain_name=domain,
        domain_uid=domain_uid or placement.domain_uid,
        channel=seating.piece.channel,
        seat=seating.seat,
    )
    story = story_annotations(placement.metadata.annotations)
    return Resolution(grant=grant, devices=devices, story=story)


_claim_decoder = msgspec.json.Decoder(ResourceClaim)
_placement_decoder = msgspec.json.Decoder(PlacementView)
_placement_list_decoder = msgspec.json.Decoder(_PlacementList)


def decode_placement(raw: bytes | None, *, namespace: str, name: str) -> PlacementView | None:
    """The Placement read from the API (None: there is none), or ClaimRefusedError when it does
    not decode (a record this agent cannot read gives no channel)."""
    if raw is None:
        return None
    try:
        return _placement_decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ClaimRefusedError(f"Placement {namespace}/{name} cannot be read: {exc}") from exc


class ClaimResolver:
    """Reads what :func:`decide` needs from the API, fresh for every claim."""

    def __init__(
        self,
        client: KubeClient,
        *,
        node: str,
        driver: str,
        clique: Callable[[], str | None],
        writer: str,
    ) -> None:
        self._client = client
        self._node = node
        self._driver = driver
        self._clique = clique
        self._writer = writer

    async def resolve(self, claim: Claim) -> Resolution | WithoutChannel:
        raw = await self._client.get_or_none(RESOURCE_CLAIMS, claim.name, namespace=claim.namespace)
        obj = _claim_decoder.decode(raw) if raw is not None else None
        placement: PlacementView | None = None
        elsewhere: PlacementMeta | None = None
        domain = obj.metadata.labels.get(DOMAIN_LABEL, "") if obj is not None else ""
        domain_uid = obj.metadata.labels.get(DOMAIN_UID_LABEL, "") if obj is not None else ""
        if domain:
            raw = await self._client.get_or_none(PLACEMENTS, domain, namespace=claim.namespace)
            placement = decode_placement(raw, namespace=claim.namespace, name=domain)
            mismatch = placement is None or placement.domain_uid not in ("", domain_uid)
            if domain_uid and mismatch:
                elsewhere = await self._placement_of(domain_uid, not_in=claim.namespace)
        return decide(
            claim=claim,
            obj=obj,
            placement=placement,
            elsewhere=elsewhere,
            node=self._node,
            clique=self._clique(),
            driver=self._driver,
            writer=self._writer,
        )

    async def _placement_of(self, domain_uid: str, *, not_in: str) -> PlacementMeta | None:
        """A Placement of the domain with ``domain_uid`` outside namespace ``not_in``."""
        listing = _placement_list_decoder.decode(await self._client.list(PLACEMENTS))
        return next(
            (
                item
                for item in listing.items
                if item.domain_uid == domain_uid and item.metadata.namespace != not_in
            ),
            None,
        )
