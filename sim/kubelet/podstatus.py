"""The status the kubelet writes for a pod, and when a pod's containers "exit": pure functions.

Bodies are strategic merge patches for ``pods/<name>/status``: conditions merge by ``type``
(so PodScheduled from the scheduler and DisruptionTarget from an evictor survive) and
container statuses by ``name``; a container's ``state`` names the one state it is in and nulls
the others. Every body carries ``metadata.uid`` so that it never lands on a successor pod of
the same name.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from shared.kube.models import Condition
from sim.kubelet import names
from sim.kubelet.models import Pod
from sim.kubelet.timefmt import rfc3339

Body = dict[str, Any]


def _condition(
    pod: Pod, kind: str, status: str, *, now: datetime, reason: str = "", message: str = ""
) -> Body:
    old: Condition | None = pod.condition(kind)
    transition = (
        old.last_transition_time
        if old is not None and old.status == status and old.last_transition_time
        else now
    )
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": rfc3339(transition),
    }


# (type, status, reason, message) of the conditions one body writes.
_Spec = tuple[str, str, str, str]


def _conditions(pod: Pod, specs: Sequence[_Spec], *, now: datetime) -> list[Body]:
    return [
        _condition(pod, kind, status, now=now, reason=reason, message=message)
        for kind, status, reason, message in specs
    ]


def container_id(pod: Pod, container: str) -> str:
    digest = hashlib.sha256(f"{pod.metadata.uid}/{container}".encode()).hexdigest()
    return f"sim://{digest[:32]}"


def _container(pod: Pod, name: str, image: str, *, ready: bool, state: Body) -> Body:
    return {
        "name": name,
        "image": image,
        "imageID": image,
        "containerID": container_id(pod, name),
        "ready": ready,
        "started": "running" in state,
        "restartCount": 0,
        "state": {"waiting": None, "running": None, "terminated": None, **state},
    }


def _body(pod: Pod, status: Body) -> Body:
    return {"metadata": {"uid": pod.metadata.uid}, "status": status}


def running(pod: Pod, *, host_ip: str, pod_ip: str, start: datetime, now: datetime) -> Body:
    """Every container running and ready."""
    started = {"running": {"startedAt": rfc3339(start)}}
    return _body(
        pod,
        {
            "phase": names.RUNNING,
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "startTime": rfc3339(start),
            "conditions": _conditions(
                pod,
                [
                    (names.POD_SCHEDULED, "True", "", ""),
                    (names.POD_READY_TO_START_CONTAINERS, "True", "", ""),
                    (names.INITIALIZED, "True", "", ""),
                    (names.CONTAINERS_READY, "True", "", ""),
                    (names.READY, "True", "", ""),
                ],
                now=now,
            ),
            "containerStatuses": [
                _container(pod, c.name, c.image, ready=True, state=started)
                for c in pod.spec.containers
            ],
        },
    )


def waiting(pod: Pod, *, host_ip: str, start: datetime, error: str, now: datetime) -> Body:
    """Containers not started because the pod's resources could not be prepared."""
    unready = (
        "containers with unready status: [" + " ".join(c.name for c in pod.spec.containers) + "]"
    )
    creating = {"waiting": {"reason": "ContainerCreating"}}
    return _body(
        pod,
        {
            "phase": names.PENDING,
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "startTime": rfc3339(start),
            "conditions": _conditions(
                pod,
                [
                    (names.POD_SCHEDULED, "True", "", ""),
                    (
                        names.POD_READY_TO_START_CONTAINERS,
                        "False",
                        names.REASON_FAILED_PREPARE,
                        error,
                    ),
                    (names.INITIALIZED, "True", "", ""),
                    (names.CONTAINERS_READY, "False", names.REASON_CONTAINERS_NOT_READY, unready),
                    (names.READY, "False", names.REASON_CONTAINERS_NOT_READY, unready),
                ],
                now=now,
            ),
            "containerStatuses": [
                _container(pod, c.name, c.image, ready=False, state=creating)
                for c in pod.spec.containers
            ],
        },
    )


