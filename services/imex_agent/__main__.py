"""The IMEX agent process, one per GPU node (a DaemonSet).

python -m services.imex_agent              # run (settings from CDO_IMEX_AGENT_* variables)
python -m services.imex_agent --settings   # list its CDO_IMEX_AGENT_* settings
"""

from __future__ import annotations

import sys

from services.imex_agent.agent import ImexAgent
from services.imex_agent.binaries import CommandImex
from services.imex_agent.names import COMPONENT
from services.imex_agent.settings import describe, load
from shared.errors import ConfigError
from shared.kube.client import KubeClient
from shared.nvml import PynvmlNvml
from shared.runtime import ServiceContext, run_service
from shared.runtime.service import EXIT_CONFIG


def main() -> int:
    if "--settings" in sys.argv[1:]:
        print(describe())
        return 0
    try:
        settings = load()
    except ConfigError as exc:
        print(f"{COMPONENT}: invalid setting {exc}", file=sys.stderr)
        return EXIT_CONFIG

    async def setup(ctx: ServiceContext) -> None:
        client = await KubeClient.connect(
            kubeconfig=settings.kubeconfig or None, request_timeout_s=settings.request_timeout_s
        )
        ctx.supervisor.on_shutdown("close kube client", client.close, phase="final")
        imex = CommandImex(
            daemon_argv=settings.imex.daemon_argv,
            ctl_argv=settings.imex.ctl_argv,
            ctl_timeout_s=settings.imex.ctl_timeout_s,
        )
        agent = ImexAgent(
            settings=settings,
            nvml=PynvmlNvml(),
            imex=imex,
            client=client,
            bus=ctx.bus,
            metrics=ctx.metrics,
        )
        ctx.readiness.add("imex ready", lambda: agent.reporter.ready)
        ctx.readiness.add("kubelet plugin registered", lambda: agent.plugin.registered)
        ctx.supervisor.start("imex agent", agent.run())

    return run_service(COMPONENT, setup)


if __name__ == "__main__":
    raise SystemExit(main())
