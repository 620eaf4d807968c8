"""The IMEX agent: one per GPU node. It runs the node's IMEX daemon for the node's whole NVLink
clique, hands each ComputeDomain's pods their domain's IMEX channel through DRA and CDI, and
reports the node's IMEX state (node condition ``cdo.dev/ImexReady`` and NodeImexState events).

Modules, outside in:

- ``__main__``: the composition root; ``agent``: one node's agent assembled from its parts;
- ``daemon`` (a package): supervising the daemon: ``daemon.rules`` (the pure decision),
  ``daemon.controller`` (the loop: start, restart, stop), ``daemon.adoption`` (a daemon an
  earlier agent left running), ``daemon.signalling`` (the hosts block and SIGUSR1),
  ``daemon.backoff`` (the pause before a restart);
  ``reporter``: polling ``nvidia-imex-ctl``, publishing state, writing the condition;
- the IMEX programs: ``binaries`` (the ``Imex`` and ``ImexProcess`` handles and their errors),
  ``programs`` (``CommandImex``, ``LauncherImex``), ``pidprocess`` (a daemon held through a
  pidfd: spawned here, by the launcher, or adopted), ``launchprotocol`` (the agent's and the
  launcher's one-line messages), ``launcher`` (the daemon's own container in the DaemonSet,
  so it outlives the agent), ``launchprobe`` (that container's readiness probe);
  ``preflight``: the daemon record (adopt or not), leftovers and foreign daemons;
- ``driver``: the DRA handler (``readiness``: whether the local daemon is READY, for
  prepare); ``claims``: claim -> domain -> channel; ``channels``: device nodes; ``cdi``: CDI
  specs; ``checkpoint``: what survives restarts; ``resourceslice``: the node's attachment
  devices;
- pure decisions: ``roster`` (members, slots, nodes_config.cfg), ``imexconfig`` (config.cfg),
  ``hostsfile``, ``report`` (ctl output), ``status`` (event and condition);
- ``settings`` (CDO_IMEX_AGENT_*), ``names``, ``metrics``, ``files``.

docs/imex-agent.md describes the design, the settings and the limitations.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.imex_agent.agent import ImexAgent
    from services.imex_agent.binaries import Imex, ImexProcess
    from services.imex_agent.programs import CommandImex
    from services.imex_agent.settings import AgentSettings, DraSettings, ImexSettings

_EXPORTS = {
    "AgentSettings": "services.imex_agent.settings",
    "CommandImex": "services.imex_agent.programs",
    "DraSettings": "services.imex_agent.settings",
    "Imex": "services.imex_agent.binaries",
    "ImexAgent": "services.imex_agent.agent",
    "ImexProcess": "services.imex_agent.binaries",
    "ImexSettings": "services.imex_agent.settings",
}
"""Imported on first use (PEP 562), not with the package: the IMEX launcher and its probe import
their own modules of this package without loading the whole agent."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "AgentSettings",
    "CommandImex",
    "DraSettings",
    "Imex",
    "ImexAgent",
    "ImexProcess",
    "ImexSettings",
]
