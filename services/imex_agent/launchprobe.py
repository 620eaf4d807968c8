"""The ``imex-daemon`` container's readiness probe: the IMEX launcher answers on its socket.

    python -m services.imex_agent.launchprobe     # exit 0: it answered; 1: it did not (why)

Run by the kubelet in the launcher's container (an exec probe), with the container's environment
(``CDO_IMEX_AGENT_IMEX_LAUNCHER_SOCKET``). It imports only the protocol module, so each run costs
a Python start and one round trip, not the agent's imports. It says nothing of the daemon's own
state: the agent's readiness (``imex ready``) is that, and a liveness probe here would restart the
container and with it the node's ``nvidia-imex`` (docs/deploy.md).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from services.imex_agent.launchprotocol import SOCKET_VARIABLE, ProbeRequest, ask

TIMEOUT_S = 3.0
"""Below the probe's timeoutSeconds in the DaemonSet, so a hung launcher is reported, not killed."""


def probe(environ: Mapping[str, str]) -> tuple[bool, str]:
    """(answered, one line to print)."""
    path = environ.get(SOCKET_VARIABLE, "")
    if not path:
        return False, f"{SOCKET_VARIABLE} is not set: where the launcher serves"
    try:
        reply = ask(Path(path), ProbeRequest(), timeout_s=TIMEOUT_S)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        return False, f"the IMEX launcher at {path} does not answer: {exc}"
    held = f"holds nvidia-imex pid {reply.pid}" if reply.pid else "holds no daemon"
    return True, f"the IMEX launcher at {path} answers; it {held}"


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    del argv
    answered, line = probe(os.environ if environ is None else environ)
    print(line, file=sys.stdout if answered else sys.stderr)
    return 0 if answered else 1


if __name__ == "__main__":
    raise SystemExit(main())
