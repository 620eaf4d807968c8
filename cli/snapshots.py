"""The latest snapshots in NATS KV (capacity per clique, IMEX state per node), for commands that
can do without them: a NATS that does not answer becomes a note, not a failure."""

from __future__ import annotations

from collections.abc import Sequence

from nats.js.errors import BucketNotFoundError, NotFoundError

from cli.connection import Endpoints, connect_nats
from shared.command_errors import UnreachableError
from shared.events import Event


class Snapshots:
    """What NATS had, and why there is nothing when there is nothing (``note``)."""

    def __init__(self, events: Sequence[Event], note: str = "") -> None:
        self.events = list(events)
        self.note = note


async def read(endpoints: Endpoints, *keys: str) -> Snapshots:
    """The snapshots under each KV key pattern in ``keys``; a note instead when NATS cannot say."""
    try:
        bus = await connect_nats(endpoints)
    except UnreachableError as exc:
        return Snapshots((), note=str(exc))
    try:
        events: list[Event] = []
        for pattern in keys:
            events += await bus.snapshots(pattern)
        return Snapshots(events)
    except (BucketNotFoundError, NotFoundError):
        return Snapshots((), note="NATS has no snapshot bucket yet: no cdo service has run there")
    finally:
        await bus.close()
