"""``batch/v1`` CronJob: stored, defaulted and validated as kube-apiserver does; no controller
runs it (nothing in the simulated cluster creates its Jobs)."""

from __future__ import annotations

import re
import zoneinfo
from typing import Any

from sim.kubeapi.kinds.common import (
    default_pod_spec,
    ensure,
    get,
    non_negative,
    validate_pod_template,
)
from sim.kubeapi.machinery import errors
from sim.kubeapi.machinery.errors import FieldError
from sim.kubeapi.storage import columns
from sim.kubeapi.storage.resources import Column, Obj, Strategy

MAX_NAME_LENGTH = 52
"""A CronJob's Jobs are named ``<name>-<minutes since the epoch>``: 52 + 11 characters."""
CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")
JOB_RESTART_POLICIES = ("OnFailure", "Never")
DESCRIPTORS = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,?-]+$")


def schedule_problem(schedule: str) -> str | None:
    """Why ``schedule`` is no standard cron schedule (five fields or a descriptor); None if it
    is one. The field values themselves are not range-checked here."""
    if schedule in DESCRIPTORS or schedule.startswith("@every "):
        return None
    fields = schedule.split()
    if len(fields) != 5:
        return f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]"
    for field in fields:
        if not _CRON_FIELD.match(field):
            return f"failed to parse field {field!r}"
    return None


def time_zone_problem(zone: str) -> str | None:
    """Why ``zone`` names no IANA time zone; None when it names one."""
    try:
        zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {zone}"
    return None


def _last_schedule(obj: Obj) -> str:
    stamp = get(obj, "status", "lastScheduleTime")
    return columns.since(stamp) if isinstance(stamp, str) else "<none>"


class CronJobStrategy(Strategy):
    status_subresource = True
    has_generation = True

    def default(self, obj: Obj) -> None:
        spec = ensure(obj, "spec")
        spec.setdefault("concurrencyPolicy", "Allow")
        spec.setdefault("suspend", False)
        spec.setdefault("successfulJobsHistoryLimit", 3)
        spec.setdefault("failedJobsHistoryLimit", 1)
        template = get(spec, "jobTemplate", "spec", "template")
        if isinstance(template, dict):
            default_pod_spec(ensure(template, "spec"))

    def initial_status(self, obj: Obj) -> Any:
        return {}

    def validate(self, obj: Obj) -> list[FieldError]:
        out: list[FieldError] = []
        name = get(obj, "metadata", "name")
        if isinstance(name, str) and len(name) > MAX_NAME_LENGTH:
            out.append(
                errors.invalid(
                    "metadata.name", name, f"must be no more than {MAX_NAME_LENGTH} characters"
                )
            )
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [*out, errors.required("spec")]
        schedule = spec.get("schedule")
        if not schedule:
            out.append(errors.required("spec.schedule"))
        elif not isinstance(schedule, str) or (problem := schedule_problem(schedule)):
            out.append(errors.invalid("spec.schedule", schedule, str(problem or "not a string")))
        zone = spec.get("timeZone")
        if zone is not None and (problem := time_zone_problem(str(zone))):
            out.append(errors.invalid("spec.timeZone", zone, problem))
        policy = spec.get("concurrencyPolicy")
        if policy not in CONCURRENCY_POLICIES:
            out.append(errors.not_supported("spec.concurrencyPolicy", policy, CONCURRENCY_POLICIES))
        for key in (
            "startingDeadlineSeconds",
            "successfulJobsHistoryLimit",
            "failedJobsHistoryLimit",
        ):
            out.extend(non_negative(spec.get(key), f"spec.{key}"))
        job = get(spec, "jobTemplate", "spec")
        if not isinstance(job, dict):
            return [*out, errors.required("spec.jobTemplate.spec")]
        path = "spec.jobTemplate.spec"
        out.extend(validate_pod_template(job.get("template"), f"{path}.template", selector=None))
        restart = get(job, "template", "spec", "restartPolicy")
        if restart not in JOB_RESTART_POLICIES:
            out.append(
                errors.not_supported(
                    f"{path}.template.spec.restartPolicy", restart, JOB_RESTART_POLICIES
                )
            )
        for key in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"):
            out.extend(non_negative(job.get(key), f"{path}.{key}"))
        return out

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column("Schedule", "string", lambda o: get(o, "spec", "schedule") or "", ""),
            Column("Timezone", "string", lambda o: get(o, "spec", "timeZone") or "<none>", ""),
            Column("Suspend", "boolean", lambda o: bool(get(o, "spec", "suspend")), ""),
            Column("Active", "integer", lambda o: len(get(o, "status", "active") or []), ""),
            Column("Last Schedule", "date", _last_schedule, ""),
            columns.age_column(),
        ]
