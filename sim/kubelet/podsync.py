"""Syncs one pod bound to this node: the kubelet's reconcile, keyed by pod.

For the pod at a key, in order:

1. a record of an older pod of the same name (or of a pod that is gone) is unprepared;
2. a pod being deleted is unprepared, then its deletion finished (``gracePeriodSeconds=0``);
3. a pod that finished (Succeeded/Failed) is unprepared and left alone;
4. a pod the node's NoExecute taints no longer tolerate is evicted; one tolerated for a while
   comes back when its time is up;
5. otherwise its claims are prepared through the DRA plugins: on failure the pod stays Pending
   and shows the plugin's error (condition ``PodReadyToStartContainers=False``, reason
   ``FailedPrepareDynamicResources``, and a Warning Event) and the sync is retried with backoff;
   on success the CDI ids go into the ``sim.cdo.dev/cdi-devices`` annotation (and what the
   device plugin's Allocate gave each container into ``sim.cdo.dev/device-envs``) and the
   pod is Running and Ready;
6. a pod with ``sim.cdo.dev/run-seconds`` finishes that long after it started.
"""

from __future__ import annotations

import logging
from datetime import datetime

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.informer import Informer
from shared.kube.keys import ObjectKey
from shared.kube.models import Taint
from shared.kube.reconcile import Result
from shared.kube.recorder import EventRecorder
from shared.kube.resources import PODS
from sim.kubelet import names, podstatus
from sim.kubelet.deviceplugins import DevicePlugins
from sim.kubelet.devices import DeviceAllocationError, DeviceManager
from sim.kubelet.dra import DraManager, PrepareError, UnprepareError
from sim.kubelet.evict import evict_pod
from sim.kubelet.models import Node, Pod
from sim.kubelet.podips import PodAddresses
from sim.kubelet.timefmt import utcnow
from sim.kubelet.tolerations import TaintTimes, eviction_time, with_default_tolerations

log = logging.getLogger("cdo.sim.kubelet.pods")


