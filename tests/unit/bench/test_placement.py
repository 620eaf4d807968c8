"""The placement benchmark on a small cluster: ours never splits a slice across cliques nor
places a gang in part, multi-rack gangs included, and the checks that say so do catch both."""

from __future__ import annotations

import random

import msgspec
import pytest

import bench.placement as bench
from services.clique_allocator.placement import Decision, GangRequest, NodeShare, Placed, place
from services.clique_allocator.placement.view import ClusterView

RACKS = 8


def small_run() -> tuple[list[bench.Gang], dict[str, bench.Tally]]:
    rng = random.Random(3)
    cliques = bench.make_cliques(RACKS, rng)
    capacity = RACKS * bench.RACK_GPUS
    trace = bench.make_trace(
        rng,
        gangs=1200,
        capacity=capacity,
        load=1.6,
        mean_duration=100.0,
        multirack_share=0.1,
        multirack_racks=(2, 4),
        multirack_rng=random.Random(5),
    )
    policies: dict[str, bench.Policy] = {
        "ours": bench.Ours(cliques),
        "firstfit": bench.FirstFit(cliques),
        "anchor": bench.AnchorModel(cliques, random.Random(4)),
    }
    tallies = {
        key: bench.replay(policy, trace, capacity=capacity, depth=8, patience=200.0, warmup=0.25)
        for key, policy in policies.items()
    }
    return trace, tallies


def test_ours_keeps_every_slice_in_one_clique_and_places_gangs_whole() -> None:
    trace, tallies = small_run()
    ours = tallies["ours"]
    assert sum(gang.multirack for gang in trace) > 50
    assert ours.multirack_placed > 10, "too few multi-rack gangs placed to test anything"
    assert ours.multirack_cliques >= 2  # they were really cut into slices
    assert ours.split_slices == 0
    assert ours.partial == 0
    assert ours.split_gangs == 0
    assert tallies["firstfit"].split_slices == tallies["firstfit"].partial == 0
    # The anchor's multi-rack gangs have no clique affinity: the ones that ran span cliques.
    anchor = tallies["anchor"]
    assert anchor.split_slices == anchor.multirack_placed + anchor.multirack_late > 0


def test_ours_counts_a_slice_with_a_node_of_another_clique(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cliques = bench.make_cliques(2, random.Random(1))
    policy = bench.Ours(cliques)

    def misplace(view: ClusterView, request: GangRequest) -> Decision:
        """The engine's decision with the first pod moved to a node of another clique."""
        decision = place(view, request)
        assert isinstance(decision, Placed)
        first, *rest = decision.reservations
        foreign = next(clique for clique in cliques if clique.id != first.clique).nodes[0]
        share = NodeShare(node=foreign.name, pods=first.shares[0].pods)
        first = msgspec.structs.replace(first, shares=(share, *first.shares[1:]))
        return msgspec.structs.replace(decision, reservations=(first, *rest))

    monkeypatch.setattr(bench, "place", misplace)
    outcome = policy.attempt(bench.Gang("bench/split", 0.0, 1.0, 4, 4))
    assert outcome.split_slices == 1
    with pytest.raises(AssertionError, match="split slice"):
        policy.check()


def test_ours_counts_a_gang_placed_in_part(monkeypatch: pytest.MonkeyPatch) -> None:
    cliques = bench.make_cliques(2, random.Random(1))
    policy = bench.Ours(cliques)

    def shortchange(view: ClusterView, request: GangRequest) -> Decision:
        return place(view, GangRequest(domain=request.domain, new_pods=1, gpus_per_pod=4))

    monkeypatch.setattr(bench, "place", shortchange)
    gang = bench.Gang("bench/partial", 0.0, 1.0, 30, 4)
    outcome = policy.attempt(gang)
    assert outcome.partial
    assert not outcome.placed
    assert policy.used_gpus() == 0
    assert policy.held_gpus() == 4
    policy.remove(gang)
    assert policy.held_gpus() == 0


def test_a_trace_without_multirack_gangs_is_the_single_rack_trace() -> None:
    def trace(share: float | None) -> list[bench.Gang]:
        rng = random.Random(2)
        if share is None:
            return bench.make_trace(rng, gangs=300, capacity=1152, load=1.6, mean_duration=100.0)
        return bench.make_trace(
            rng, gangs=300, capacity=1152, load=1.6, mean_duration=100.0, multirack_share=share
        )

    assert trace(0.0) == trace(None)
    assert not any(gang.multirack for gang in trace(None))
    assert sum(gang.multirack for gang in trace(0.5)) > 100


def test_main_prints_the_tables_and_one_result_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["placement", "--racks", "8", "--gangs", "400", "--multirack-racks", "2", "4"]
    monkeypatch.setattr("sys.argv", argv)
    bench.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("RESULT ")
    assert sum(line.startswith("RESULT") for line in lines) == 1
    result = dict(pair.split("=") for pair in lines[-1].removeprefix("RESULT ").split())
    assert result["ours_split_slices"] == result["ours_partial_gangs"] == "0"
    assert int(result["multirack_offered"]) > 0
    for key in ("ours_alloc_pct", "ours_multirack_placed", "ours_multirack_p99_ms"):
        float(result[key])
    # The gain over first fit stands beside the gain over the anchor model, which is labelled a
    # model with its assumptions.
    gain_first = float(result["ours_alloc_pct"]) - float(result["firstfit_alloc_pct"])
    assert float(result["gain_vs_firstfit_pts"]) == pytest.approx(gain_first, abs=0.11)
    at = lines.index("gain of ours in GPU allocation, in points:")
    assert lines[at + 1].startswith("  over clique-aware first fit")
    assert lines[at + 2].startswith("  over the anchor model")
    assert "not the driver" in lines[at + 2]
    assert lines[at + 3].startswith("the anchor model (this script's, not measured on NVIDIA's")
    assert lines[at + 4 : at + 4 + len(bench.MODEL_ASSUMPTIONS)] == [
        f"  {line}" for line in bench.MODEL_ASSUMPTIONS
    ]


def test_a_trace_without_multirack_gangs_has_no_multirack_keys(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["placement", "--racks", "4", "--gangs", "200", "--multirack-share", "0",
            "--constrained-gangs", "0"]  # fmt: skip
    monkeypatch.setattr("sys.argv", argv)
    bench.main()
    lines = capsys.readouterr().out.splitlines()
    assert "multi-rack gangs: none in the trace (--multirack-share 0)" in lines
    result = dict(pair.split("=") for pair in lines[-1].removeprefix("RESULT ").split())
    assert result["multirack_offered"] == "0"
    assert not [key for key in result if "_multirack_" in key]
    assert "nan" not in result.values()
    assert not [key for key in result if key.startswith("constrained")]
