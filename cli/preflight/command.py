"""``cdo preflight``: read the cluster, judge it, print the checks, exit 0, 1 (warn) or 2 (fail)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from typing import TextIO

import msgspec

from cli.connection import endpoints_from
from cli.output import add_output_option, structured, write_document
from cli.preflight.checks import Check, exit_code, run_checks
from cli.preflight.gather import gather
from cli.preflight.render import render, summary

DEFAULT_NAMESPACE = "cdo-system"
EXIT_CODES = "exit codes: 0 every check ok, 1 a warning, 2 a failure (or a wrong command line)"


class Report(msgspec.Struct, kw_only=True):
    """What ``-o json|yaml`` prints."""

    result: str
    """``ok``, ``warn`` or ``fail``."""
    exit_code: int
    summary: str
    checks: list[Check]


def report(checks: list[Check]) -> Report:
    code = exit_code(checks)
    return Report(
        result=("ok", "warn", "fail")[code], exit_code=code, summary=summary(checks), checks=checks
    )


def print_report(found: Report, output: str, out: TextIO) -> None:
    if structured(output):
        write_document(found, output, out)
        return
    out.write(render(found.checks) + "\n")
    out.flush()


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    *,
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    del epilog  # preflight's exit codes are its own
    parser = commands.add_parser(
        "preflight",
        parents=[common],
        help="is the cluster ready for cdo (before and after install)",
        description="Check, before and after installing cdo, whether the cluster is ready for "
        "it: the Kubernetes release and the DRA APIs, the optional APIs and what cdo does "
        "without them, GPUs and NVLink cliques, NVIDIA's ComputeDomain driver; once installed, "
        "cdo's services, its pod webhook and certificate, NATS, and what the IMEX agents found "
        "on their nodes. Each check prints ok, warn or fail, with what to do.",
        epilog=EXIT_CODES,
    )
    parser.add_argument(
        "--cdo-namespace",
        default=DEFAULT_NAMESPACE,
        help=f"the namespace cdo is installed in (default {DEFAULT_NAMESPACE})",
    )
    add_output_option(parser, formats=("json", "yaml"))


def run(args: argparse.Namespace) -> int:
    facts = asyncio.run(gather(endpoints_from(args), namespace=args.cdo_namespace))
    found = report(run_checks(facts, now=datetime.now(UTC)))
    print_report(found, args.output, sys.stdout)
    return found.exit_code