def terminated(pod: Pod, *, exit_code: int, start: datetime, now: datetime) -> Body:
    """Every container exited with ``exit_code``: Succeeded for 0, Failed otherwise."""
    statuses = []
    for c in pod.spec.containers:
        exited = {
            "terminated": {
                "exitCode": exit_code,
                "reason": "Completed" if exit_code == 0 else "Error",
                "startedAt": rfc3339(start),
                "finishedAt": rfc3339(now),
                "containerID": container_id(pod, c.name),
            }
        }
        statuses.append(_container(pod, c.name, c.image, ready=False, state=exited))
    return _body(
        pod,
        {
            "phase": names.SUCCEEDED if exit_code == 0 else names.FAILED,
            "conditions": _conditions(
                pod,
                [
                    (names.POD_READY_TO_START_CONTAINERS, "False", "", ""),
                    (names.CONTAINERS_READY, "False", names.REASON_POD_COMPLETED, ""),
                    (names.READY, "False", names.REASON_POD_COMPLETED, ""),
                ],
                now=now,
            ),
            "containerStatuses": statuses,
        },
    )


def not_ready(pod: Pod, *, reason: str, message: str, now: datetime) -> Body:
    """Only the Ready condition set to False (what the lifecycle controller writes)."""
    return _body(
        pod, {"conditions": _conditions(pod, [(names.READY, "False", reason, message)], now=now)}
    )


def disruption_target(pod: Pod, *, reason: str, message: str, now: datetime) -> Body:
    """The DisruptionTarget condition an evictor sets before it deletes the pod."""
    return _body(
        pod,
        {
            "conditions": _conditions(
                pod, [(names.DISRUPTION_TARGET, "True", reason, message)], now=now
            )
        },
    )


# -- reading what the kubelet wrote -----------------------------------------------------------


def is_running(pod: Pod) -> bool:
    """Whether the pod's status already says Running and Ready with every container ready."""
    ready = pod.condition(names.READY)
    containers = {c.name: c.ready for c in pod.status.container_statuses}
    return (
        pod.status.phase == names.RUNNING
        and ready is not None
        and ready.status == "True"
        and all(containers.get(c.name) for c in pod.spec.containers)
    )


def shows_error(pod: Pod, error: str) -> bool:
    """Whether the pod already shows ``error`` as the reason it cannot start."""
    condition = pod.condition(names.POD_READY_TO_START_CONTAINERS)
    return (
        pod.status.phase == names.PENDING
        and condition is not None
        and condition.status == "False"
        and condition.message == error
    )


def cdi_annotation(device_ids: Sequence[str]) -> str:
    return json.dumps(list(device_ids), separators=(",", ":"))


def missing_annotations(
    pod: Pod, device_ids: Sequence[str], envs: Mapping[str, Mapping[str, str]]
) -> dict[str, str]:
    """The simulator's annotations the pod lacks or shows otherwise: its CDI ids and, when
    a device plugin's Allocate gave any, each container's environment."""
    wanted = {names.CDI_DEVICES_ANNOTATION: cdi_annotation(device_ids)}
    if envs:
        wanted[names.DEVICE_ENVS_ANNOTATION] = json.dumps(
            envs, sort_keys=True, separators=(",", ":")
        )
    current = pod.metadata.annotations
    return {key: value for key, value in wanted.items() if current.get(key) != value}


def finish_time(pod: Pod, start: datetime) -> datetime | None:
    """When the pod's containers exit (``run-seconds`` after ``start``); None: never.

    Pods with ``restartPolicy: Always`` would restart their containers, so they never finish.
    An annotation that is not a finite, non-negative number is ignored.
    """
    if pod.spec.restart_policy == "Always":
        return None
    text = pod.metadata.annotations.get(names.RUN_SECONDS_ANNOTATION)
    if text is None:
        return None
    try:
        seconds = float(text)
    except ValueError:
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return start + timedelta(seconds=seconds)


def exit_code(pod: Pod) -> int:
    """The exit code the pod's containers finish with (annotation; 0 when absent or invalid)."""
    try:
        return int(pod.metadata.annotations.get(names.EXIT_CODE_ANNOTATION, "0"))
    except ValueError:
        return 0
