"""Leader election on a coordination.k8s.io/v1 Lease.

    elector = LeaderElector(client, namespace="cdo-system", name="domain-controller",
                            identity=ctx.instance)
    writer = client.fenced(elector.lease_left)   # the leader's writes go through this
    ctx.readiness.add("leader election", lambda: elector.started)
    ctx.supervisor.start("leader", elector.run(lead))   # lead() runs only while leading

Expiry is judged by this process's own clock, from when it last *saw the Lease change* (as
client-go does), never by comparing the holder's timestamps with local time, so clock skew between
nodes cannot make two leaders. The leader renews every ``retry_period_s``.

**A leader that cannot renew stops writing before anyone else can lead.** Its leadership is
good until ``renew_deadline_s`` after the start of its last successful renewal (:meth:`lease_left`),
measured on its monotonic clock. A standby may take over only once it has seen no change of the
Lease for ``lease_duration_s``, which is longer, and the standby saw that renewal no earlier than
it was made. So when the deadline passes:

- every write through the fenced client (shared/kube/client.py) is refused, and a write in flight
  times out no later than the deadline: a frozen (SIGSTOP) or stalled leader that wakes up sends
  nothing, whichever of its tasks runs first;
- a renew still in flight is abandoned (the deadline is enforced during the request, not only
  after it returns), and the elector raises LeadershipLostError, which makes the process exit:
  a controller that may have been replaced must not write again.

It also raises LeadershipLostError as soon as a renew finds another holder. On an orderly
shutdown the leader releases the Lease so a standby takes over at once instead of waiting for it
to expire. With ``metrics``, ``leader_election_master_status{name}`` (client-go's name) says
whether this replica leads.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from shared.errors import ConfigError, LeadershipLostError
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.meta import KubeObject
from shared.kube.resources import LEASES
from shared.metrics import Metrics
from shared.settings import Settings

log = logging.getLogger("cdo.kube.leader")

# How long a lost leader waits for its work to stop once cancelled before it gives up on it.
LEAD_STOP_GRACE_S = 5.0


class LeaderElectionSettings(Settings, frozen=True, kw_only=True):
    """Timing of leader election (the defaults are Kubernetes' usual 15/10/2 seconds)."""

    lease_duration_s: Annotated[
        float, Meta(description="How long a standby waits after the last renewal it saw.", gt=0)
    ] = 15.0
    renew_deadline_s: Annotated[
        float, Meta(description="How long the leader keeps trying to renew before quitting.", gt=0)
    ] = 10.0
    retry_period_s: Annotated[
        float, Meta(description="Pause between acquire or renew attempts.", gt=0)
    ] = 2.0


class LeaseSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    lease_transitions: int = 0


class Lease(KubeObject, frozen=True, kw_only=True):
    spec: LeaseSpec = msgspec.field(default_factory=LeaseSpec)


def micro_time(moment: datetime) -> str:
    """Kubernetes MicroTime: RFC 3339 with microseconds, UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Acquires, renews and releases one Lease for one identity."""

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        settings: LeaderElectionSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        metrics: Metrics | None = None,
        lead_stop_grace_s: float = LEAD_STOP_GRACE_S,
    ) -> None:
        self._client = client
        self._lead_stop_grace_s = lead_stop_grace_s
        self._namespace = namespace
        self._name = name
        self.identity = identity
        self._settings = settings or LeaderElectionSettings()
        _check_timing(self._settings)
        self._clock = clock
        self._observed_version = ""
        self._observed_at = 0.0
        self._renewed_at = 0.0
        self.is_leader = False
        self.started = False
        """True once the first acquire attempt has completed (leader or standby)."""
        if metrics is not None:
            # Read when scraped: 1 while leading, 0 while standing by.
            metrics.leader.labels(name).set_function(lambda: float(self.is_leader))

    # -- one attempt ------------------------------------------------------------------------

    def _spec(self, *, previous: LeaseSpec | None, now: datetime) -> dict[str, Any]:
        taking_over = previous is None or previous.holder_identity != self.identity
        transitions = 0 if previous is None else previous.lease_transitions
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self._settings.lease_duration_s)),
            "acquireTime": micro_time(now)
            if taking_over or previous is None
            else previous.acquire_time,
            "renewTime": micro_time(now),
            "leaseTransitions": transitions + 1 if previous and taking_over else transitions,
        }

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this identity holds the Lease afterwards."""
        now_wall = datetime.now(UTC)
        now = self._clock()
        raw = await self._client.get_or_none(LEASES, self._name, namespace=self._namespace)
        if raw is None:
            body = {
                "apiVersion": LEASES.api_version,
                "kind": "Lease",
                "metadata": {"name": self._name, "namespace": self._namespace},
                "spec": self._spec(previous=None, now=now_wall),
            }
            try:
                await self._client.create(LEASES, body, namespace=self._namespace)
            except KubeApiError as exc:
                if exc.already_exists:
                    return False
                raise
            self._observe("created", now)
            return True
        lease = msgspec.json.decode(raw, type=Lease)
        version = lease.metadata.resource_version
        if version != self._observed_version:
            self._observe(version, now)
        holder = lease.spec.holder_identity
        if holder and holder != self.identity:
            duration = lease.spec.lease_duration_seconds or self._settings.lease_duration_s
            if now - self._observed_at < duration:
                return False  # someone else holds it and we saw them renew recently
        body = {
            "apiVersion": LEASES.api_version,
            "kind": "Lease",
            "metadata": {
                "name": self._name,
                "namespace": self._namespace,
                "resourceVersion": version,
            },
            "spec": self._spec(previous=lease.spec, now=now_wall),
        }
        try:
            updated = await self._client.replace(
                LEASES, self._name, body, namespace=self._namespace
            )
        except KubeApiError as exc:
            if exc.conflict:
                return False  # someone else wrote first; look again next round
            raise
        self._observe(msgspec.json.decode(updated, type=Lease).metadata.resource_version, now)
        return True

    def _observe(self, version: str, now: float) -> None:
        self._observed_version = version
        self._observed_at = now

    # -- the loop ---------------------------------------------------------------------------

    def lease_left(self) -> float:
        """Seconds this replica may still act as leader: until ``renew_deadline_s`` after the
        start of its last successful renewal; 0 when it does not lead (the module docstring)."""
        if not self.is_leader:
            return 0.0
        return self._renewed_at + self._settings.renew_deadline_s - self._clock()

    async def _acquire(self) -> None:
        while True:
            attempted_at = self._clock()
            try:
                acquired = await self.try_acquire_or_renew()
            except KubeApiError as exc:
                log.warning("lease acquire failed", extra={"lease": self._name, "error": str(exc)})
                acquired = False
            self.started = True
            if acquired:
                self._renewed_at = attempted_at
                self.is_leader = True
                log.info("became leader", extra={"lease": self._name, "identity": self.identity})
                return
            await asyncio.sleep(self._settings.retry_period_s)

    def _lost(self, why: str) -> LeadershipLostError:
        self.is_leader = False
        return LeadershipLostError(f"lease {self._name}: {why}")

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(min(self._settings.retry_period_s, max(0.0, self.lease_left())))
            left = self.lease_left()
            if left <= 0:
                raise self._lost(f"not renewed within {self._settings.renew_deadline_s}s")
            attempted_at = self._clock()
            try:
                async with asyncio.timeout(left):
                    renewed = await self.try_acquire_or_renew()
            except TimeoutError:
                raise self._lost(
                    f"renew still in flight at the {self._settings.renew_deadline_s}s deadline"
                ) from None
            except KubeApiError as exc:
                log.warning("lease renew failed", extra={"lease": self._name, "error": str(exc)})
                continue
            if not renewed:
                raise self._lost("held by another identity")  # leave at once
            self._renewed_at = attempted_at

    async def release(self) -> None:
        """Give the Lease up so a standby can take over now (only if we still hold it)."""
        if not self.is_leader:
            return
        self.is_leader = False
        try:
            raw = await self._client.get_or_none(LEASES, self._name, namespace=self._namespace)
            if raw is None:
                return
            lease = msgspec.json.decode(raw, type=Lease)
            if lease.spec.holder_identity != self.identity:
                return
            spec = msgspec.to_builtins(lease.spec)
            spec.update(
                holderIdentity="",
                leaseDurationSeconds=1,
                renewTime=micro_time(datetime.now(UTC)),
            )
            body = {
                "apiVersion": LEASES.api_version,
                "kind": "Lease",
                "metadata": {
                    "name": self._name,
                    "namespace": self._namespace,
                    "resourceVersion": lease.metadata.resource_version,
                },
                "spec": spec,
            }
            await self._client.replace(LEASES, self._name, body, namespace=self._namespace)
            log.info("released leadership", extra={"lease": self._name})
        except KubeApiError as exc:
            log.warning("lease release failed", extra={"lease": self._name, "error": str(exc)})

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Wait to become leader, then run ``lead()`` while renewing; see the module docstring.

        Leadership lost ends this with LeadershipLostError after ``lead()`` has been cancelled
        and waited for at most ``lead_stop_grace_s``: a lead that does not stop (a task that
        swallowed its cancellation) must not keep the process from exiting, since the process
        exiting is what stops a replaced leader for good."""
        await self._acquire()
        renewing = asyncio.create_task(self._renew_forever(), name=f"renew lease {self._name}")
        leading = asyncio.create_task(lead(), name=f"lead {self._name}")
        try:
            await asyncio.wait({renewing, leading}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            renewing.cancel()
            await asyncio.gather(renewing, return_exceptions=True)
            await self._stop(leading)
            await asyncio.shield(self.release())
        lost = None if renewing.cancelled() else renewing.exception()
        if lost is not None:
            if leading.done() and not leading.cancelled() and leading.exception() is not None:
                log.warning(
                    "the leader's work failed as leadership was lost",
                    extra={"lease": self._name, "error": repr(leading.exception())},
                )
            raise lost
        leading.result()  # lead ended by itself: its return, or its exception

    async def _stop(self, leading: asyncio.Task[None]) -> None:
        """Cancel ``leading`` and wait for it, for ``lead_stop_grace_s`` at the most."""
        leading.cancel()
        done, _ = await asyncio.wait({leading}, timeout=self._lead_stop_grace_s)
        if done:
            return
        log.error(
            "the leader's work did not stop when cancelled; giving it up",
            extra={
                "lease": self._name,
                "grace_s": self._lead_stop_grace_s,
                "pending": _pending_tasks(),
            },
        )


def _pending_tasks(most: int = 20) -> list[str]:
    """Name and innermost awaiting line of the loop's unfinished tasks, to find the one that
    did not stop."""
    described = []
    for task in list(asyncio.all_tasks())[:most]:
        frames = task.get_stack(limit=1)
        where = f"{frames[-1].f_code.co_filename}:{frames[-1].f_lineno}" if frames else "(no frame)"
        described.append(f"{task.get_name()} at {where}")
    return described


def _check_timing(settings: LeaderElectionSettings) -> None:
    """The order the guarantee rests on: retry < renew deadline < lease duration."""
    if not settings.renew_deadline_s < settings.lease_duration_s:
        raise ConfigError(
            f"leader_election.renew_deadline_s ({settings.renew_deadline_s}) must be shorter "
            f"than leader_election.lease_duration_s ({settings.lease_duration_s})"
        )
    if not settings.retry_period_s < settings.renew_deadline_s:
        raise ConfigError(
            f"leader_election.retry_period_s ({settings.retry_period_s}) must be shorter than "
            f"leader_election.renew_deadline_s ({settings.renew_deadline_s})"
        )
