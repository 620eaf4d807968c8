"""The fabric act: the seed's rack loses its whole NVLink fabric and the domain fails over.

Once the seed domain is Ready again after the GPU reset (:mod:`sim.demo.story`), the demo
shortens the domain's failover grace with ``kubectl patch`` (``spec.failover.graceSeconds: 5``;
the default is 300 s, the policy stays ``Move``), then makes fabric registration fail on every
GPU of every node of the domain's clique (``cdo sim fault NODE --fabric-state not_started``, a
fabric manager gone). It follows what cdo does: the health monitors take the clique label off
the rack's nodes, the allocator finds the domain's slice stuck (its clique is gone), and once
the grace has passed it moves the slice, whole, to the other rack's clique with a channel of
that clique and evicts the old pods; the Deployment's replacements run there and the domain is
Ready again. Then the fabric comes back (the faults cleared) and the demo waits until the
rack's nodes are in their clique and IMEX-ready again, so that the next act has both racks.

The fabric is back well within the IMEX agents' leave grace (300 s), so the rack's IMEX daemons
are kept through the loss and none restarts. The checks on what is observed are pure functions
(:func:`stuck_slice`, :func:`moved_slice`, :func:`ready_elsewhere`, :func:`whole_again`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence

from opentelemetry.trace import Tracer

from shared.command_errors import CommandError
from sim import control as simctl
from sim.demo import kubectl
from sim.demo.bringup import Running
from sim.demo.eventfeed import EventFeed
from sim.demo.monitor import Monitor, StoryError
from sim.demo.observe import ClusterView, SliceView, Target
from sim.demo.progress import rack_of
from sim.demo.restarts import read_counts, restarts_phrase
from sim.demo.screen import Screen
from sim.demo.summary import FailoverFigures

GRACE_S = 5
"""The domain's ``spec.failover.graceSeconds`` for the act (the default is 300 s)."""

RECOVERED_WAIT_S = 15.0
"""How long the act waits for the rack's recovery events (the hold-down, 3 s in the demo)."""

FABRIC_LOST: dict[str, object] = {"kind": "fabric", "gpu": None, "state": "not_started"}
"""Fabric registration not started on every GPU of a node: its fabric manager is gone."""


def clique_nodes(cliques: Mapping[str, str], clique: str) -> list[str]:
    """The nodes labelled with ``clique`` (``cliques``: each node's clique label), by name."""
    return sorted(node for node, label in cliques.items() if label == clique)


def labels_gone(view: ClusterView, nodes: Sequence[str]) -> bool:
    """None of ``nodes`` carries a clique label any more."""
    return not set(nodes) & set(view.cliques)


def stuck_slice(view: ClusterView) -> SliceView | None:
    """The first slice the allocator marked stuck (its clique cannot hold it), if any."""
    return next((piece for piece in view.slices if piece.waiting_since is not None), None)


def moved_slice(view: ClusterView, lost: str) -> SliceView | None:
    """The slice that failed over from clique ``lost`` to another one, if any."""
    return next(
        (piece for piece in view.slices if piece.moved_from == lost and piece.clique != lost),
        None,
    )


def ready_elsewhere(view: ClusterView, lost: str, replicas: int) -> SliceView | None:
    """The moved slice, once the domain is Ready with ``replicas`` pods running, none left
    terminating, every one on a node of the slice's new clique and the domain there."""
    piece = moved_slice(view, lost)
    if piece is None or not view.ready_with(replicas) or view.pods.terminating:
        return None
    domain = view.domain
    assert domain is not None  # ready_with holds only with a domain
    if domain.clique != piece.clique:
        return None
    if any(view.cliques.get(node) != piece.clique for node in view.pod_nodes.values()):
        return None
    return piece


def whole_again(view: ClusterView, nodes: Sequence[str], clique: str) -> bool:
    """Every one of ``nodes`` is in ``clique`` again and every node of the cluster IMEX-ready."""
    return all(view.cliques.get(node) == clique for node in nodes) and (
        view.imex_ready == view.nodes > 0
    )


async def _set_fabric(running: Running, nodes: Sequence[str], *, lost: bool) -> None:
    """Fabric lost on every GPU of ``nodes`` (``lost``), or every fault of theirs cleared."""
    body = FABRIC_LOST if lost else None

    def inject() -> None:
        for node in nodes:
            simctl.fault(running.state_dir, node, body, say=lambda _line: None)

    try:
        await asyncio.to_thread(inject)
    except CommandError as exc:
        raise StoryError(
            f"the node host refused the fault: {exc}", logs=[running.log("nodehost")]
        ) from exc


