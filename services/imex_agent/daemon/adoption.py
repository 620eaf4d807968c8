"""Finding the daemon an earlier agent of this node left running, to take it over.

The daemon record (``nvidia-imex.pid``) names it; the IMEX handle checks that the process is
still that daemon, of this node's ``config.cfg`` (:mod:`services.imex_agent.preflight`). A
record that names no such daemon is removed and the process it names is left alone. Either way
the result is counted (``cdo_imex_daemon_adoptions_total``).
"""

from __future__ import annotations

import logging

from services.imex_agent.binaries import Imex, ImexProcess, NotAdoptableError
from services.imex_agent.files import remove
from services.imex_agent.imexconfig import ImexPaths
from services.imex_agent.metrics import AgentMetrics
from services.imex_agent.preflight import DaemonRecord, read_record

# The controller's logger: adoption is one of its steps.
log = logging.getLogger("cdo.imex_agent.daemon")


def find_recorded(
    *, paths: ImexPaths, imex: Imex, metrics: AgentMetrics
) -> tuple[ImexProcess, DaemonRecord] | None:
    """The running daemon the record names, and the record; None when there is none to adopt."""
    record = read_record(paths.pid_file)
    if record is None:
        return None
    try:
        process = imex.adopt(record, config=paths.config)
    except NotAdoptableError as exc:
        log.info(
            "not adopting the daemon the record names; it is left alone",
            extra={"reason": str(exc), "pid": record.process.pid},
        )
        remove(paths.pid_file)
        metrics.daemon_adoptions.labels("stale").inc()
        return None
    metrics.daemon_adoptions.labels("adopted").inc()
    log.info(
        "adopted the running nvidia-imex",
        extra={
            "pid": process.pid,
            "clique": record.clique,
            "slot": record.slot,
            "digest": record.map_digest,
        },
    )
    return process, record
