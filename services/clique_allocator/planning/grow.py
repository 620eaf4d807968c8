"""Step 2a of a plan: which ranks the gang adds, and which slice takes them (pure).

The domain's slices cover ranks ``0 .. end - 1``; a gang of ``size`` pods adds the ranks
``end .. size - 1``. Consecutive ranks stay together, so the last slice takes new ranks first:

- with a fixed slice size, up to that size (all or nothing there), and the rest open new
  slices of that size;
- without one, for a gang that fits one clique, all of them: the slice grows in its clique or
  the new pods wait (``CliqueFull``), as a domain never moves cliques;
- without one, for a gang larger than any clique, as many as its clique has room for (the
  engine's ``extend_last``), and the rest open the fewest new slices that fit.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from services.clique_allocator.planning.release import Released
from services.clique_allocator.planning.slices import SliceHold


class Growth(msgspec.Struct, frozen=True, kw_only=True):
    holds: tuple[SliceHold, ...]
    """The slices, the last one's range already extended where the plan decided it."""
    targets: Mapping[int, int]
    new_pods: int
    """Ranks beyond every slice, for new slices (or the engine's ``extend_last``)."""
    extend_last: bool = False


def plan_growth(
    released: Released, *, gang_pods: int, slice_size: int | None, fits_one_clique: bool
) -> Growth:
    """The new ranks and where they go first (see the module docstring)."""
    holds = list(released.holds)
    targets = dict(released.targets)
    end = holds[-1].end_rank if holds else 0
    new = max(0, gang_pods - end)
    if new == 0 or not holds:
        return Growth(holds=tuple(holds), targets=targets, new_pods=new)
    last = holds[-1]
    if slice_size is not None:
        taken = min(new, max(0, slice_size - last.size))
    elif fits_one_clique:
        taken = new
    else:
        return Growth(holds=tuple(holds), targets=targets, new_pods=new, extend_last=True)
    holds[-1] = msgspec.structs.replace(last, size=last.size + taken)
    targets[last.index] = targets.get(last.index, 0) + taken
    return Growth(holds=tuple(holds), targets=targets, new_pods=new - taken)
