"""Which trace a placement decision belongs to.

A reconcile of a domain here is a child of the fault's context when the domain follows one, else
of the domain's, with a link to the other (:mod:`shared.tracing.story`); so the placement of a
domain joins the domain's story, and the placement of a replacement pod joins the fault's. The
domain controller records the fault a domain follows; the allocator's own rule is that a fault a
node of the domain carries counts before the controller has recorded it (:func:`story`).

The Placement carries copies of the domain's trace annotations
(:func:`shared.tracing.story.story_patch`), so the per-node services (the IMEX agent preparing a
claim of the domain) join the same stories without reading the ComputeDomain.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.crds.names import FAULT_TRACE_CONTEXT_ANNOTATION
from shared.tracing.story import story_with_fault


def story(domain: Mapping[str, str], faults: list[str]) -> dict[str, str]:
    """The annotations a reconcile span's parent is chosen from.

    The domain's own; and when it records no fault yet but a node it uses carries one
    (``faults``, sorted), that one: the domain controller records it a moment later, and a
    replacement pod placed in that moment belongs to the fault's trace all the same.
    """
    recorded = domain.get(FAULT_TRACE_CONTEXT_ANNOTATION)
    return story_with_fault(domain, recorded or (faults[0] if faults else None))
