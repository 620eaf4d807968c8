"""``apps/v1`` workloads and ``batch/v1`` Job: selectors, templates, defaults, immutable fields."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sim.kubeapi.kinds.common import (
    condition,
    default_claim_template,
    default_pod_spec,
    ensure,
    get,
    non_negative,
    text,
    validate_pod_template,
    validate_workload_selector,
)
from sim.kubeapi.machinery import errors
from sim.kubeapi.machinery.errors import FieldError
from sim.kubeapi.storage import columns
from sim.kubeapi.storage.resources import Column, Obj, Strategy


def _default_template(spec: Obj) -> None:
    template = spec.get("template")
    if isinstance(template, dict):
        default_pod_spec(ensure(template, "spec"))


def _selector_immutable(new: Obj, old: Obj) -> list[FieldError]:
    if get(new, "spec", "selector") != get(old, "spec", "selector"):
        return [errors.immutable("spec.selector", get(new, "spec", "selector"))]
    return []


def _workload_validate(
    obj: Obj,
    kind: str,
    *,
    restart_policies: tuple[str, ...] = ("Always",),
    claim_volumes: Collection[str] = (),
) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [errors.required("spec")]
    out, selector = validate_workload_selector(spec, "spec", kind)
    out.extend(
        validate_pod_template(
            spec.get("template"),
            "spec.template",
            selector=selector,
            claim_volumes=claim_volumes,
        )
    )
    policy = get(spec, "template", "spec", "restartPolicy")
    if policy is not None and policy not in restart_policies:
        out.append(
            errors.not_supported("spec.template.spec.restartPolicy", policy, restart_policies)
        )
    out.extend(non_negative(spec.get("replicas"), "spec.replicas"))
    out.extend(non_negative(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    return out


def _images(o: Obj) -> str:
    return ",".join(
        c.get("image", "") for c in get(o, "spec", "template", "spec", "containers") or []
    )


def _containers(o: Obj) -> str:
    return ",".join(
        c.get("name", "") for c in get(o, "spec", "template", "spec", "containers") or []
    )


def _num(o: Obj, *path: str) -> int:
    value = get(o, *path)
    return int(value) if isinstance(value, int) else 0


class DeploymentStrategy(Strategy):
    status_subresource = True
    has_generation = True

    def default(self, obj: Obj) -> None:
        spec = ensure(obj, "spec")
        spec.setdefault("replicas", 1)
        strategy = ensure(spec, "strategy")
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = ensure(strategy, "rollingUpdate")
            rolling.setdefault("maxUnavailable", "25%")
            rolling.setdefault("maxSurge", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        _default_template(spec)

    def initial_status(self, obj: Obj) -> Any:
        return {}

    def validate(self, obj: Obj) -> list[FieldError]:
        return _workload_validate(obj, "deployment")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return self.validate(new) + _selector_immutable(new, old)

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "Ready",
                "string",
                lambda o: f"{_num(o, 'status', 'readyReplicas')}/{_num(o, 'spec', 'replicas')}",
                "",
                "Number of the pod with ready state",
            ),
            Column(
                "Up-to-date",
                "integer",
                lambda o: _num(o, "status", "updatedReplicas"),
                "",
                "Total number of non-terminated pods targeted by this deployment that have "
                "the desired template spec.",
            ),
            Column(
                "Available",
                "integer",
                lambda o: _num(o, "status", "availableReplicas"),
                "",
                "Total number of available pods (ready for at least minReadySeconds) targeted "
                "by this deployment.",
            ),
            columns.age_column(),
            Column(
                "Containers",
                "string",
                _containers,
                "",
                "Names of each container in the template.",
                1,
            ),
            Column(
                "Images",
                "string",
                _images,
                "",
                "Images referenced by each container in the template.",
                1,
            ),
        ]


class ReplicaSetStrategy(Strategy):
    status_subresource = True
    has_generation = True
    field_getters = {"status.replicas": lambda o: str(_num(o, "status", "replicas"))}

    def default(self, obj: Obj) -> None:
        spec = ensure(obj, "spec")
        spec.setdefault("replicas", 1)
        _default_template(spec)

    def initial_status(self, obj: Obj) -> Any:
        return {"replicas": 0}

    def validate(self, obj: Obj) -> list[FieldError]:
        return _workload_validate(obj, "replicaset")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return self.validate(new) + _selector_immutable(new, old)

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "Desired",
                "integer",
                lambda o: _num(o, "spec", "replicas"),
                "",
                "Number of desired pods.",
            ),
            Column(
                "Current",
                "integer",
                lambda o: _num(o, "status", "replicas"),
                "",
                "Number of actually running pods.",
            ),
            Column(
                "Ready",
                "integer",
                lambda o: _num(o, "status", "readyReplicas"),
                "",
                "Number of ready pods.",
            ),
            columns.age_column(),
        ]


class DaemonSetStrategy(Strategy):
    status_subresource = True
    has_generation = True

    def default(self, obj: Obj) -> None:
        spec = ensure(obj, "spec")
        strategy = ensure(spec, "updateStrategy")
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = ensure(strategy, "rollingUpdate")
            rolling.setdefault("maxUnavailable", 1)
            rolling.setdefault("maxSurge", 0)
        spec.setdefault("revisionHistoryLimit", 10)
        _default_template(spec)

    def initial_status(self, obj: Obj) -> Any:
        return {
            "currentNumberScheduled": 0,
            "desiredNumberScheduled": 0,
            "numberMisscheduled": 0,
            "numberReady": 0,
        }

    def validate(self, obj: Obj) -> list[FieldError]:
        return _workload_validate(obj, "daemonset")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return self.validate(new) + _selector_immutable(new, old)

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "Desired",
                "integer",
                lambda o: _num(o, "status", "desiredNumberScheduled"),
                "",
                "The number of nodes that should be running the daemon pod.",
            ),
            Column(
                "Current",
                "integer",
                lambda o: _num(o, "status", "currentNumberScheduled"),
                "",
                "The number of nodes running at least one daemon pod.",
            ),
            Column(
                "Ready",
                "integer",
                lambda o: _num(o, "status", "numberReady"),
                "",
                "The number of nodes that should be running the daemon pod and have one or "
                "more of the daemon pod running and ready.",
            ),
            Column(
                "Up-to-date",
                "integer",
                lambda o: _num(o, "status", "updatedNumberScheduled"),
                "",
                "The total number of nodes that are running updated daemon pod.",
            ),
            Column(
                "Available",
                "integer",
                lambda o: _num(o, "status", "numberAvailable"),
                "",
                "The number of nodes that should be running the daemon pod and have one or "
                "more of the daemon pod running and available.",
            ),
            columns.age_column(),
        ]


STATEFULSET_UPDATABLE = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)


class StatefulSetStrategy(Strategy):
    status_subresource = True
    has_generation = True

    def default(self, obj: Obj) -> None:
        spec = ensure(obj, "spec")
        spec.setdefault("replicas", 1)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        strategy = ensure(spec, "updateStrategy")
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            ensure(strategy, "rollingUpdate").setdefault("partition", 0)
        spec.setdefault("revisionHistoryLimit", 10)
        retention = ensure(spec, "persistentVolumeClaimRetentionPolicy")
        retention.setdefault("whenDeleted", "Retain")
        retention.setdefault("whenScaled", "Retain")
        _default_template(spec)
        for claim in spec.get("volumeClaimTemplates") or ():
            if isinstance(claim, dict):
                default_claim_template(claim)

    def initial_status(self, obj: Obj) -> Any:
        return {"replicas": 0, "availableReplicas": 0}

    def validate(self, obj: Obj) -> list[FieldError]:
        # Containers may mount the claims made from volumeClaimTemplates (they take precedence
        # over template volumes of the same name), as the real validation allows.
        claims = [
            get(claim, "metadata", "name")
            for claim in get(obj, "spec", "volumeClaimTemplates") or ()
            if get(claim, "metadata", "name")
        ]
        return _workload_validate(obj, "statefulset", claim_volumes=claims)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        out = self.validate(new)
        new_rest = {
            k: v for k, v in (new.get("spec") or {}).items() if k not in STATEFULSET_UPDATABLE
        }
        old_rest = {
            k: v for k, v in (old.get("spec") or {}).items() if k not in STATEFULSET_UPDATABLE
        }
        if new_rest != old_rest:
            out.append(
                errors.forbidden(
                    "spec",
                    "updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                    "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
                    "'minReadySeconds' are forbidden",
                )
            )
        return out

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "Ready",
                "string",
                lambda o: f"{_num(o, 'status', 'readyReplicas')}/{_num(o, 'spec', 'replicas')}",
                "",
                "Number of the pod with ready state",
            ),
            columns.age_column(),
        ]


# -- batch/v1 Job -------------------------------------------------------------------------------

JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOB_MUTABLE_TEMPLATE = ("nodeSelector", "tolerations", "affinity", "schedulingGates")


def _job_status(o: Obj) -> str:
    for kind, shown in (("Complete", "Complete"), ("Failed", "Failed"), ("Suspended", "Suspended")):
        cond = condition(o, kind)
        if cond is not None and cond.get("status") == "True":
            return shown
    return "Running"


def _elastic(new: Obj, old: Obj) -> bool:
    """An elastic Indexed Job (Kubernetes 1.31 GA): completions may change together with
    parallelism while the two stay equal."""

    def equal(obj: Obj) -> bool:
        spec = obj.get("spec") or {}
        return spec.get("completions") is not None and spec.get("completions") == spec.get(
            "parallelism"
        )

    indexed = get(new, "spec", "completionMode") == "Indexed"
    return indexed and equal(new) and equal(old)


class JobStrategy(Strategy):
    status_subresource = True
    has_generation = True
    field_getters = {"status.successful": lambda o: str(_num(o, "status", "succeeded"))}

    def default(self, obj: Obj) -> None:
        spec = ensure(obj, "spec")
        spec.setdefault("parallelism", 1)
        if (
            spec.get("completionMode", "NonIndexed") == "NonIndexed"
            or spec.get("completions") is not None
        ):
            spec.setdefault("completions", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        _default_template(spec)

    def prepare_create(self, obj: Obj) -> None:
        spec = ensure(obj, "spec")
        if spec.get("manualSelector"):
            return
        uid = obj["metadata"]["uid"]
        name = obj["metadata"].get("name", "")
        generated = {JOB_UID_LABEL: uid}
        spec["selector"] = {"matchLabels": generated}
        template = ensure(spec, "template")
        labels = ensure(ensure(template, "metadata"), "labels")
        labels.update(
            {JOB_UID_LABEL: uid, JOB_NAME_LABEL: name, "controller-uid": uid, "job-name": name}
        )

    def initial_status(self, obj: Obj) -> Any:
        return {}

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [errors.required("spec")]
        out, selector = validate_workload_selector(spec, "spec", "job")
        out.extend(validate_pod_template(spec.get("template"), "spec.template", selector=selector))
        policy = get(spec, "template", "spec", "restartPolicy")
        if policy not in ("OnFailure", "Never"):
            out.append(
                errors.not_supported(
                    "spec.template.spec.restartPolicy", policy, ("OnFailure", "Never")
                )
            )
        for key in ("parallelism", "completions", "backoffLimit"):
            out.extend(non_negative(spec.get(key), f"spec.{key}"))
        return out

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        out = self.validate(new) + _selector_immutable(new, old)
        new_template = get(new, "spec", "template") or {}
        old_template = get(old, "spec", "template") or {}

        def comparable(template: Obj) -> Obj:
            spec = {
                k: v
                for k, v in (template.get("spec") or {}).items()
                if k not in JOB_MUTABLE_TEMPLATE
            }
            return {**template, "spec": spec, "metadata": {}}

        if comparable(new_template) != comparable(old_template):
            out.append(errors.immutable("spec.template", new_template))
        if get(new, "spec", "completions") != get(old, "spec", "completions") and not _elastic(
            new, old
        ):
            out.append(errors.immutable("spec.completions", get(new, "spec", "completions")))
        return out

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column("Status", "string", _job_status, "", "Status of the job."),
            Column(
                "Completions",
                "string",
                lambda o: f"{_num(o, 'status', 'succeeded')}/{_num(o, 'spec', 'completions')}",
                "",
                "The desired number of successfully finished pods the job should be run with.",
            ),
            Column(
                "Duration",
                "string",
                lambda o: (
                    columns.since(text(o, "status", "startTime") or None)
                    if get(o, "status", "startTime")
                    else ""
                ),
                "",
                "Time required to complete the job.",
            ),
            columns.age_column(),
        ]


class LeaseStrategy(Strategy):
    allow_create_on_update = True

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec") or {}
        out: list[FieldError] = []
        duration = spec.get("leaseDurationSeconds")
        if duration is not None and (not isinstance(duration, int) or duration <= 0):
            out.append(
                errors.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0")
            )
        transitions = spec.get("leaseTransitions")
        out.extend(non_negative(transitions, "spec.leaseTransitions"))
        return out

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "Holder",
                "string",
                lambda o: text(o, "spec", "holderIdentity"),
                "",
                "The holder of the lease.",
            ),
            columns.age_column(),
        ]
