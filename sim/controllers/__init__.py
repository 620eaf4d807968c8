"""The workload controllers a simulated cluster needs: Deployment, ReplicaSet, StatefulSet, Job,
JobSet, LeaderWorkerSet, and the resource-claim controller that makes a pod's ResourceClaims from
ResourceClaimTemplates (the JobSet and LeaderWorkerSet CRDs are in ``sim/controllers/crds/``).

Each is a level-triggered loop over shared informers (informers -> keys -> work queue ->
reconcile from the cache -> pure desired state -> idempotent writes), talking to the API server
only over HTTP, so they run the same against the emulator and a real cluster. Start them all
with one :class:`ControllerManager`::

    from sim.controllers import ControllerManager

    manager = ControllerManager(client)        # shared.kube.client.KubeClient
    manager.start(supervisor)                  # or: async with manager.running(): ...

docs/simulated-controllers.md lists what is faithful to the real controllers and what is not.
"""

from sim.controllers.deployment import DeploymentController
from sim.controllers.job import JobController
from sim.controllers.jobset import JobSetController
from sim.controllers.leaderworkerset import LeaderWorkerSetController
from sim.controllers.manager import ALL_CONTROLLERS, ControllerManager, ControllerSettings
from sim.controllers.replicaset import ReplicaSetController
from sim.controllers.resourceclaim import ResourceClaimController
from sim.controllers.statefulset import StatefulSetController

__all__ = [
    "ALL_CONTROLLERS",
    "ControllerManager",
    "ControllerSettings",
    "DeploymentController",
    "JobController",
    "JobSetController",
    "LeaderWorkerSetController",
    "ReplicaSetController",
    "ResourceClaimController",
    "StatefulSetController",
]
