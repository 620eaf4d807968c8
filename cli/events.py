"""``cdo events``: cdo's CloudEvents from the JetStream stream, one readable line each.

The stream is read with an ordered consumer from the chosen start (all retained history, a
sequence, or a time). Without ``--follow`` the command stops at the last event that was in the
stream when it started (each message says how many are still pending after it); with it, it
keeps printing new events until interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TextIO

import msgspec
from nats.aio.msg import Msg
from nats.js.errors import NotFoundError

from cli.connection import connect_nats, endpoints_from, nats_settings
from cli.jsonpath import jsonpath
from cli.output import JSONPATH, add_output_option
from shared.bus import EventBus, StartAt
from shared.bus.cloudevents import decode, format_time, lowercase_headers
from shared.command_errors import CommandError, UsageError
from shared.errors import EventError
from shared.events import Event
from shared.events.describe import describe
from shared.events.subjects import ALL_EVENTS, SUBJECT_ROOT

_TYPE_PREFIX = "dev.cdo.v1."
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d)$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_encoder = msgspec.json.Encoder()


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """A relative duration (``90s``, ``10m``, ``2h``, ``1d``) or an ISO 8601 time (UTC if naive)."""
    match = _DURATION.match(text.strip())
    if match is not None:
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
        return (now or datetime.now(UTC)) - timedelta(seconds=seconds)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"--since {text!r}: give a duration like 10m, 2h, 1d or a time like "
            "2025-01-31T12:00:00Z"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def subject_pattern(text: str | None) -> str:
    """``--subject``: a NATS pattern; ``node.*.fault`` is short for ``cdo.v1.node.*.fault``."""
    if not text:
        return ALL_EVENTS
    return text if text.startswith("cdo.") else f"{SUBJECT_ROOT}.{text}"


@dataclass(frozen=True)
class Query:
    subject: str = ALL_EVENTS
    start: StartAt = field(default_factory=StartAt)
    follow: bool = False
    as_json: bool = False
    template: str = ""
    """``-o jsonpath=TEMPLATE``: the template over each event's JSON record."""


def _short_type(ce_type: str) -> str:
    return ce_type.removeprefix(_TYPE_PREFIX)


def render_line(sequence: int, event: Event) -> str:
    """``#12     2025-01-31 12:00:00.123Z  node.fault       node n1 FAULT xid 79 fatal ...``."""
    moment = event.time.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    return f"#{sequence:<6} {moment}  {_short_type(event.ce_type()):<17} {describe(event)}"


def record_of(sequence: int, subject: str, event: Event) -> dict[str, object]:
    """What ``-o json`` prints of an event (and ``-o jsonpath`` reads)."""
    return {
        "sequence": sequence,
        "subject": subject,
        "type": event.ce_type(),
        "id": event.id,
        "source": event.source,
        "time": format_time(event.time),
        "summary": describe(event),
        "data": event,
    }


def render_json(sequence: int, subject: str, event: Event) -> str:
    return _encoder.encode(record_of(sequence, subject, event)).decode()


class _Printer:
    def __init__(self, out: TextIO, *, as_json: bool, template: str = "") -> None:
        self._out = out
        self._as_json = as_json
        self._template = template
        self.printed = 0

    def event(self, sequence: int, subject: str, event: Event) -> None:
        if self._template:
            record = msgspec.to_builtins(record_of(sequence, subject, event))
            line = jsonpath(self._template, record)
        elif self._as_json:
            line = render_json(sequence, subject, event)
        else:
            line = render_line(sequence, event)
        self._out.write(line + "\n")
        self._out.flush()
        self.printed += 1

    def undecodable(self, sequence: int, subject: str, reason: str) -> None:
        if self._as_json:
            line = _encoder.encode(
                {"sequence": sequence, "subject": subject, "undecodable": reason}
            ).decode()
        else:
            line = f"#{sequence:<6} (not a cdo event on {subject}: {reason})"
        self._out.write(line + "\n")
        self._out.flush()


async def print_events(bus: EventBus, query: Query, *, stream: str, out: TextIO) -> int:
    """Print the events ``query`` selects; the number printed."""
    printer = _Printer(out, as_json=query.as_json, template=query.template)
    finished = asyncio.Event()

    async def on_message(msg: Msg) -> None:
        metadata = msg.metadata
        sequence = metadata.sequence.stream
        try:
            event = decode(lowercase_headers(msg.headers), msg.data)
        except EventError as exc:
            printer.undecodable(sequence, msg.subject, str(exc))
        else:
            printer.event(sequence, msg.subject, event)
        if not query.follow and metadata.num_pending == 0:
            finished.set()

    try:
        subscription = await bus.js.subscribe(
            query.subject,
            cb=on_message,
            ordered_consumer=True,
            config=query.start.consumer_config(),
            stream=stream,
        )
    except NotFoundError as exc:
        raise CommandError(
            f"NATS has no stream {stream}: no cdo service has run against this server yet"
        ) from exc
    try:
        if query.follow:
            await _until_interrupted()
        else:
            info = await subscription.consumer_info()
            delivered = info.delivered.consumer_seq if info.delivered is not None else 0
            if info.num_pending == 0 and not delivered:
                finished.set()  # nothing matches: no message will come to say so
            await finished.wait()
    finally:
        await subscription.unsubscribe()
    return printer.printed


async def _until_interrupted() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    handled: list[signal.Signals] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
        handled.append(signum)
    try:
        await stop.wait()
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)


def start_at(*, since: str | None, from_seq: int | None, now: Callable[[], datetime]) -> StartAt:
    if since is not None and from_seq is not None:
        raise UsageError("--since and --from-seq exclude each other")
    if from_seq is not None:
        if from_seq < 1:
            raise UsageError("--from-seq counts from 1")
        return StartAt(sequence=from_seq)
    if since is not None:
        return StartAt(time=parse_since(since, now=now()))
    return StartAt()


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    *,
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    parser = commands.add_parser(
        "events",
        parents=[common],
        help="cdo's events from the stream",
        description="Print cdo's CloudEvents from the JetStream stream, oldest first: all "
        "retained history, or from a time or a stream sequence; --follow keeps printing.",
        epilog=epilog,
    )
    parser.add_argument(
        "-f",
        "--follow",
        "-w",
        "--watch",
        dest="follow",
        action="store_true",
        help="keep printing new events until Ctrl-C",
    )
    parser.add_argument(
        "--subject",
        help="NATS subject pattern, e.g. 'cdo.v1.node.*.fault' or short 'node.*.fault'",
    )
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--since", help="from a time: 10m, 2h, 1d, or 2025-01-31T12:00:00Z")
    start.add_argument("--from-seq", type=int, help="from this stream sequence number")
    add_output_option(parser, formats=("json",), columns=False)
    parser.add_argument(
        "--json", dest="output", action="store_const", const="json", help="the same as -o json"
    )


def run(args: argparse.Namespace) -> None:
    asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> None:
    endpoints = endpoints_from(args)
    query = Query(
        subject=subject_pattern(args.subject),
        start=start_at(since=args.since, from_seq=args.from_seq, now=lambda: datetime.now(UTC)),
        follow=args.follow,
        as_json=args.output == "json",
        template=args.output[len(JSONPATH) :] if args.output.startswith(JSONPATH) else "",
    )
    bus = await connect_nats(endpoints, reconnect_forever=args.follow)
    try:
        stream = nats_settings(endpoints.nats_url).stream
        await print_events(bus, query, stream=stream, out=sys.stdout)
    finally:
        await bus.close()
