"""Run the real IMEX agent process for one simulated node (its NVML bound to the process).

    python -m tests.integration.imex_agent.launch <topology.yaml> <node name>

Everything else is the service's own composition root, configured by CDO_* variables.
"""

from __future__ import annotations

import sys
from pathlib import Path

from services.imex_agent.__main__ import main
from sim.nvml import SimulatedNvml, bind
from sim.topology import parse_topology


def launch() -> int:
    topology, name = sys.argv[1], sys.argv[2]
    del sys.argv[1:3]
    node = parse_topology(Path(topology).read_text()).node(name)
    with bind(SimulatedNvml(node)):
        return main()


if __name__ == "__main__":
    raise SystemExit(launch())
