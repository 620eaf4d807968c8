"""The live view's lines and the phrases the notes and the summary share, from what was
observed: pure functions, so the demo's screen is tested without a cluster.

    t+1.2s  pods 18: gated 0 placed 18 running 7 | IMEX ready 36/36 nodes | domain Placed
    t+31.0s  pods 36: ... | domain Placed (PodsNotRunning) in 2 cliques, pods running 18/18 + 5/18
    t+22.9s  pods 18: ... | clique label on 18/36 nodes | domain Ready | slice 0 stuck
"""

from __future__ import annotations

from collections.abc import Sequence

from sim.demo.observe import ClusterView, SliceView


def stamp(seconds: float) -> str:
    """``t+1.2s``: time since the story started, the prefix of every live line."""
    return f"t+{seconds:.1f}s"


def progress_line(view: ClusterView) -> str:
    """One line of the whole state; the demo prints it each time it changes."""
    pods = view.pods
    parts = [
        f"pods {pods.total}: gated {pods.gated} placed {pods.placed} running {pods.running}"
        + (f" (waiting: {pods.waiting})" if pods.gated and pods.waiting else "")
        + (f" terminating {pods.terminating}" if pods.terminating else ""),
        f"IMEX ready {view.imex_ready}/{view.nodes} nodes",
        domain_phrase(view),
    ]
    if len(view.cliques) < view.nodes:
        # Only while some node lacks it: a node whose fabric is lost is out of its clique.
        parts.insert(2, f"clique label on {len(view.cliques)}/{view.nodes} nodes")
    stuck = [piece.index for piece in view.slices if piece.waiting_since is not None]
    if stuck:
        parts.append(
            ("slices " if len(stuck) > 1 else "slice ") + ", ".join(map(str, stuck)) + " stuck"
        )
    if view.tainted:
        parts.append(
            "gpu-fault taint on "
            + ", ".join(f"{node} ({effect})" for node, effect in sorted(view.tainted.items()))
        )
    return " | ".join(parts)


def domain_phrase(view: ClusterView) -> str:
    """The domain's phase and reason; for a domain in several cliques, how many pods run in
    each (``status.cliques``, in its order)."""
    domain = view.domain
    if domain is None:
        return "domain -"
    phrase = f"domain {domain.phase}" + (f" ({domain.reason})" if domain.reason else "")
    if len(domain.cliques) > 1:
        running = " + ".join(f"{c.running_pods}/{c.pods}" for c in domain.cliques)
        phrase += f" in {len(domain.cliques)} cliques, pods running {running}"
    return phrase


def rank_range(piece: SliceView) -> str:
    """``0-17``; a slice of one rank is that rank, an empty one ``-``."""
    if piece.size <= 0:
        return "-"
    if piece.size == 1:
        return str(piece.first_rank)
    return f"{piece.first_rank}-{piece.last_rank}"


def slice_phrase(piece: SliceView) -> str:
    """``clique <id>, channel 1, ranks 0-17, 18 nodes``: one slice, for a note or the summary."""
    nodes = len(piece.nodes)
    return (
        f"clique {piece.clique}, channel {piece.channel}, ranks {rank_range(piece)}, "
        f"{nodes} node{'' if nodes == 1 else 's'}"
    )


def rack_of(nodes: Sequence[str]) -> str:
    """``rack-1`` for nodes all named ``rack-1-trayNN``; else ``""`` (no common rack name)."""
    racks = {node.rpartition("-tray")[0] for node in nodes}
    if len(racks) != 1:
        return ""
    (rack,) = racks
    return rack


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id in a W3C ``traceparent`` (``00-<trace id>-<span id>-<flags>``), if valid."""
    if not traceparent:
        return None
    parts = traceparent.strip().split("-")
    if len(parts) < 4 or len(parts[1]) != 32:
        return None
    try:
        valid = int(parts[1], 16) != 0
    except ValueError:
        return None
    return parts[1].lower() if valid else None


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"
