"""The fabric act's checks on what the demo observes: the rack's nodes out of their clique, the
slice stuck, moved out of the lost clique, the domain Ready in the new one, the rack whole
again."""

from __future__ import annotations

from datetime import UTC, datetime

from sim.demo.failover import (
    FABRIC_LOST,
    GRACE_S,
    clique_nodes,
    labels_gone,
    moved_slice,
    ready_elsewhere,
    stuck_slice,
    whole_again,
)
from sim.demo.observe import ClusterView, DomainView, PodCounts, SliceView

A = "18acb9ea-5edc-5d25-b92e-9a65573d239b.1"
B = "ce39c142-0e56-575d-8cdf-26168a499808.1"
SINCE = datetime(2025, 1, 1, tzinfo=UTC)


def rack(number: int, trays: int = 18) -> tuple[str, ...]:
    return tuple(f"rack-{number}-tray{i:02d}" for i in range(trays))


BOTH = dict.fromkeys(rack(0), B) | dict.fromkeys(rack(1), A)
RACK_0_ONLY = dict.fromkeys(rack(0), B)  # rack-1's labels gone


def one_slice(clique: str, **marks: object) -> SliceView:
    return SliceView(
        index=0,
        clique=clique,
        channel=0,
        first_rank=0,
        size=18,
        nodes=rack(0 if clique == B else 1),
        pods=18,
        **marks,  # type: ignore[arg-type]
    )


def view(
    *,
    cliques: dict[str, str],
    piece: SliceView,
    phase: str = "Ready",
    domain_clique: str | None = None,
    on: tuple[str, ...] = rack(0),
    terminating: int = 0,
    imex_ready: int = 36,
) -> ClusterView:
    return ClusterView(
        pods=PodCounts(total=len(on), placed=len(on), running=len(on), terminating=terminating),
        pod_nodes={f"pod-{i}": node for i, node in enumerate(on)},
        nodes=36,
        imex_ready=imex_ready,
        cliques=cliques,
        domain=DomainView(phase=phase, clique=domain_clique or piece.clique, channel=0),
        slices=(piece,),
        has_placement=True,
    )


def test_the_lost_rack_is_every_node_labelled_with_the_domains_clique() -> None:
    assert clique_nodes(BOTH, A) == list(rack(1))
    assert clique_nodes(BOTH, "other.1") == []
    assert not labels_gone(view(cliques=BOTH, piece=one_slice(A)), rack(1))
    assert labels_gone(view(cliques=RACK_0_ONLY, piece=one_slice(A)), rack(1))


def test_a_slice_is_stuck_once_the_allocator_marks_it() -> None:
    assert stuck_slice(view(cliques=RACK_0_ONLY, piece=one_slice(A))) is None
    waiting = one_slice(A, waiting_since=SINCE)
    assert stuck_slice(view(cliques=RACK_0_ONLY, piece=waiting)) == waiting


def test_the_slice_moved_once_it_is_in_another_clique_and_says_where_from() -> None:
    assert moved_slice(view(cliques=RACK_0_ONLY, piece=one_slice(A)), A) is None
    moved = one_slice(B, moved_from=A)
    assert moved_slice(view(cliques=RACK_0_ONLY, piece=moved), A) == moved
    # An earlier move from another clique is not this one.
    assert moved_slice(view(cliques=RACK_0_ONLY, piece=one_slice(B, moved_from="x.1")), A) is None


def test_ready_elsewhere_needs_every_pod_running_in_the_new_clique_and_none_terminating() -> None:
    moved = one_slice(B, moved_from=A)
    assert ready_elsewhere(view(cliques=RACK_0_ONLY, piece=moved), A, 18) == moved
    not_yet = (
        view(cliques=RACK_0_ONLY, piece=moved, phase="Degraded"),
        view(cliques=RACK_0_ONLY, piece=moved, terminating=3),
        view(cliques=RACK_0_ONLY, piece=moved, domain_clique=A),
        view(cliques=BOTH, piece=moved, on=rack(0)[:17] + rack(1)[:1]),
        view(cliques=RACK_0_ONLY, piece=moved, on=rack(0)[:17]),
        view(cliques=RACK_0_ONLY, piece=one_slice(A, waiting_since=SINCE)),
    )
    assert [ready_elsewhere(v, A, 18) for v in not_yet] == [None] * len(not_yet)


def test_the_rack_is_whole_again_with_its_labels_back_and_every_node_imex_ready() -> None:
    moved = one_slice(B, moved_from=A)
    assert whole_again(view(cliques=BOTH, piece=moved), rack(1), A)
    assert not whole_again(view(cliques=RACK_0_ONLY, piece=moved), rack(1), A)
    assert not whole_again(view(cliques=BOTH, piece=moved, imex_ready=30), rack(1), A)
    assert not whole_again(ClusterView(), (), A)  # nothing seen yet


def test_the_fault_is_the_whole_nodes_fabric_and_the_grace_short() -> None:
    assert FABRIC_LOST == {"kind": "fabric", "gpu": None, "state": "not_started"}
    assert 0 < GRACE_S <= 10
