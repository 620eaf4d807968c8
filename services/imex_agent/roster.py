"""The clique roster: which node holds which slot of the clique's static node map (pure).

Every agent publishes, on its own Node only, the address its daemon binds to and its slot (see
:mod:`services.imex_agent.names`). The slot is the node's tray index from NVML platform info
(``source=platform``); a node whose platform does not report one claims the lowest slot no other
node of the clique holds (``source=claimed``). Each agent is the single writer of its own claim;
two nodes that claim one slot are told apart here, the same way on every node: a platform slot
beats a claimed one, then the lower node name wins, and the loser claims another slot.

Members are the Nodes labelled ``nvidia.com/gpu.clique=<clique>`` whose agent published an
address and a slot for that clique. Every member computes the same roster from the same Nodes.

**The node map is static.** ``nodes_config.cfg`` lists every slot of the clique, whether a node
holds it or not: ``slots`` stable hostnames (``cdo-imex-<clique tag>-<slot>``, maxNodesPerIMEXDomain
of them, 18 on an NVL72 rack), in slot order. It depends on the clique and the slot count only,
so it is byte-identical on every node and never changes while the clique does not. Membership
lives in the name -> address mapping (:meth:`Roster.hosts`): a member's slot resolves to its
address, an empty slot to a sentinel address nothing listens on, which IMEX sees as a peer that
is down. A node whose slot is outside the map is left out of the roster, with the reason.

The clique tag (a digest of the clique string) keeps the maps of two cliques distinct, so a
daemon can never be admitted into another clique's domain by accident, and daemons of different
domains never share hostnames.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

import msgspec

from services.imex_agent.names import (
    ADDRESS_ANNOTATION,
    CLIQUE_ANNOTATION,
    SLOT_ANNOTATION,
    SLOT_SOURCE_ANNOTATION,
    SLOT_SOURCE_CLAIMED,
    SLOT_SOURCE_PLATFORM,
)
from shared.crds.names import CLIQUE_LABEL
from shared.kube.meta import KubeObject

MAX_SLOT = 1023
"""Slots above this are ignored as garbage; a clique has at most a few dozen nodes."""

NVL72_SLOTS = 18
"""maxNodesPerIMEXDomain of an NVL72 rack: its 18 compute trays."""


class MemberRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What one node's agent published about itself."""

    node: str
    address: str
    slot: int
    source: str = SLOT_SOURCE_PLATFORM


class Member(msgspec.Struct, frozen=True, kw_only=True):
    """One node of the roster, with the stable hostname of its slot."""

    node: str
    address: str
    slot: int
    hostname: str


class Exclusion(msgspec.Struct, frozen=True, kw_only=True):
    """A node left out of the roster, and why."""

    node: str
    reason: str


class Roster(msgspec.Struct, frozen=True, kw_only=True):
    """The clique's members in slot order; the same value on every member.

    ``slots`` is the size of the static node map (maxNodesPerIMEXDomain); every member's slot
    is below it.
    """

    clique: str
    slots: int = NVL72_SLOTS
    members: tuple[Member, ...] = ()
    excluded: tuple[Exclusion, ...] = ()

    @property
    def entries(self) -> tuple[str, ...]:
        """The node map: the stable hostname of every slot, held or empty, in slot order."""
        return slot_hostnames(self.clique, self.slots)

    def hosts(self, *, empty: str) -> dict[str, str]:
        """Hostname -> address of every slot: its member's address, or ``empty`` (the sentinel)."""
        held = {member.slot: member.address for member in self.members}
        return {hostname: held.get(slot, empty) for slot, hostname in enumerate(self.entries)}

    def member(self, node: str) -> Member | None:
        return next((m for m in self.members if m.node == node), None)

    def at(self, slot: int) -> Member | None:
        """The member holding ``slot``, or None for an empty slot."""
        return next((m for m in self.members if m.slot == slot), None)

    def by_address(self, address: str) -> Member | None:
        return next((m for m in self.members if m.address == address), None)


def clique_tag(clique: str) -> str:
    """A short, DNS-safe digest of the clique string."""
    return hashlib.sha256(clique.encode()).hexdigest()[:8]


def slot_hostname(clique: str, slot: int) -> str:
    """The stable name of ``slot`` in ``clique``'s node map."""
    return f"cdo-imex-{clique_tag(clique)}-{slot:02d}"


def slot_hostnames(clique: str, slots: int) -> tuple[str, ...]:
    """The stable names of every slot of ``clique``'s node map, in slot order."""
    return tuple(slot_hostname(clique, slot) for slot in range(slots))


