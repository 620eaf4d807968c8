"""How a cdo service lives and dies: settings, logging, probes, metrics, supervision."""

from shared.metrics import Metrics
from shared.runtime.probes import Readiness
from shared.runtime.service import RuntimeSettings, ServiceContext, run_service, serve
from shared.runtime.supervisor import Supervisor

__all__ = [
    "Metrics",
    "Readiness",
    "RuntimeSettings",
    "ServiceContext",
    "Supervisor",
    "run_service",
    "serve",
]
