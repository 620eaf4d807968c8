"""The ``cdo`` command line: status, events, and the simulated cluster.

    cdo status [-n NS | -A] [-o json|yaml|wide|name]
    cdo explain DOMAIN | pod/NAME [-n NS | -A] [-o json|yaml|name]
    cdo top cliques [-o json|yaml|wide|name]
    cdo preflight [--cdo-namespace NS] [-o json|yaml]
    cdo events [--follow] [--subject PATTERN] [--since TIME | --from-seq N] [--json]
    cdo sim up [--topology FILE] [--nodes GLOB] [--no-wait] [--no-services]
    cdo sim down
    cdo sim power on|off NODE
    cdo sim fault NODE --xid N [--gpu I] | --gpu-lost | --nvlink-down LINK | ... | --clear
    cdo completion bash|zsh
    cdo --version

Every command takes ``--state-dir``, ``--kubeconfig``, ``--context`` and ``--nats-url`` (before
or after the command name). Installed as ``kubectl-cdo`` too, so ``kubectl cdo ...`` runs it
(:func:`kubectl_main`). Exit codes: 0 ok, 1 the command failed, 2 usage, 3 the cluster or NATS
cannot be reached (:mod:`shared.command_errors`); ``cdo preflight`` has its own: 0 ok, 1 a
warning, 2 a failure (an unreachable cluster included). docs/cli.md has the details.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from cli import completion, events, explain, preflight, status, top, ui, wait
from cli.connection import quiet_logging, state_dir_from
from cli.parser import build_parser
from shared.command_errors import EXIT_OK, CommandError
from sim.control import commands as sim_commands


def _say(line: str) -> None:
    print(line, flush=True)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Run the parsed command; its exit code (most end with 0, or raise a CommandError)."""
    if args.command == "preflight":
        return preflight.run(args)
    if args.command == "status":
        status.run(args)
    elif args.command == "explain":
        explain.run(args)
    elif args.command == "top":
        top.run(args)
    elif args.command == "events":
        events.run(args)
    elif args.command == "wait":
        wait.run(args)
    elif args.command == "ui":
        ui.run(args)
    elif args.command == "completion":
        completion.run(args, parser)
    else:
        sim_commands.run(args, state_dir=state_dir_from(args), say=_say)
    return EXIT_OK


def main(argv: Sequence[str] | None = None, *, prog: str = "cdo") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    quiet_logging(getattr(args, "verbose", False))
    try:
        code = run(args, parser)
    except CommandError as exc:
        print(f"cdo: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (cdo events | head): not an error of ours.
        sys.stderr.close()
        return EXIT_OK
    return code


def kubectl_main() -> int:
    """``kubectl-cdo``: the same command, named as kubectl shows it (``kubectl cdo``)."""
    return main(prog="kubectl cdo")
