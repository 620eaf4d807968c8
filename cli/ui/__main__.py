"""``python -m cli.ui``: ``cdo ui`` without the rest of the command line, for the image.

The image carries ``cli`` but not the simulator, which ``cdo``'s other commands load
(``cdo sim``); this entry point loads only the page's server. In a pod it finds the cluster
through its ServiceAccount and NATS through ``CDO_NATS_URL`` (deploy/kustomize/components/ui).
"""

from __future__ import annotations

import argparse
import sys

from cli.connection import connection_options, quiet_logging
from cli.ui.command import DESCRIPTION, add_arguments, run
from shared.command_errors import CommandError


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cli.ui", description=DESCRIPTION, parents=[connection_options()]
    )
    add_arguments(parser)
    args = parser.parse_args()
    quiet_logging(getattr(args, "verbose", False))
    try:
        run(args)
    except CommandError as exc:
        print(f"cdo ui: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
