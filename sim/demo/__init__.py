"""``./task demo``: the cdo story on the simulated cluster, end to end in one terminal.

    ./task demo                      # run the story, then stop everything
    ./task demo -- --keep            # leave the cluster running and print how to use it
    python -m sim.demo --state-dir /tmp/d

The story: start NATS, the API emulator with two simulated NVL72 racks and the four services
(:mod:`sim.demo.bringup`); apply the two example manifests with kubectl and follow the pods, the
nodes' IMEX state and the domain's phase until the domain is Ready (:mod:`sim.demo.story`,
rendered by :mod:`sim.demo.progress`, events counted by :mod:`sim.demo.tally`); inject a fatal
XID on one member node and follow the recovery; delete that domain and apply a second pair of
examples whose domain spans both racks in two slices (:mod:`sim.demo.spanning`); print the
summary (:mod:`sim.demo.summary`) and stop everything. docs/demo.md walks through the output.
"""
