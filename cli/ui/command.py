"""``cdo ui``: serve the live topology page of the cluster the CLI is pointed at."""

from __future__ import annotations

import argparse
import asyncio
import sys
import webbrowser

from cli.connection import endpoints_from
from cli.ui.server import Ui, serve
from shared.command_errors import CommandError, UsageError

DEFAULT_PORT = 8080


DESCRIPTION = (
    "Serve a web page of the cluster: every NVLink rack as its trays and GPUs, coloured by the "
    "ComputeDomain holding them, faults and tray marks, a domain's slices and conditions, and "
    "the live event feed. Reads the Kubernetes API (and NATS, when it answers); writes nothing."
)


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    *,
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    parser = commands.add_parser(
        "ui",
        parents=[common],
        help="a live page of every rack, tray and GPU",
        description=DESCRIPTION,
        epilog=epilog,
    )
    add_arguments(parser)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``cdo ui``'s own options (also those of ``python -m cli.ui``, the image's)."""
    parser.add_argument(
        "--address",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: only this machine; the page shows the "
        "cluster with your credentials to whoever reaches it)",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free)"
    )
    parser.add_argument(
        "--no-feed", action="store_true", help="do not follow NATS; the API's state only"
    )
    parser.add_argument("--open", action="store_true", help="open the page in a browser")


async def _serve(args: argparse.Namespace) -> None:
    ui = Ui(endpoints_from(args), feed=not args.no_feed)

    def listening(url: str) -> None:
        print(f"cdo ui: {url}  ({ui.cluster.where}; Ctrl-C stops)", flush=True)
        if args.open:
            webbrowser.open(url)

    await serve(ui, host=args.address, port=args.port, on_listening=listening)


def run(args: argparse.Namespace) -> None:
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: give a port from 0 to 65535")
    try:
        asyncio.run(_serve(args))
    except OSError as exc:
        raise CommandError(f"cannot listen on {args.address}:{args.port}: {exc}") from exc
    finally:
        sys.stdout.flush()
