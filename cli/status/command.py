"""``cdo status``: read the Kubernetes API and the NATS snapshots at once, print the report.

Either source may be down: what the other says is still printed, and the failure is raised
after it (an unreachable source first), so the exit code says what went wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

import msgspec
from nats.js.errors import BucketNotFoundError, NotFoundError

from cli.connection import (
    Endpoints,
    connect_kube,
    connect_nats,
    endpoints_from,
    kube_unreachable,
)
from cli.output import (
    add_namespace_options,
    add_no_headers_option,
    add_output_option,
    structured,
    templated,
    write_document,
    write_templated,
)
from cli.status.render import render
from cli.status.report import Report, clique_row, domain_row, node_groups
from cli.watch import add_watch_option, watch
from shared.bus import EventBus
from shared.command_errors import CommandError, UnreachableError
from shared.crds import COMPUTE_DOMAINS, ComputeDomain
from shared.crds.names import CLIQUE_LABEL
from shared.events import CliqueCapacity
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.models import Node
from shared.kube.resources import NODES

DOMAIN_KIND = "computedomain.resource.nvidia.com"
"""The kind/name prefix of ``-o name``, as kubectl prints it."""


class _DomainList(msgspec.Struct):
    items: list[ComputeDomain]


class _NodeList(msgspec.Struct):
    items: list[Node]


async def _from_kube(endpoints: Endpoints, report: Report) -> None:
    client: KubeClient = await connect_kube(endpoints)
    try:
        try:
            nodes = msgspec.json.decode(await client.list(NODES), type=_NodeList).items
        except KubeApiError as exc:
            if exc.code == 0:
                raise kube_unreachable(endpoints, exc) from exc
            raise CommandError(f"listing nodes failed: {exc}") from exc
        report.nodes = node_groups(nodes, clique_label=CLIQUE_LABEL)
        try:
            raw = await client.list(COMPUTE_DOMAINS)
        except KubeApiError as exc:
            if exc.not_found:
                report.notes.append("the ComputeDomain CRD is not installed in this cluster")
                return
            raise CommandError(f"listing ComputeDomains failed: {exc}") from exc
        domains = msgspec.json.decode(raw, type=_DomainList).items
        report.domains = sorted(
            (domain_row(domain) for domain in domains),
            key=lambda row: (row.namespace, row.name),
        )
    finally:
        await client.close()


async def _from_nats(endpoints: Endpoints, report: Report) -> None:
    bus: EventBus = await connect_nats(endpoints)
    try:
        try:
            snapshots = await bus.snapshots("v1.clique.>")
        except (BucketNotFoundError, NotFoundError):
            report.notes.append("NATS has no snapshot bucket yet: no cdo service has run there")
            return
        report.cliques = sorted(
            (clique_row(event) for event in snapshots if isinstance(event, CliqueCapacity)),
            key=lambda row: row.clique,
        )
    finally:
        await bus.close()


async def gather(endpoints: Endpoints) -> tuple[Report, list[CommandError]]:
    """Everything both sources say; the failures of either come back beside the report."""
    report = Report()
    kube, nats = await asyncio.gather(
        _from_kube(endpoints, report), _from_nats(endpoints, report), return_exceptions=True
    )
    failures: list[CommandError] = []
    for outcome, source in ((kube, "kubernetes"), (nats, "nats")):
        if isinstance(outcome, CommandError):
            failures.append(outcome)
            if source == "kubernetes":
                report.kubernetes_reachable = False
            else:
                report.nats_reachable = False
        elif isinstance(outcome, BaseException):
            raise outcome
    return report, failures


async def status(
    endpoints: Endpoints,
    *,
    output: str,
    out: TextIO,
    namespace: str | None = None,
    headers: bool = True,
) -> None:
    """Print the report (domains of ``namespace`` only, when given); raise the most serious
    failure after printing what was read."""
    report, failures = await gather(endpoints)
    if namespace is not None:
        report.domains = [row for row in report.domains if row.namespace == namespace]
    if structured(output):
        write_document(report, output, out)
    elif templated(output):
        write_templated(report, output, out, rows="domains", no_headers=not headers)
    elif output == "name":
        out.write("".join(f"{DOMAIN_KIND}/{row.name}\n" for row in report.domains))
        out.flush()
    else:
        out.write(render(report, wide=output == "wide", headers=headers) + "\n")
        out.flush()
    if failures:
        unreachable = [f for f in failures if isinstance(f, UnreachableError)]
        first = (unreachable or failures)[0]
        if len(failures) > 1:
            raise type(first)("; ".join(str(f) for f in failures))
        raise first


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    *,
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    parser = commands.add_parser(
        "status",
        parents=[common],
        help="domains, cliques and nodes",
        description="Domains with phase, clique, channel and members (Kubernetes API); cliques "
        "with capacity (snapshots on NATS); nodes by clique with readiness and faults.",
        epilog=epilog,
    )
    add_namespace_options(parser, all_help="domains of every namespace (the default)")
    add_output_option(parser)
    add_no_headers_option(parser)
    add_watch_option(parser)
    parser.add_argument(
        "--json", dest="output", action="store_const", const="json", help="the same as -o json"
    )


def run(args: argparse.Namespace) -> None:
    endpoints = endpoints_from(args)
    namespace = None if args.all_namespaces else args.namespace

    async def once(out: TextIO) -> None:
        await status(
            endpoints,
            output=args.output,
            out=out,
            namespace=namespace,
            headers=not args.no_headers,
        )

    if args.watch:
        asyncio.run(watch(once, sys.stdout, output=args.output))
    else:
        asyncio.run(once(sys.stdout))