def record_of(node: KubeObject, clique: str) -> MemberRecord | None:
    """The node's published record if it is labelled and annotated for ``clique``."""
    meta = node.metadata
    if meta.labels.get(CLIQUE_LABEL) != clique:
        return None
    annotations = meta.annotations
    if annotations.get(CLIQUE_ANNOTATION) != clique:
        return None
    address = annotations.get(ADDRESS_ANNOTATION, "")
    slot = _slot(annotations.get(SLOT_ANNOTATION, ""))
    if not address or slot is None:
        return None
    source = annotations.get(SLOT_SOURCE_ANNOTATION, SLOT_SOURCE_PLATFORM)
    if source not in (SLOT_SOURCE_PLATFORM, SLOT_SOURCE_CLAIMED):
        source = SLOT_SOURCE_CLAIMED
    return MemberRecord(node=meta.name, address=address, slot=slot, source=source)


def _slot(text: str) -> int | None:
    if not text.isdigit():
        return None
    slot = int(text)
    return slot if slot <= MAX_SLOT else None


def _precedence(record: MemberRecord) -> tuple[bool, str]:
    """Sort key: the first record wins a contested slot or address."""
    return (record.source != SLOT_SOURCE_PLATFORM, record.node)


def build_roster(
    clique: str, records: Iterable[MemberRecord], *, slots: int = NVL72_SLOTS
) -> Roster:
    """The roster of ``clique`` from its nodes' records (any order, one per node).

    ``slots`` is the size of the node map; a record whose slot is outside it is left out.
    """
    winners: dict[int, MemberRecord] = {}
    addresses: dict[str, MemberRecord] = {}
    excluded: list[Exclusion] = []
    for record in sorted(records, key=_precedence):
        if record.slot >= slots:
            excluded.append(
                Exclusion(
                    node=record.node,
                    reason=f"slot {record.slot} is outside the node map of {slots} slots "
                    f"(0..{slots - 1}, maxNodesPerIMEXDomain)",
                )
            )
            continue
        holder = winners.get(record.slot)
        if holder is not None:
            excluded.append(
                Exclusion(node=record.node, reason=f"slot {record.slot} is held by {holder.node}")
            )
            continue
        twin = addresses.get(record.address)
        if twin is not None:
            excluded.append(
                Exclusion(
                    node=record.node, reason=f"address {record.address} is used by {twin.node}"
                )
            )
            continue
        winners[record.slot] = record
        addresses[record.address] = record
    members = tuple(
        Member(
            node=record.node,
            address=record.address,
            slot=slot,
            hostname=slot_hostname(clique, slot),
        )
        for slot, record in sorted(winners.items())
    )
    return Roster(
        clique=clique,
        slots=slots,
        members=members,
        excluded=tuple(sorted(excluded, key=lambda e: e.node)),
    )


def choose_slot(
    *,
    node: str,
    platform_slot: int | None,
    current: MemberRecord | None,
    others: Iterable[MemberRecord],
) -> tuple[int, str]:
    """The slot (and its source) this node should publish.

    ``current`` is what the node published before; ``others`` the records of the clique's other
    nodes. A platform slot is always taken as is. Without one, a claim is kept while no other
    node beats it for that slot; otherwise the lowest slot nobody holds is claimed.
    """
    if platform_slot is not None:
        return platform_slot, SLOT_SOURCE_PLATFORM
    rivals = [record for record in others if record.node != node]
    if current is not None and current.source == SLOT_SOURCE_CLAIMED:
        mine = MemberRecord(
            node=node, address=current.address, slot=current.slot, source=SLOT_SOURCE_CLAIMED
        )
        beaten = any(
            rival.slot == mine.slot and _precedence(rival) < _precedence(mine) for rival in rivals
        )
        if not beaten:
            return current.slot, SLOT_SOURCE_CLAIMED
    held = {rival.slot for rival in rivals}
    slot = next(candidate for candidate in range(MAX_SLOT + 2) if candidate not in held)
    return slot, SLOT_SOURCE_CLAIMED


def render_nodes_config(clique: str, *, slots: int) -> str:
    """``nodes_config.cfg``: a comment naming the clique, then the hostname of every slot.

    Only the clique and the slot count go in, so every node of the clique renders the same
    bytes, whoever is a member at the time.
    """
    lines = [
        f"# IMEX node map of clique {clique}, written by the cdo IMEX agent: every slot of the",
        "# clique, in slot order. Names resolve through the agent's hosts file (an empty slot",
        "# to an address nothing listens on).",
        *slot_hostnames(clique, slots),
    ]
    return "\n".join(lines) + "\n"


def annotations_for(*, clique: str, address: str, slot: int, source: str) -> dict[str, str]:
    """The annotations a node's agent publishes on its own Node."""
    return {
        CLIQUE_ANNOTATION: clique,
        ADDRESS_ANNOTATION: address,
        SLOT_ANNOTATION: str(slot),
        SLOT_SOURCE_ANNOTATION: source,
    }


def annotations_current(annotations: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    return all(annotations.get(key) == value for key, value in wanted.items())
