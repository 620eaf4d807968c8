"""The simulated cluster's scheduler: binds pending pods to nodes, allocating their DRA claims.

It honours nodeSelector, required node affinity, required inter-pod affinity and anti-affinity
(by topology key), taints and tolerations, unschedulable and NotReady nodes, CPU, memory and
extended resource requests (``nvidia.com/gpu``), and ResourceClaims (devices from
ResourceSlices chosen by DeviceClass and request CEL selectors). What is faithful to
kube-scheduler and what is simplified is in docs/simulated-scheduler.md.

In process::

    scheduler = Scheduler(client, settings=SchedulerSettings())
    task_group.create_task(scheduler.run())   # until cancelled
    await scheduler.wait_ready()

As a process: ``python -m sim.scheduler --kubeconfig PATH``.

Modules: :mod:`~sim.scheduler.objects` (Structs), :mod:`~sim.scheduler.facts`,
:mod:`~sim.scheduler.filters`, :mod:`~sim.scheduler.interpod`, :mod:`~sim.scheduler.dra`
(with :mod:`~sim.scheduler.devices` and :mod:`~sim.scheduler.cel`),
:mod:`~sim.scheduler.scoring`, :mod:`~sim.scheduler.message` and
:mod:`~sim.scheduler.algorithm` decide; :mod:`~sim.scheduler.state` keeps the picture with its
assumptions; :mod:`~sim.scheduler.writes` and :mod:`~sim.scheduler.scheduler` talk to the API.
"""

from sim.scheduler.algorithm import Placement, Unschedulable, schedule_pod
from sim.scheduler.scheduler import Scheduler, SchedulerSettings, SchedulerStats
from sim.scheduler.state import ClusterState

__all__ = [
    "ClusterState",
    "Placement",
    "Scheduler",
    "SchedulerSettings",
    "SchedulerStats",
    "Unschedulable",
    "schedule_pod",
]
