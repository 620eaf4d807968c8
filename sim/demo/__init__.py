"""``./task demo``: the cdo story on the simulated cluster, end to end in one terminal.

    ./task demo                      # run the story, then stop everything
    ./task demo -- --keep            # leave the cluster running and print how to use it
    python -m sim.demo --state-dir /tmp/d

The story: start NATS, the API emulator with two simulated NVL72 racks and the four services
(:mod:`sim.demo.bringup`); apply the two example manifests with kubectl and follow the pods, the
nodes' IMEX state and the domain's phase until the domain is Ready (:mod:`sim.demo.story`,
rendered by :mod:`sim.demo.progress`, events counted by :mod:`sim.demo.tally`); inject a fatal
XID on one member node and follow the recovery; take that domain's rack's whole NVLink fabric
down and follow the domain's failover to the other rack, then bring the fabric back
(:mod:`sim.demo.failover`); delete that domain and apply a second pair of examples whose domain
spans both racks in two slices (:mod:`sim.demo.spanning`); print the summary, with the IMEX
daemon restarts the node host counted (:mod:`sim.demo.summary`, :mod:`sim.demo.restarts`), and
stop everything. docs/demo.md walks through the output.
"""
