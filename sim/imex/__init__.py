"""Simulated ``nvidia-imex`` and ``nvidia-imex-ctl``.

Processes::

    python -m sim.imex.daemon -c config.cfg      # nvidia-imex
    python -m sim.imex.ctl -c config.cfg -q      # nvidia-imex-ctl: READY
    python -m sim.imex.ctl -c config.cfg -N -j   # connectivity table and Domain State, as JSON

In process (many daemons in one event loop)::

    daemon = ImexDaemon(load_config(path))
    await daemon.start()
    view = await query_domain(daemon.config)     # what -N reports
    await daemon.stop()

Modules: ``config`` (config.cfg), ``nodemap`` (nodes_config.cfg, digest, name resolution),
``states`` (state names and the rules between them), ``protocol`` (wire messages), ``service``
(the daemon), ``client`` (command-service queries), ``report`` (the -N table and JSON),
``daemon`` and ``ctl`` (the process shells). See docs/simulated-imex.md.
"""

from __future__ import annotations

from sim.imex.client import Endpoint, local_endpoint, query_domain, query_status
from sim.imex.config import ImexConfig, load_config, parse_config
from sim.imex.errors import CommandError, ImexConfigError, ImexError, ImexStartError
from sim.imex.nodemap import HOSTS_FILE_ENV, NodeMap, Resolver, load_node_map, parse_node_map
from sim.imex.protocol import ConnectionStatus, NodeStatus
from sim.imex.report import DomainView, render_json, render_text
from sim.imex.service import ImexDaemon, Timing
from sim.imex.states import ConnectionState, DaemonState, DomainState, RefusalReason

__all__ = [
    "HOSTS_FILE_ENV",
    "CommandError",
    "ConnectionState",
    "ConnectionStatus",
    "DaemonState",
    "DomainState",
    "DomainView",
    "Endpoint",
    "ImexConfig",
    "ImexConfigError",
    "ImexDaemon",
    "ImexError",
    "ImexStartError",
    "NodeMap",
    "NodeStatus",
    "RefusalReason",
    "Resolver",
    "Timing",
    "load_config",
    "load_node_map",
    "local_endpoint",
    "parse_config",
    "parse_node_map",
    "query_domain",
    "query_status",
    "render_json",
    "render_text",
]
