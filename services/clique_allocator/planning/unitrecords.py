"""A Placement cut into its gang units and put back together (pure).

A domain placed in units (``units.py``) has one Placement whose slices each name their
``unit``. Each unit is planned as a gang of its own, on a record of its own: :func:`unit_specs`
cuts the Placement into one such record per unit (its slices numbered from 0, ``unit`` left
out, ``size`` the ranks its slices cover, ``channelOnly`` the pods without GPUs seated in
them), and :func:`merge_units` writes the units' records back into one Placement. A slice
keeps its index in the Placement for as long as it lives; a new slice takes the lowest index no
other slice has.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import msgspec

from services.clique_allocator.placement import Reservation
from services.clique_allocator.planning.slices import reservations_of
from services.clique_allocator.units import unit_key
from shared.crds.placement import PlacementSlice, PlacementSpec


def unit_specs(spec: PlacementSpec) -> dict[str, PlacementSpec]:
    """One record per unit of ``spec`` (a domain that is one gang gives ``{"": spec}``, a
    record without slices none)."""
    by_unit: dict[str, list[PlacementSlice]] = {}
    for piece in sorted(spec.all_slices, key=lambda p: p.index):
        by_unit.setdefault(piece.unit, []).append(piece)
    if set(by_unit) == {""}:
        return {"": spec}
    return {
        unit: msgspec.structs.replace(
            spec,
            size=sum(piece.size for piece in pieces),
            channel_only=sum(piece.placed_channel_only for piece in pieces),
            slices=tuple(
                msgspec.structs.replace(piece, index=number, unit="")
                for number, piece in enumerate(pieces)
            ),
        )
        for unit, pieces in sorted(by_unit.items())
    }


def recorded_reservations(domain: str, spec: PlacementSpec) -> list[Reservation]:
    """The engine's reservations for a recorded Placement: each unit's under its own key."""
    return [
        reservation
        for unit, part in unit_specs(spec).items()
        for reservation in reservations_of(unit_key(domain, unit), part)
    ]


def merge_units(
    before: PlacementSpec | None, units: Mapping[str, PlacementSpec], *, gpus_per_pod: int
) -> PlacementSpec:
    """The Placement holding every unit's record; ``before`` gives the slices' indices."""
    indices: dict[tuple[str, int], int] = {}
    counted: dict[str, int] = {}
    for piece in sorted(before.all_slices if before is not None else (), key=lambda p: p.index):
        number = counted.get(piece.unit, 0)
        counted[piece.unit] = number + 1
        indices[piece.unit, number] = piece.index
    kept = {
        indices[unit, piece.index]
        for unit, part in units.items()
        for piece in part.slices
        if (unit, piece.index) in indices
    }
    fresh = (index for index in itertools.count() if index not in kept)
    slices = [
        msgspec.structs.replace(
            piece,
            index=indices[unit, piece.index] if (unit, piece.index) in indices else next(fresh),
            unit=unit,
        )
        for unit, part in sorted(units.items())
        for piece in part.slices
    ]
    evicting = {ref.uid: ref for part in units.values() for ref in part.evicting}
    return PlacementSpec(
        gpus_per_pod=gpus_per_pod,
        size=sum(part.size for part in units.values()),
        channel_only=sum(part.channel_only for part in units.values()),
        slice_size=next((part.slice_size for part in units.values() if part.slice_size), None),
        slices=tuple(sorted(slices, key=lambda p: p.index)),
        multi_node_nvlink=all(part.multi_node_nvlink for part in units.values()),
        evicting=tuple(sorted(evicting.values(), key=lambda ref: (ref.name, ref.uid))),
    )