class PodSync:
    """The reconcile function of one kubelet session's pod work queue."""

    def __init__(
        self,
        *,
        node_name: str,
        client: KubeClient,
        pods: Informer[Pod],
        nodes: Informer[Node],
        dra: DraManager,
        devices: DeviceManager,
        device_plugins: DevicePlugins,
        recorder: EventRecorder,
        addresses: PodAddresses,
        default_toleration_s: int,
        retry_backoff_s: float,
        retry_backoff_max_s: float,
        finished: dict[ObjectKey, tuple[str, int]],
    ) -> None:
        self._node_name = node_name
        self._client = client
        self._pods = pods
        self._nodes = nodes
        self._dra = dra
        self._devices = devices
        self._device_plugins = device_plugins
        self._recorder = recorder
        self._addresses = addresses
        self._default_toleration_s = default_toleration_s
        self._taint_times = TaintTimes()
        self._retry_backoff_s = retry_backoff_s
        self._retry_backoff_max_s = retry_backoff_max_s
        self._failures: dict[ObjectKey, int] = {}
        self._finished = finished

    async def __call__(self, key: ObjectKey) -> Result:
        try:
            result = await self._sync(key)
        except (PrepareError, UnprepareError, DeviceAllocationError) as exc:
            # Expected while a plugin is missing, restarting or refusing: shown on the pod
            # (prepare) and retried with backoff here rather than reported as a crash.
            pause = self._backoff(key)
            log.warning(
                "pod resources not ready; retrying",
                extra={"pod": str(key), "error": str(exc), "pause_s": pause},
            )
            return Result(requeue_after=pause)
        self._failures.pop(key, None)
        return result

    async def _sync(self, key: ObjectKey) -> Result:
        pod = self._pods.cache.get(str(key))
        record = self._dra.record(key)
        if record is not None and (pod is None or pod.metadata.uid != record.pod_uid):
            await self._dra.unprepare(key)
        if pod is None or self._devices.assigned(key, pod.metadata.uid) is None:
            self._devices.free(key)  # an older pod of that name, or one that is gone
        finished = self._finished.get(key)
        if finished is not None and (pod is None or pod.metadata.uid != finished[0]):
            del self._finished[key]
            finished = None
        if pod is None or pod.spec.node_name != self._node_name:
            return Result()
        if pod.metadata.deletion_timestamp is not None:
            await self._release(key)
            await self._finish_deletion(pod)
            return Result()
        if pod.status.phase in names.TERMINAL_PHASES:
            self._finished.pop(key, None)
            await self._release(key)
            return Result()
        now = utcnow()
        if finished is not None:
            await self._finish(key, pod, now)  # the informer has not caught up yet
            return Result()
        evict_at = self._eviction_time(pod, now)
        if evict_at is not None and evict_at <= now:
            await evict_pod(self._client, self._recorder, pod)
            return Result()
        waits = [] if evict_at is None else [(evict_at - now).total_seconds()]
        finish_at = await self._run(key, pod, now)
        if finish_at is not None:
            if finish_at <= now:
                await self._finish(key, pod, now)
                return Result()
            waits.append((finish_at - now).total_seconds())
        return Result(requeue_after=min(waits)) if waits else Result()

    # -- steps ------------------------------------------------------------------------------

    async def _run(self, key: ObjectKey, pod: Pod, now: datetime) -> datetime | None:
        """Prepare and mark Running; when the pod's containers will exit (None: never)."""
        start = pod.status.start_time or now
        try:
            # The device manager admits the pod first (its plugin's Allocate included).
            assigned = await self._device_plugins.allocate(key, pod)
        except DeviceAllocationError as exc:
            await self._show_prepare_error(pod, str(exc), start=start, now=now)
            raise
        ids = self._dra.prepared_device_ids(key, pod.metadata.uid)
        if ids is None:
            try:
                ids = await self._dra.prepare(key, pod)
            except PrepareError as exc:
                await self._show_prepare_error(pod, str(exc), start=start, now=now)
                raise
        envs = {c: dict(a.envs) for c, a in assigned.allocations.items() if a.envs}
        missing = podstatus.missing_annotations(pod, ids, envs)
        if missing:
            await self._write(
                pod,
                {"metadata": {"uid": pod.metadata.uid, "annotations": missing}},
                subresource="",
            )
        if not podstatus.is_running(pod):
            pod_ip = pod.status.pod_ip or self._addresses.pod_ip(pod)
            body = podstatus.running(
                pod, host_ip=self._addresses.host_ip, pod_ip=pod_ip, start=start, now=now
            )
            await self._write(pod, body)
        return podstatus.finish_time(pod, start)

    async def _finish(self, key: ObjectKey, pod: Pod, now: datetime) -> None:
        # Resources go first, so that whoever sees the pod finished may reuse them at once.
        _uid, code = self._finished.setdefault(key, (pod.metadata.uid, podstatus.exit_code(pod)))
        await self._release(key)
        start = pod.status.start_time or now
        await self._write(pod, podstatus.terminated(pod, exit_code=code, start=start, now=now))

    async def _release(self, key: ObjectKey) -> None:
        """Give back what the pod at ``key`` held: its claims and its devices."""
        await self._dra.unprepare(key)
        self._devices.free(key)

    async def _show_prepare_error(
        self, pod: Pod, error: str, *, start: datetime, now: datetime
    ) -> None:
        if podstatus.shows_error(pod, error):
            return
        host_ip = self._addresses.host_ip
        await self._write(
            pod, podstatus.waiting(pod, host_ip=host_ip, start=start, error=error, now=now)
        )
        await self._recorder.record(
            PODS, pod, type_="Warning", reason=names.REASON_FAILED_PREPARE, message=error
        )

    async def _finish_deletion(self, pod: Pod) -> None:
        meta = pod.metadata
        options = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": meta.uid},
        }
        try:
            await self._client.request(
                "DELETE", PODS.path(namespace=meta.namespace, name=meta.name), body=options
            )
        except KubeApiError as exc:
            if exc.not_found or exc.code == 409:
                return  # gone already, or a successor of the same name holds it now
            raise

    async def _write(self, pod: Pod, body: podstatus.Body, *, subresource: str = "status") -> None:
        meta = pod.metadata
        try:
            await self._client.patch(
                PODS,
                meta.name,
                body,
                namespace=meta.namespace,
                subresource=subresource,
                patch_type="strategic",
            )
        except KubeApiError as exc:
            if exc.not_found:
                return  # deleted meanwhile; the informer brings the news
            raise

    def _backoff(self, key: ObjectKey) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        return float(min(self._retry_backoff_s * 2 ** min(failures, 30), self._retry_backoff_max_s))

    # -- taints -----------------------------------------------------------------------------

    def _eviction_time(self, pod: Pod, now: datetime) -> datetime | None:
        node = self._nodes.cache.get(self._node_name)
        taints = node.spec.taints if node is not None else ()
        tolerations = with_default_tolerations(
            pod.spec.tolerations, seconds=self._default_toleration_s
        )
        return eviction_time(
            tolerations,
            taints,
            added_at=lambda taint: self._taint_times.added_at(self._node_name, taint, now=now),
        )

    def forget_taints(self, taints: tuple[Taint, ...]) -> None:
        """Drop first-seen times of taints the node no longer has."""
        self._taint_times.keep_only(self._node_name, taints)
