"""The APIs a service cannot run without, asked of the server once before the service starts.

A service that needs DRA (the domain controller, the clique allocator, the IMEX agent) asks
discovery whether the server serves :data:`shared.kube.apis.REQUIRED_APIS` before it starts its
informers. A server that answers without them (a release before 1.34) ends the service with
:class:`~shared.errors.UnsuitableClusterError`: exit code 2 and one error record whose message
names the missing APIs and the minimum release (:func:`shared.kube.apis.missing_required_message`).
Waiting would not help: no informer of those resources could ever sync.

A server that does not answer (down, starting, a timeout, a 5xx or 429) is not a server without
DRA: the check says so once in the log and asks again every ``retry_s`` until it has an answer;
the service stays unready meanwhile, as it would with informers that cannot list.
"""

from __future__ import annotations

import asyncio
import logging

from shared.errors import UnsuitableClusterError
from shared.kube.apis import missing_required, missing_required_message
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError

log = logging.getLogger("cdo.runtime")

RETRY_S = 2.0


def _transient(error: KubeApiError) -> bool:
    return error.code == 0 or error.code == 429 or error.code >= 500


async def require_served(client: KubeClient, *, retry_s: float = RETRY_S) -> None:
    """Return once the server serves every required API; raise UnsuitableClusterError when it
    answers without one (see the module docstring)."""
    told = False
    while True:
        try:
            missing = await missing_required(client)
        except KubeApiError as exc:
            if not _transient(exc):
                raise
            if not told:
                log.warning(
                    "the API server does not answer discovery yet; asking again",
                    extra={"error": exc.message, "retry_s": retry_s},
                )
                told = True
            await asyncio.sleep(retry_s)
            continue
        if missing:
            message = missing_required_message(missing)
            log.error(message, extra={"missing": [resource.plural for resource in missing]})
            raise UnsuitableClusterError(message)
        return
