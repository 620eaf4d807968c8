"""``python -m sim.scheduler --kubeconfig PATH``: schedule pods until interrupted.

Settings come from ``CDO_SCHEDULER_*`` environment variables (``CDO_SCHEDULER_WORKERS``,
``CDO_SCHEDULER_BACKOFF_MAX_S`` ...);
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

from shared.errors import ConfigError
from shared.kube.client import KubeClient
from shared.runtime.logs import configure_logging
from shared.settings import load_settings
from sim.scheduler.scheduler import Scheduler, SchedulerSettings

ENV_PREFIX = "CDO_SCHEDULER_"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sim.scheduler", description=__doc__)
    parser.add_argument("--kubeconfig", required=True, help="kubeconfig of the API server")
    parser.add_argument("--verbose", action="store_true", help="log every decision")
    return parser


async def _main(kubeconfig: str, settings: SchedulerSettings) -> None:
    client = await KubeClient.connect(kubeconfig=kubeconfig)
    try:
        scheduler = Scheduler(client, settings=settings)
        runner = asyncio.create_task(scheduler.run(), name="scheduler")
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, runner.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await runner
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(service="sim-scheduler", level="debug" if args.verbose else "info")
    try:
        settings = load_settings(SchedulerSettings, prefix=ENV_PREFIX)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    asyncio.run(_main(args.kubeconfig, settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
