"""``-w``/``--watch`` of ``cdo status`` and ``cdo top cliques``: the report again whenever it
changes, until Ctrl-C.

The command reads its sources every :data:`INTERVAL_S` and prints the report when it differs from
the last one printed, under a line with the time (with ``-o json``, one document a line, as
``kubectl get -w -o json`` prints one object after another). A source that stops answering is a
line in the report, not the end of the watch.
"""

from __future__ import annotations

import argparse
import asyncio
import io
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TextIO

from shared.command_errors import CommandError

INTERVAL_S = 2.0


def add_watch_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help=f"print the report again whenever it changes (read every {INTERVAL_S:g} s) "
        "until Ctrl-C",
    )


async def watch(
    report: Callable[[TextIO], Awaitable[None]],
    out: TextIO,
    *,
    output: str,
    interval_s: float = INTERVAL_S,
    now: Callable[[], datetime] = datetime.now,
) -> None:
    """Call ``report(buffer)`` every ``interval_s``; print what it wrote when it changed."""
    last: str | None = None
    while True:
        buffer = io.StringIO()
        try:
            await report(buffer)
        except CommandError as exc:
            written = buffer.getvalue()
            buffer.write(("\n" if written and not written.endswith("\n") else "") + f"cdo: {exc}\n")
        text = buffer.getvalue()
        if text != last:
            # JSON documents are one line each already; a table gets the time above it.
            if last is not None and output != "json":
                out.write(f"-- {now().strftime('%H:%M:%S')}\n")
            out.write(text if text.endswith("\n") or not text else text + "\n")
            out.flush()
            last = text
        await asyncio.sleep(interval_s)
