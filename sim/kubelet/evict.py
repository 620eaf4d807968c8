"""Evicting a pod for a NoExecute taint, the way the taint manager does it.

First the pod gets the ``DisruptionTarget`` condition (reason ``DeletionByTaintManager``) so its
controller can tell why it went, then it is deleted (gracefully where the API server deletes
bound pods gracefully; the kubelet finishes the deletion), and a ``TaintManagerEviction`` Event
is recorded. Both writes name the pod's UID, so a successor of the same name is never touched.
"""

from __future__ import annotations

import logging

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.recorder import EventRecorder
from shared.kube.resources import PODS
from sim.kubelet import names, podstatus
from sim.kubelet.models import Pod
from sim.kubelet.timefmt import utcnow

log = logging.getLogger("cdo.sim.kubelet.evict")


async def evict_pod(client: KubeClient, recorder: EventRecorder, pod: Pod) -> bool:
    """Mark and delete ``pod``; False when it (this very pod) was already gone."""
    meta = pod.metadata
    body = podstatus.disruption_target(
        pod,
        reason=names.REASON_DELETION_BY_TAINT_MANAGER,
        message="Taint manager: deleting due to NoExecute taint",
        now=utcnow(),
    )
    try:
        await client.patch(
            PODS,
            meta.name,
            body,
            namespace=meta.namespace,
            subresource="status",
            patch_type="strategic",
        )
        deleted = await client.delete(PODS, meta.name, namespace=meta.namespace, uid=meta.uid)
    except KubeApiError as exc:
        if exc.not_found or exc.code == 409:
            return False
        raise
    if deleted:
        log.info("pod evicted", extra={"pod": pod.key, "node": pod.spec.node_name})
        await recorder.record(
            PODS,
            pod,
            type_="Normal",
            reason=names.REASON_TAINT_EVICTION,
            message=f"Marking for deletion Pod {pod.key}",
        )
    return deleted
