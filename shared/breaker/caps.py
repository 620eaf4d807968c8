"""The circuit breaker's caps and the decision on one claim (pure).

A fatal fault asks for the NoExecute taint, which evicts the node's workloads. The breaker
lets at most ``clique_share`` of a clique's nodes and ``cluster_share`` of the cluster's
monitored nodes (each at least ``min_nodes``) hold it at once, where a node *holds* it while
it carries the taint, for ``window_s`` after it was granted, and while a grant it has not acted
on yet may still be acted on (``peers``). :func:`admit` decides one claim from the Peers the
arbiter sees and the places it has reserved since (its own grants and offers).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from datetime import datetime

from shared.breaker.admission import CLIQUE, CLUSTER, Admission
from shared.breaker.peers import Peer, counts
from shared.breaker.settings import BreakerCaps


def limit(share: float, size: int, *, min_nodes: int) -> int:
    """The most nodes of a scope of ``size`` nodes that may hold NoExecute."""
    return max(min_nodes, math.floor(share * size + 1e-9))


def admit(
    *,
    me: str,
    clique: str,
    peers: Iterable[Peer],
    now: datetime,
    caps: BreakerCaps,
    claim: datetime | None = None,
    reserved: Collection[str] = (),
) -> Admission:
    """May ``me`` (of ``clique``; "" for none) take NoExecute, given the other nodes' state and
    the places ``reserved`` for nodes since (the arbiter's grants and offers not yet seen)?

    The node itself is not counted against the caps, but is part of each scope's size.
    """
    others = [peer for peer in peers if peer.name != me]
    scopes: list[tuple[str, float, list[Peer]]] = []
    if clique:
        scopes.append(
            (CLIQUE, caps.clique_share, [peer for peer in others if peer.clique == clique])
        )
    scopes.append((CLUSTER, caps.cluster_share, [peer for peer in others if peer.monitored]))
    for scope, share, members in scopes:
        size = len(members) + 1
        cap = limit(share, size, min_nodes=caps.min_nodes)
        counted = sum(
            1 for peer in members if peer.name in reserved or counts(peer, now=now, caps=caps)
        )
        if counted >= cap:
            return Admission(
                granted=False,
                decided_at=now,
                scope=scope,
                clique=clique,
                counted=counted,
                size=size,
                limit=cap,
                share=share,
                window_s=caps.window_s,
                claim=claim,
            )
    return Admission(
        granted=True, decided_at=now, clique=clique, window_s=caps.window_s, claim=claim
    )
