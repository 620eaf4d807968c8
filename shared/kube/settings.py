"""The settings every leader-elected controller shares, grouped as the parts they tune.

A controller's settings Struct derives from :class:`ControllerSettings` and sets its own defaults
(Lease name, field manager, workers) by overriding a group's default::

    class DomainControllerSettings(ControllerSettings, frozen=True, kw_only=True):
        api: Annotated[ApiSettings, INLINE] = ApiSettings(field_manager="cdo-domain-controller")
        lease: LeaseSettings = LeaseSettings(name="cdo-domain-controller")

The groups and the variables they read below the controller's prefix:

- ``api`` (inline): ``KUBECONFIG``, ``REQUEST_TIMEOUT_S``, ``FIELD_MANAGER``;
- ``lease``: ``LEASE_NAMESPACE``, ``LEASE_NAME``; ``leader_election``: ``LEADER_ELECTION_*``;
- ``loop`` (inline): ``WORKERS``, ``RECONCILE_TIMEOUT_S``, ``RESYNC_S``;
- ``retries``: ``RETRIES_*``; ``informer``: ``INFORMER_*``.

``api`` and ``loop`` are inline so that the variables deployments already set keep their names.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from shared.kube.informer import InformerSettings
from shared.kube.leader import LeaderElectionSettings
from shared.kube.ratelimit import RateLimitSettings
from shared.kube.reconcile import RunnerSettings
from shared.settings import INLINE, Settings


class ApiSettings(Settings, frozen=True, kw_only=True):
    """How the controller reaches the API server and names itself in its writes."""

    kubeconfig: Annotated[
        str,
        Meta(
            description="Path of a kubeconfig; empty: KUBECONFIG, else the pod's service "
            "account, else ~/.kube/config."
        ),
    ] = ""
    request_timeout_s: Annotated[float, Meta(description="Timeout of one API request.", gt=0)] = (
        30.0
    )
    field_manager: Annotated[
        str, Meta(description="fieldManager of the service's writes.", min_length=1)
    ] = "cdo-controller"


class LeaseSettings(Settings, frozen=True, kw_only=True):
    """The coordination.k8s.io Lease the replicas elect their leader on."""

    namespace: Annotated[
        str, Meta(description="Namespace of the leader-election Lease.", min_length=1)
    ] = "cdo-system"
    name: Annotated[str, Meta(description="Name of the leader-election Lease.", min_length=1)] = (
        "cdo-controller"
    )


class LoopSettings(RunnerSettings, frozen=True, kw_only=True):
    """The reconcile runner's workers and timeout, and how often every key is looked at again."""

    resync_s: Annotated[
        float,
        Meta(description="Look at every domain again this often, events or not (0: never).", ge=0),
    ] = 600.0


class KubeAccessSettings(Settings, frozen=True, kw_only=True):
    """A service's API access (inline, so its variables have no group name), and what
    kube_service_main connects with (shared/runtime/entry.py's KubeServiceSettings)."""

    api: Annotated[ApiSettings, INLINE] = ApiSettings()

    @property
    def kubeconfig(self) -> str:
        return self.api.kubeconfig

    @property
    def request_timeout_s(self) -> float:
        return self.api.request_timeout_s


class ControllerSettings(KubeAccessSettings, frozen=True, kw_only=True):
    """API access, leader election, reconcile loop, retries and informers of one controller."""

    lease: LeaseSettings = LeaseSettings()
    leader_election: LeaderElectionSettings = LeaderElectionSettings()
    loop: Annotated[LoopSettings, INLINE] = LoopSettings()
    retries: RateLimitSettings = RateLimitSettings()
    informer: InformerSettings = InformerSettings()
