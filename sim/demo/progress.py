"""The live view's lines, from what was observed: pure functions, so the demo's screen is tested
without a cluster.

    t+1.2s  pods 18: gated 0 placed 18 running 7 | IMEX ready 36/36 nodes | domain Placed
"""

from __future__ import annotations

from sim.demo.observe import ClusterView


def stamp(seconds: float) -> str:
    """``t+1.2s``: time since the story started, the prefix of every live line."""
    return f"t+{seconds:.1f}s"


def progress_line(view: ClusterView) -> str:
    """One line of the whole state; the demo prints it each time it changes."""
    pods = view.pods
    parts = [
        f"pods {pods.total}: gated {pods.gated} placed {pods.placed} running {pods.running}"
        + (f" (waiting: {pods.waiting})" if pods.gated and pods.waiting else ""),
        f"IMEX ready {view.imex_ready}/{view.nodes} nodes",
        domain_phrase(view),
    ]
    if view.tainted:
        parts.append(
            "gpu-fault taint on "
            + ", ".join(f"{node} ({effect})" for node, effect in sorted(view.tainted.items()))
        )
    return " | ".join(parts)


def domain_phrase(view: ClusterView) -> str:
    domain = view.domain
    if domain is None:
        return "domain -"
    return f"domain {domain.phase}" + (f" ({domain.reason})" if domain.reason else "")


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
