"""Supervising the node's IMEX daemon: its static node map, the hosts mapping, start, reload, stop.

The node map does not follow membership. ``nodes_config.cfg`` lists every slot of the clique
(``max_nodes_per_domain`` stable names, :func:`roster.render_nodes_config`); it is the same
bytes on every node of the clique and is written before the daemon's first start. Membership is
only the name -> address mapping in the agent's block of the hosts file: a member's slot
resolves to its address, an empty slot to ``empty_slot_address`` (a loopback address nothing
listens on: IMEX sees a peer that is down). IMEX keeps each peer's hostname as its target and
re-resolves it on every reconnect attempt; SIGUSR1 makes it restart its outgoing connections
at once.

What the controller does, decided by the pure :func:`~.rules.decide` and carried out by
:class:`~.controller.DaemonController`:

- **adopt** (once, before anything else): an earlier agent of this node left its daemon
  running (it crashed, was killed, or its container was restarted for an upgrade). The daemon
  record (``nvidia-imex.pid``) names it; if that process is still that daemon
  (:mod:`.adoption`, :mod:`services.imex_agent.preflight`), the controller takes it over as if
  it had started it: no new daemon, no restart, and no SIGUSR1 unless the hosts mapping has to
  change. Then the rules below apply to
  what the record says it serves, so a daemon of another ``config.cfg`` or node map is
  restarted once. Until the clique's Node list is known the adopted daemon is left as it is
  (**wait**).
- **start**: nothing runs and the node is a member of its clique's roster. Check that no other
  IMEX daemon holds the node's ports (:mod:`services.imex_agent.preflight`), write the hosts block,
  ``nodes_config.cfg`` and ``config.cfg``, start the daemon (in a session of its own, or
  through the launcher: :mod:`services.imex_agent.programs`) and write its record.
- **keep**: membership changed (a node joined, left, faulted, recovered, was powered off or on,
  got a new address): rewrite the hosts block and send SIGUSR1. No restart. IMEX processes at
  most one SIGUSR1 per ``reload_min_interval_s`` (IMEX_MINIMUM_SSL_RELOAD_INTERVAL, also counted
  from the daemon's start); a change inside that window is signalled when the window ends.
- **restart**: only when the daemon's own files change: ``config.cfg`` (settings, the node's
  address), or the node map itself (the node now belongs to another clique, or its claimed slot
  went to a rival). Restarts are counted.
- **hold**: this node left its clique (NVML reports no clique, or the node is out of the roster:
  its label went away on a fault, its slot is contested). Its daemon keeps running for
  ``leave_grace_s``, so a label or fabric that comes back within it costs nothing; the other
  members already map its slot to the sentinel. A rival that holds this node's slot stops the
  daemon at once.
- **stop**: the grace ran out, or the slot is someone else's: no daemon.
- **died**: restart after a backoff that doubles with each quick death (from
  ``restart_backoff_initial_s`` up to ``restart_backoff_max_s``) and resets once a daemon ran for
  ``stable_after_s``.

When the agent shuts down (SIGTERM, or its task is cancelled) the daemon is **left running**
with its record, for the next agent to adopt: an agent restart or upgrade never restarts IMEX.
With ``stop_on_exit`` it is stopped instead (for an agent run outside a container that should
take its daemon along).

The rooms: :mod:`.rules` (the pure decision and the facts it compares), :mod:`.controller`
(the loop that carries it out), :mod:`.adoption` (the recorded daemon of an earlier agent),
:mod:`.signalling` (the hosts block and the SIGUSR1 window), :mod:`.backoff` (the pause before
a restart).
"""

from services.imex_agent.daemon.controller import DaemonController
from services.imex_agent.daemon.rules import (
    Action,
    Decision,
    Serving,
    Target,
    decide,
    digest,
    map_digest,
    record_of,
    reload_wait,
    served_hosts,
    serving_of,
)

__all__ = [
    "Action",
    "DaemonController",
    "Decision",
    "Serving",
    "Target",
    "decide",
    "digest",
    "map_digest",
    "record_of",
    "reload_wait",
    "served_hosts",
    "serving_of",
]
