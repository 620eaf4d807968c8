"""``python -m sim.demo``: bring the system up, tell the story, print the summary, stop.

Exit codes: 0 the story ran to the end; 1 a step failed or did not finish in time (the message
and the tail of the relevant logs say why); 130 interrupted. Ctrl-C (or SIGTERM) at any point
stops everything the demo started; ``--keep`` leaves it running after a finished story.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
import types
from dataclasses import replace
from pathlib import Path

from shared.tracing import export_configured, setup_tracing
from sim.demo.bringup import (
    BringUpError,
    Running,
    bring_down,
    bring_up,
    default_state_dir,
    log_tail,
    shorten_health_timings,
)
from sim.demo.monitor import StoryError
from sim.demo.screen import Screen
from sim.demo.story import Timeouts, tell
from sim.demo.summary import Summary, keep_lines, summary_lines
from sim.demo.uipage import UiPage, UiPageError, start_ui_page

UP_TIMEOUT_S = 300.0
"""For each start-up step: starting 36 nodes' services takes a minute or two on a busy machine."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sim.demo",
        description="The cdo story on the simulated cluster: two NVL72 racks, the four "
        "services, a ComputeDomain of 18 pods, a fatal XID and the recovery, its rack's "
        "fabric lost and the domain's failover to the other rack, then one ComputeDomain of "
        "36 pods over both racks in two slices.",
    )
    parser.add_argument(
        "--keep", action="store_true", help="leave the cluster running and print how to use it"
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        help=f"where the processes keep their state and logs (default {default_state_dir()})",
    )
    parser.add_argument(
        "--nats-auth",
        action="store_true",
        help="NATS identities (cdo sim up --nats-auth): every service with its own token, the "
        "demo's event feed as a reader",
    )
    parser.add_argument(
        "--ui",
        action="store_true",
        help="also serve the live topology page (cdo ui) for the demo's cluster and print its "
        "address",
    )
    parser.add_argument(
        "--step-timeout",
        type=float,
        default=Timeouts.step_s,
        help="seconds each step of the story may take (default %(default).0f)",
    )
    return parser.parse_args(argv)


def _interrupt_on_sigterm() -> None:
    """SIGTERM stops the demo as Ctrl-C does, through the same clean-up."""

    def handler(signum: int, frame: types.FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _show_failure(screen: Screen, message: str, logs: tuple[Path, ...]) -> None:
    screen.heading("FAILED")
    for line in message.splitlines():
        screen.note(line)
    for path in logs:
        screen.note("")
        screen.note(f"last lines of {path}:")
        for line in log_tail(path):
            screen.note(line)


def run(args: argparse.Namespace, screen: Screen) -> int:
    state_dir = (args.state_dir or default_state_dir()).resolve()
    timings = shorten_health_timings(os.environ)
    provider = setup_tracing(service="cdo-demo", instance=socket.gethostname())
    tracer = provider.get_tracer("cdo.demo")
    exported = export_configured()
    running: Running | None = None
    page: UiPage | None = None
    keep = False
    _interrupt_on_sigterm()
    try:
        with tracer.start_as_current_span("demo") as root:
            trace_id = format(root.get_span_context().trace_id, "032x")
            screen.heading("cdo demo: a ComputeDomain on two simulated GB200 NVL72 racks")
            screen.note(f"state and logs in {state_dir}")
            screen.note(
                f"trace id {trace_id}"
                + (
                    f" (exported to {os.environ.get('OTEL_EXPORTER_OTLP_ENDPOINT', 'OTLP')})"
                    if exported
                    else " (set OTEL_EXPORTER_OTLP_ENDPOINT to export it)"
                )
            )
            screen.step("start NATS, the API emulator with 36 nodes, and the four services")
            screen.note(
                "health monitors shortened for the demo: "
                + ", ".join(f"{key}={value}" for key, value in timings.items())
                + " (a real node keeps 300 and 30)"
            )
            with tracer.start_as_current_span("bring up"):
                running = bring_up(
                    state_dir, say=screen.live, timeout_s=UP_TIMEOUT_S, nats_auth=args.nats_auth
                )
            screen.note(
                "processes: " + ", ".join(f"{name} {pid}" for name, pid in running.pids.items())
            )
            if args.ui:
                page = start_ui_page(
                    kubeconfig=running.kubeconfig,
                    nats_url=running.nats_url,
                    nats_token_file=running.nats_token_file,
                    log=state_dir / "logs" / "ui.log",
                )
                screen.note(f"the topology page: {page.url} (open it beside the story)")
            summary = asyncio.run(
                tell(running, screen=screen, tracer=tracer, timeouts=Timeouts(args.step_timeout))
            )
            summary = replace(summary, trace_id=trace_id, trace_exported=exported)
            if args.keep:
                keep = True
                _show_summary(screen, summary)
                screen.heading("the cluster keeps running")
                if page is not None:
                    screen.note(
                        f"the topology page stays at {page.url} (process {page.process.pid}; "
                        f"kill {page.process.pid} stops it)"
                    )
                    page = None
                for line in keep_lines(
                    kubeconfig=running.kubeconfig,
                    nats_url=running.nats_url,
                    nats_token_file=running.nats_token_file,
                    state_dir=state_dir,
                    tools=Path(sys.executable).parent,
                ):
                    screen.note(line)
                return 0
            with tracer.start_as_current_span("stop"):
                _stop(screen, running)
                running = None
            _show_summary(screen, summary)
            return 0
    except (BringUpError, UiPageError) as exc:
        _show_failure(screen, str(exc), ())
        return 1
    except StoryError as exc:
        _show_failure(screen, str(exc), exc.logs)
        return 1
    except KeyboardInterrupt:
        screen.heading("interrupted: stopping everything")
        keep = False
        return 130
    finally:
        if page is not None:
            page.stop()
        if running is not None and not keep:
            _stop(screen, running)
        provider.shutdown()  # sends the spans still buffered


def _stop(screen: Screen, running: Running) -> None:
    screen.step("stop everything")
    # A second Ctrl-C must not leave half of the processes running.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        bring_down(running.state_dir, say=screen.live)
    finally:
        signal.signal(signal.SIGINT, previous)


def _show_summary(screen: Screen, summary: Summary) -> None:
    screen.heading("summary")
    for line in summary_lines(summary):
        screen.note(line)


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run(parse_args(argv), Screen()))
