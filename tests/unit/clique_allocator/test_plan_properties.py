"""Properties of whole plans over random clusters and indexed gangs, one domain after another:
no slice spans two cliques, no channel is shared by two domains in a clique, ranks are
contiguous in every slice, and a new gang is reserved whole or not at all."""

from __future__ import annotations

from hypothesis import event, given, settings
from hypothesis import strategies as st

from services.clique_allocator.gang import GangSize
from services.clique_allocator.nodes import build_cliques, node_facts
from services.clique_allocator.placement import ClusterView
from services.clique_allocator.plan import plan_domain
from shared.crds.placement import PlacementSpec
from shared.kube.models import Node, Pod

from .builders import domain, node, pod

INDEX = "batch.kubernetes.io/job-completion-index"


@st.composite
def clusters(draw: st.DrawFn) -> list[Node]:
    nodes = []
    for clique in range(draw(st.integers(1, 4))):
        for index in range(draw(st.integers(1, 5))):
            nodes.append(
                node(
                    f"c{clique}-n{index:02d}",
                    clique=f"uuid-{clique}.1",
                    ready="True" if draw(st.integers(0, 9)) else "False",
                )
            )
    return nodes


@st.composite
def gangs(draw: st.DrawFn) -> tuple[int, int, int | None]:
    """(pods, GPUs per pod, slice size or None)."""
    gpus = draw(st.sampled_from([1, 2, 4]))
    pods = draw(st.integers(1, 40))
    slice_size = draw(st.one_of(st.none(), st.integers(1, pods)))
    return pods, gpus, slice_size


def job(name: str, pods: int, gpus: int, order: list[int]) -> list[Pod]:
    return [
        pod(
            f"{name}-{index}",
            gpus=gpus,
            template=f"{name}-rct",
            labels={INDEX: str(index)},
            owner=("Job", name, f"{name}-uid"),
            created=position,
        )
        for position, index in enumerate(order[:pods])
    ]


@settings(max_examples=150, deadline=None)
@given(clusters(), st.lists(gangs(), min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_plans_keep_slices_in_cliques_channels_apart_and_ranks_contiguous(
    nodes: list[Node], requests: list[tuple[int, int, int | None]], shuffler: object
) -> None:
    facts = [found for item in nodes if (found := node_facts(item)) is not None]
    view = ClusterView.build(cliques=build_cliques(facts), reservations=[])
    clique_of = {f.name: f.clique for f in facts}
    records: dict[str, PlacementSpec] = {}
    for number, (size, gpus, slice_size) in enumerate(requests):
        name = f"d{number}"
        order = list(range(size))
        shuffler.shuffle(order)  # type: ignore[attr-defined]
        pods = job(name, size, gpus, order)
        plan = plan_domain(
            key=f"default/{name}",
            domain=domain(name, uid=f"{name}-cd", slice_size=slice_size),
            placement=None,
            pods=pods,
            gang=GangSize(pods=size, source="Job"),
            view=view,
            ranks={p.metadata.name: int(p.metadata.labels[INDEX]) for p in pods},
        )
        if plan.record is None:  # all or nothing: nothing pinned, nothing reserved
            assert plan.pins == () and plan.reservations == ()
            continue
        record = plan.record
        records[name] = record
        event(f"slices={len(record.slices)}")
        view = view.with_domain(f"default/{name}", plan.reservations)
        assert len(plan.pins) == size == record.placed_pods == record.reserved_pods
        end = 0
        for piece in record.slices:
            assert {clique_of[m.node] for m in piece.members} == {piece.clique}
            assert piece.first_rank == end
            end += piece.size
            ranks = sorted(p.rank for m in piece.members for p in m.pods)
            assert ranks == list(range(piece.first_rank, piece.first_rank + piece.size))
            if slice_size is not None:
                assert piece.size == min(slice_size, size - piece.first_rank)
        assert end == size
        for p in pods:
            seat = next(
                piece for piece in record.slices for m in piece.members for q in m.pods
                if q.name == p.metadata.name
            )  # fmt: skip
            assert seat.first_rank <= int(p.metadata.labels[INDEX]) < seat.first_rank + seat.size
    owners: dict[tuple[str, int], set[str]] = {}
    for name, record in records.items():
        channels: dict[str, set[int]] = {}
        for piece in record.slices:
            owners.setdefault((piece.clique, piece.channel), set()).add(name)
            channels.setdefault(piece.clique, set()).add(piece.channel)
        assert all(len(found) == 1 for found in channels.values())
    assert all(len(found) == 1 for found in owners.values())
