"""``cdo explain DOMAIN`` / ``cdo explain pod/NAME``: collect the facts, explain, print."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from cli.connection import Endpoints, connect_kube, endpoints_from, namespace_from
from cli.explain.collect import collect, find_namespace
from cli.explain.explain import Explanation, explain
from cli.explain.render import render
from cli.output import (
    add_namespace_options,
    add_output_option,
    structured,
    templated,
    write_document,
    write_templated,
)
from shared.command_errors import UsageError

_FORMATS = ("json", "yaml", "name")
_POD_PREFIXES = ("pod/", "pods/", "po/")
_DOMAIN_PREFIXES = ("computedomain/", "computedomains/", "cd/")


def parse_target(text: str) -> tuple[str, str]:
    """``("domain", NAME)`` or ``("pod", NAME)``; UsageError for another kind or no name."""
    lowered = text.lower()
    for prefixes, kind in ((_POD_PREFIXES, "pod"), (_DOMAIN_PREFIXES, "domain")):
        for prefix in prefixes:
            if lowered.startswith(prefix):
                name = text[len(prefix) :]
                if not name:
                    raise UsageError(f"explain {text!r}: name the {kind} after {prefix!r}")
                return kind, name
    if "/" in text:
        raise UsageError(
            f"explain {text!r}: give a ComputeDomain name, computedomain/NAME or pod/NAME"
        )
    return "domain", text


async def explanation(endpoints: Endpoints, *, target: str, namespace: str | None) -> Explanation:
    kind, name = parse_target(target)
    if namespace is None:  # -A: find the one namespace that has it
        if kind == "pod":
            raise UsageError("explain pod/NAME needs a namespace (-n), not -A")
        client = await connect_kube(endpoints)
        try:
            namespace = await find_namespace(client, endpoints, name)
        finally:
            await client.close()
    if kind == "pod":
        facts = await collect(endpoints, namespace=namespace, name="", pod=name)
    else:
        facts = await collect(endpoints, namespace=namespace, name=name)
    return explain(facts)


def print_explanation(found: Explanation, output: str, out: TextIO) -> None:
    if structured(output):
        write_document(found, output, out)
        return
    if templated(output):
        write_templated(found, output, out, rows="findings")
        return
    if output == "name":
        out.write(found.target.split(" (of ")[0].replace(" ", "/", 1) + "\n")
    else:
        out.write(render(found) + "\n")
    out.flush()


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    *,
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    parser = commands.add_parser(
        "explain",
        parents=[common],
        help="why a domain or pod waits or is Degraded",
        description="One screen on why a ComputeDomain (or one of its pods) waits or is "
        "Degraded: each reason with what it means, the placement slice by slice, the "
        "cliques' capacity, member nodes' faults, taints and IMEX state, recent events.",
        epilog=epilog,
    )
    parser.add_argument("target", metavar="DOMAIN|pod/NAME", help="a ComputeDomain, or pod/NAME")
    add_namespace_options(parser, all_help="find the domain in whichever namespace has it")
    add_output_option(parser, formats=_FORMATS)


def run(args: argparse.Namespace) -> None:
    endpoints = endpoints_from(args)
    namespace = namespace_from(args, endpoints)
    found = asyncio.run(explanation(endpoints, target=args.target, namespace=namespace))
    print_explanation(found, args.output, sys.stdout)