async def lose_the_rack(
    running: Running,
    monitor: Monitor,
    feed: EventFeed,
    target: Target,
    *,
    baseline: Mapping[str, simctl.ImexCount],
    screen: Screen,
    tracer: Tracer,
    step_s: float,
) -> FailoverFigures:
    """The act (see the module docstring); its figures."""
    view = monitor.latest
    domain = view.domain
    if domain is None or domain.clique is None:
        raise StoryError(f"{target.domain} is not in one clique before its rack fails")
    lost = domain.clique
    nodes = clique_nodes(view.cliques, lost)
    rack = rack_of(nodes) or f"clique {lost}"
    placing = [running.log("clique-allocator"), running.log("domain-controller")]
    healing = [running.log("nodehost"), running.log("clique-allocator")]

    with tracer.start_as_current_span("fabric loss and failover"):
        screen.step(f"{rack} loses its NVLink fabric: {target.domain} fails over to the other rack")
        patch = {"spec": {"failover": {"graceSeconds": GRACE_S}}}
        for line in await kubectl.patch(running.kubeconfig, "computedomain", target.domain, patch):
            screen.live(line)
        screen.note(
            f"spec.failover: policy Move (the default), graceSeconds {GRACE_S} for the demo "
            "(the default is 300: long enough for a node to come back from a reboot)"
        )
        feed.tally.group(nodes, rack)  # one line per GPU of a rack would fill the screen
        started = time.monotonic()
        await _set_fabric(running, nodes, lost=True)
        screen.live(
            f"fabric registration not started on every GPU of the {len(nodes)} nodes of {rack} "
            f"(cdo sim fault NODE --fabric-state not_started)"
        )
        # Which comes first depends on the services' timing: note when each was first seen.
        firsts: dict[str, float] = {}
        stuck_pieces: list[SliceView] = []

        def gone_and_stuck(v: ClusterView) -> SliceView | None:
            if labels_gone(v, nodes):
                firsts.setdefault("gone", time.monotonic() - started)
            piece = stuck_slice(v)
            if piece is not None and "stuck" not in firsts:
                firsts["stuck"] = time.monotonic() - started
                stuck_pieces.append(piece)
            return stuck_pieces[0] if len(firsts) == 2 else None

        stuck = await monitor.until(
            gone_and_stuck,
            what=f"the clique label gone from the {len(nodes)} nodes of {rack} and the "
            "allocator marking the domain's slice stuck",
            timeout_s=step_s,
            logs=[running.log("nodehost"), *placing],
        )
        gone_s, stuck_s = firsts["gone"], firsts["stuck"]
        notes = [
            (
                gone_s,
                f"the health monitors took the clique label off the {len(nodes)} nodes of "
                f"{rack} {gone_s:.1f} s after the fabric loss",
            ),
            (
                stuck_s,
                f"slice {stuck.index} stuck {stuck_s:.1f} s after the fabric loss: its clique "
                f"{lost} cannot hold it; it moves once the {GRACE_S} s grace has passed",
            ),
        ]
        for _, note in sorted(notes):
            screen.note(note)
        moved = await monitor.until(
            lambda v: moved_slice(v, lost),
            what=f"the slice moved out of clique {lost}",
            timeout_s=step_s + GRACE_S,
            logs=placing,
        )
        moved_s = time.monotonic() - started
        screen.note(
            f"slice {moved.index} moved {moved_s:.1f} s after the fabric loss: to clique "
            f"{moved.clique}, IMEX channel {moved.channel} there; its old pods are evicted"
        )

        def settled(v: ClusterView) -> tuple[ClusterView, SliceView] | None:
            found = ready_elsewhere(v, lost, target.replicas)
            return None if found is None else (v, found)

        after, piece = await monitor.until(
            settled,
            what=f"domain {target.domain} Ready in clique {moved.clique}",
            timeout_s=step_s,
            logs=placing,
        )
        ready_s = time.monotonic() - started
        new_rack = rack_of(clique_nodes(after.cliques, piece.clique))
        screen.note(
            f"Ready again {ready_s:.1f} s after the fabric loss "
            f"({ready_s - GRACE_S:.1f} s past the grace): {after.pods.running} pods on "
            + (f"{new_rack}, " if new_rack else "")
            + f"clique {piece.clique}, IMEX channel {piece.channel}"
        )

    with tracer.start_as_current_span("fabric restored"):
        screen.step(f"{rack}'s fabric comes back")
        back = time.monotonic()
        await _set_fabric(running, nodes, lost=False)
        screen.live(f"every GPU of the {len(nodes)} nodes of {rack} healthy again")
        await monitor.until(
            lambda v: whole_again(v, nodes, lost),
            what=f"the {len(nodes)} nodes of {rack} in clique {lost} and IMEX-ready again",
            timeout_s=step_s,
            logs=healing,
        )
        restored_s = time.monotonic() - back
        screen.note(
            f"{rack} back in clique {lost} {restored_s:.1f} s after its fabric returned; the "
            f"domain stays in clique {piece.clique}"
        )
        # The health monitors announce each node recovered once it stayed healthy for their
        # hold-down; a lost event would only make this note count fewer.
        await feed.wait(
            lambda t: t.in_group(rack, "node.recovered") >= len(nodes), timeout_s=RECOVERED_WAIT_S
        )
        tally = feed.tally
        screen.note(
            f"NATS: {tally.in_group(rack, 'node.fault')} node.fault events from the "
            f"{len(nodes)} nodes of {rack} (one per GPU) and "
            f"{tally.in_group(rack, 'node.recovered')} node.recovered (after the health "
            "monitors' hold-down)"
        )
        restarts = simctl.imex_restarts(baseline, await read_counts(running))
        screen.note(
            f"IMEX daemon restarts so far: {restarts_phrase(restarts)} (an agent keeps its "
            "daemon through a fabric loss shorter than its leave grace, 300 s by default)"
        )
    return FailoverFigures(
        rack=rack,
        nodes=len(nodes),
        lost_clique=lost,
        grace_s=GRACE_S,
        new_clique=piece.clique,
        new_rack=new_rack,
        channel=piece.channel,
        stuck_s=stuck_s,
        moved_s=moved_s,
        ready_s=ready_s,
        restored_s=restored_s,
    )
