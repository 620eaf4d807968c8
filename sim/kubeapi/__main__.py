"""``python -m sim.kubeapi --port 6443 --kubeconfig ./kubeconfig``: serve until interrupted.

``--kubernetes-version 1.34|1.35|1.36|1.37`` (default: the newest) picks the release presented,
``--feature-gates Name=true,...`` and ``--runtime-config resource.k8s.io/v1beta2=true,...``
change it as kube-apiserver's flags of those names do; settings kube-apiserver would refuse stop
the start with its message (exit status 2). With ``--data-dir DIR`` a server started again on the
same port is the same server."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

import msgspec

from sim.childproc import die_with
from sim.kubeapi.config import ServerConfig, release_settings
from sim.kubeapi.hosting.child_process import READY_PREFIX
from sim.kubeapi.hosting.in_process import serve
from sim.kubeapi.releases import ReleaseError
from sim.kubeapi.releases.flags import add_release_arguments


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sim.kubeapi", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=0, help="port (0 picks a free one)")
    parser.add_argument("--kubeconfig", required=True, help="where to write the kubeconfig")
    parser.add_argument(
        "--watch-window",
        type=int,
        default=ServerConfig().watch_window,
        help="events kept per resource for watch resumption",
    )
    parser.add_argument(
        "--bookmark-interval",
        type=float,
        default=ServerConfig().bookmark_interval_s,
        help="seconds between BOOKMARK events",
    )
    parser.add_argument(
        "--pod-graceful-deletion",
        action="store_true",
        help="pods bound to nodes wait for a kubelet to finish their deletion",
    )
    add_release_arguments(parser)
    parser.add_argument(
        "--data-dir",
        default="",
        help="keep objects, resourceVersions and keys in this directory, and start from what it "
        "holds: a server started again with it comes back as the same server",
    )
    parser.add_argument(
        "--config-json",
        help="the whole ServerConfig as JSON (overrides the options above; used by sim up)",
    )
    parser.add_argument(
        "--die-with-parent",
        type=int,
        metavar="PID",
        help="exit when the process PID (this one's parent) exits, even when it is killed",
    )
    parser.add_argument("--verbose", action="store_true", help="log at INFO level")
    return parser


async def _main(args: argparse.Namespace) -> None:
    if args.config_json:
        config = msgspec.json.decode(args.config_json, type=ServerConfig)
    else:
        config = ServerConfig(
            watch_window=args.watch_window,
            bookmark_interval_s=args.bookmark_interval,
            pod_graceful_deletion=args.pod_graceful_deletion,
            **release_settings(args.kubernetes_version, args.feature_gates, args.runtime_config),
        )
    if args.data_dir:
        config = msgspec.structs.replace(config, data_dir=args.data_dir)
    config.release()  # refuses what kube-apiserver refuses, before anything is served
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with serve(
        config=config, host=args.host, port=args.port, kubeconfig=args.kubeconfig
    ) as server:
        print(f"{READY_PREFIX}{server.url} (kubeconfig {server.kubeconfig})", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.die_with_parent is not None:
        die_with(args.die_with_parent)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    try:
        asyncio.run(_main(args))
    except ReleaseError as error:
        parser.error(str(error))
    return 0


if __name__ == "__main__":
    sys.exit(main())
