"""The circuit breaker on NoExecute taints, shared by the node that claims and the arbiter that
decides (docs/health-monitor.md, "Circuit breaker").

A node's health monitor writes its claim on its own Node (``record``); the clique allocator's
leader, the one component that sees every Node, answers it on that Node (``verdict``) after
counting what each Node holds (``peers``) against the caps (``caps``). A per-node service
therefore reads only its own Node, whatever the size of the cluster.
"""

from shared.breaker.admission import CLIQUE, CLUSTER, Admission
from shared.breaker.caps import admit, limit
from shared.breaker.peers import (
    Peer,
    carries_no_execute,
    counts,
    expires_at,
    grant_hold_s,
    peer_of,
)
from shared.breaker.record import Record, RecordState, decode_record, encode_record
from shared.breaker.settings import BreakerCaps
from shared.breaker.verdict import Verdict, decode_verdict, encode_verdict

__all__ = [
    "CLIQUE",
    "CLUSTER",
    "Admission",
    "BreakerCaps",
    "Peer",
    "Record",
    "RecordState",
    "Verdict",
    "admit",
    "carries_no_execute",
    "counts",
    "decode_record",
    "decode_verdict",
    "encode_record",
    "encode_verdict",
    "expires_at",
    "grant_hold_s",
    "limit",
    "peer_of",
]
