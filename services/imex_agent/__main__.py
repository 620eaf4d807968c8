"""The IMEX agent process, one per GPU node (a DaemonSet).

python -m services.imex_agent              # run (settings from CDO_IMEX_AGENT_* variables)
python -m services.imex_agent --settings   # list its CDO_IMEX_AGENT_* settings
python -m services.imex_agent --version    # its version; --help: its command line
"""

from __future__ import annotations

from pathlib import Path

from services.imex_agent.agent import ImexAgent
from services.imex_agent.names import COMPONENT
from services.imex_agent.programs import CommandImex, LauncherImex
from services.imex_agent.settings import ENV_PREFIX, AgentSettings, ImexSettings, describe, load
from shared.kube.client import KubeClient
from shared.nvml import PynvmlNvml
from shared.runtime import ServiceContext
from shared.runtime.entry import kube_service_main


def imex_programs(settings: ImexSettings) -> CommandImex:
    """The daemon through the launcher when one is configured (the DaemonSet), else directly."""
    if settings.launcher_socket:
        return LauncherImex(
            socket=Path(settings.launcher_socket),
            ctl_argv=settings.ctl_argv,
            daemon_argv=settings.daemon_argv,
            ctl_timeout_s=settings.ctl_timeout_s,
            launch_timeout_s=2 * settings.stop_timeout_s + 10,
        )
    return CommandImex(
        daemon_argv=settings.daemon_argv,
        ctl_argv=settings.ctl_argv,
        ctl_timeout_s=settings.ctl_timeout_s,
    )


def start(ctx: ServiceContext, client: KubeClient, settings: AgentSettings) -> None:
    ctx.supervisor.on_shutdown("close kube client", client.close, phase="final")
    imex = imex_programs(settings.imex)
    agent = ImexAgent(
        settings=settings,
        nvml=PynvmlNvml(),
        imex=imex,
        client=client,
        bus=ctx.bus,
        metrics=ctx.metrics,
        tracer=ctx.tracer,
    )
    ctx.readiness.add("imex ready", lambda: agent.reporter.ready)
    ctx.readiness.add("kubelet plugin registered", lambda: agent.plugin.registered)
    ctx.supervisor.start("imex agent", agent.run())


def main() -> int:
    return kube_service_main(
        COMPONENT,
        module="services.imex_agent",
        doc=__doc__,
        prefix=ENV_PREFIX,
        describe=describe,
        load=load,
        start=start,
        requires_dra=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
