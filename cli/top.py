"""``cdo top cliques``: capacity per clique now.

From the allocator's ``CliqueCapacity`` snapshots on NATS where it has them, computed from the
Kubernetes API (:mod:`cli.capacity`) for cliques it has none for or when NATS does not answer.
Exit 3 only when neither source answers.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from typing import TextIO

import msgspec

from cli import capacity
from cli.connection import Endpoints, connect_kube, endpoints_from
from cli.explain.facts import CliqueFact
from cli.output import (
    add_no_headers_option,
    add_output_option,
    structured,
    templated,
    write_document,
    write_templated,
)
from cli.reads import list_nodes, list_placements
from cli.snapshots import read as read_snapshots
from cli.tables import age, table
from cli.watch import add_watch_option, watch
from shared.command_errors import UnreachableError
from shared.crds import Placement
from shared.events import CliqueCapacity
from shared.kube.models import Node


class CliqueTop(msgspec.Struct, kw_only=True):
    cliques: list[CliqueFact] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)


async def _from_kube(endpoints: Endpoints) -> tuple[list[Node], list[Placement]]:
    client = await connect_kube(endpoints)
    try:
        return await list_nodes(client, endpoints), await list_placements(client, endpoints)
    finally:
        await client.close()


async def top_cliques(endpoints: Endpoints) -> CliqueTop:
    snapshots, kube = await asyncio.gather(
        read_snapshots(endpoints, "v1.clique.>"), _from_kube(endpoints), return_exceptions=True
    )
    if isinstance(snapshots, BaseException):
        raise snapshots
    notes = [snapshots.note] if snapshots.note else []
    published = [e for e in snapshots.events if isinstance(e, CliqueCapacity)]
    if isinstance(kube, UnreachableError):
        if snapshots.note:
            raise UnreachableError(f"{kube}; and {snapshots.note}")
        notes.append(f"{kube}; only the published snapshots are shown")
        nodes: list[Node] = []
        placements: list[Placement] = []
    elif isinstance(kube, BaseException):
        raise kube
    else:
        nodes, placements = kube
    return CliqueTop(cliques=capacity.cliques_of(published, nodes, placements), notes=notes)


def render(
    found: CliqueTop, *, wide: bool, now: datetime | None = None, headers: bool = True
) -> str:
    now = now or datetime.now(UTC)
    titles = ["CLIQUE", "NODES OK", "GPUS FREE", "GPU%", "LARGEST FREE", "CHANNELS"]
    if wide:
        titles += ["DOMAINS", "SOURCE", "AGE"]
    rows = []
    for c in found.cliques:
        used = c.gpus_total - c.gpus_free
        row = [
            c.clique,
            f"{c.nodes_healthy}/{c.nodes_total}",
            f"{c.gpus_free}/{c.gpus_total}",
            f"{100 * used // c.gpus_total}%" if c.gpus_total else "-",
            str(c.largest_free_block),
            "-" if c.channels_free is None else str(c.channels_free),
        ]
        if wide:
            row += [str(c.domains), c.source, "-" if c.as_of is None else age(c.as_of, now)]
        rows.append(row)
    lines = table(titles, rows) if rows else ["no clique: no node has a clique label"]
    if not headers and rows:
        lines = lines[1:]
    lines += [f"note: {note}" for note in found.notes]
    return "\n".join(lines)


def print_top(found: CliqueTop, output: str, out: TextIO, *, headers: bool = True) -> None:
    if structured(output):
        write_document(found, output, out)
        return
    if templated(output):
        write_templated(found, output, out, rows="cliques", no_headers=not headers)
        return
    if output == "name":
        out.write("".join(f"clique/{c.clique}\n" for c in found.cliques))
    else:
        out.write(render(found, wide=output == "wide", headers=headers) + "\n")
    out.flush()


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    *,
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    parser = commands.add_parser(
        "top",
        parents=[common],
        help="capacity per clique now",
        description="Capacity per NVLink clique: nodes that take pods, free GPUs, the largest "
        "pod that fits, free IMEX channels; from the allocator's snapshots on NATS, else "
        "computed from the nodes.",
        epilog=epilog,
    )
    parser.add_argument("resource", choices=("cliques",), help="what to show: cliques")
    add_output_option(parser)
    add_no_headers_option(parser)
    add_watch_option(parser)


def run(args: argparse.Namespace) -> None:
    endpoints = endpoints_from(args)

    async def once(out: TextIO) -> None:
        print_top(await top_cliques(endpoints), args.output, out, headers=not args.no_headers)

    asyncio.run(watch(once, sys.stdout, output=args.output) if args.watch else once(sys.stdout))
