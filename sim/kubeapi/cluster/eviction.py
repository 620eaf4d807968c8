"""``POST pods/<name>/eviction`` (policy/v1 Eviction): a pod delete that respects budgets.

The behaviour of kube-apiserver's eviction subresource, as clients see it:

- the body is an Eviction naming the pod; its ``deleteOptions`` apply to the delete;
- validating admission (ValidatingAdmissionPolicies, then validating webhooks) sees the request
  as a CREATE of ``pods/eviction`` whose object is the Eviction (kind ``policy/v1 Eviction``),
  before anything else is checked, as kube-apiserver's admission chain runs for the
  subresource; a refusal there is the answer (the pod's delete that follows is not admitted
  again);
- a pod that is Pending, already finished (Succeeded or Failed) or being deleted is deleted
  without a budget check;
- the PodDisruptionBudgets of the pod's namespace whose selector matches the pod's labels (an
  empty selector matches every pod, none matches none): more than one answers 500 ("This pod
  has more than one PodDisruptionBudget, which the eviction subresource does not support.");
- a pod that is not Ready is deleted without spending a disruption when its budget's
  ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``, or (``IfHealthyBudget``, the default) when
  the budget has its desired healthy pods (``currentHealthy >= desiredHealthy > 0``);
- otherwise the budget decides: one whose status has not observed its generation yet answers
  429 TooManyRequests with ``retryAfterSeconds: 10`` (and a ``Retry-After`` header) and the
  cause "The disruption budget <name> is still being processed by the server."; one whose
  ``status.disruptionsAllowed`` is 0 answers 429 ("Cannot evict pod as it would violate the
  pod's disruption budget.", cause "The disruption budget <name> needs <desiredHealthy>
  healthy pods and has <currentHealthy> currently", both of reason ``DisruptionBudget``);
  otherwise the budget's ``disruptionsAllowed`` drops by one (its ``DisruptionAllowed``
  condition turns False with ``InsufficientPods`` when that reaches 0), the pod is recorded in
  its ``status.disruptedPods``, and the pod is deleted;
- before the delete (unless a dry run) the pod gets the condition ``DisruptionTarget`` True,
  reason ``EvictionByEvictionAPI``, message "Eviction API: evicting";
- the answer is 201 with a Success Status.

The disruption controller (``sim/controllers/disruption.py``) recomputes the budgets' status
from their pods; it also drops ``disruptedPods`` entries once their pods are gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim.kubeapi.machinery import codec, errors, selectors
from sim.kubeapi.storage.resources import Obj, ResourceType
from sim.kubeapi.writes.options import DeleteOptions, Result, WriteOptions

if TYPE_CHECKING:
    from sim.kubeapi.writes.engine import Engine

UNCHECKED_PHASES = ("Pending", "Succeeded", "Failed")
MAX_RETRIES = 5
RETRY_AFTER_S = 10
DISRUPTION_ALLOWED = "DisruptionAllowed"
DISRUPTION_TARGET = "DisruptionTarget"


async def evict(
    engine: Engine,
    rt: ResourceType,
    *,
    namespace: str,
    name: str,
    body: Any,
    options: DeleteOptions,
    opts: WriteOptions,
) -> Result:
    """Evict the pod ``namespace/name`` (see the module docstring)."""
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request was in an unknown format")
    named = (body.get("metadata") or {}).get("name")
    if named and named != name:
        raise errors.bad_request(
            f"name in URL does not match name in Eviction object: {name} != {named}"
        )
    await _admit(engine, rt, namespace=namespace, name=name, body=body, opts=opts)
    pod = engine.current(rt, namespace, name)
    phase = (pod.obj().get("status") or {}).get("phase")
    if not pod.deleting and phase not in UNCHECKED_PHASES:
        await _spend_budget(engine, namespace=namespace, pod=pod.obj(), dry_run=opts.dry_run)
    if not opts.dry_run:
        await _mark_disruption_target(engine, rt, namespace=namespace, name=name, opts=opts)
    await engine.delete(rt, namespace=namespace, name=name, options=options, opts=opts)
    return Result(errors.success_status(code=201), 201)


EVICTION_KIND = ("policy", "v1", "Eviction")


async def _admit(
    engine: Engine, rt: ResourceType, *, namespace: str, name: str, body: Obj, opts: WriteOptions
) -> None:
    """Validating admission of the eviction (raises the refusal)."""
    if not engine.admission.validating():
        return
    req = engine.admission_request(
        rt,
        "CREATE",
        namespace,
        name,
        body,
        None,
        "eviction",
        opts,
        {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    )
    req.object_kind = EVICTION_KIND
    await engine.admission.validate(req)


async def _mark_disruption_target(
    engine: Engine, rt: ResourceType, *, namespace: str, name: str, opts: WriteOptions
) -> None:
    """The ``DisruptionTarget`` condition the real server sets before it deletes the pod."""
    for _ in range(MAX_RETRIES):
        obj = await engine.read(rt, namespace, name)
        status = obj.setdefault("status", {})
        kept = [c for c in status.get("conditions") or [] if c.get("type") != DISRUPTION_TARGET]
        kept.append(
            {
                "type": DISRUPTION_TARGET,
                "status": "True",
                "lastTransitionTime": codec.format_time(codec.now()),
                "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting",
            }
        )
        status["conditions"] = kept
        try:
            await engine.update(
                rt, namespace=namespace, name=name, body=obj, opts=opts, subresource="status"
            )
            return
        except errors.ApiError as exc:
            if exc.code != 409:
                raise
    raise errors.conflict(rt.plural, rt.group, name)


async def _spend_budget(engine: Engine, *, namespace: str, pod: Obj, dry_run: bool) -> None:
    budgets = engine.registry.get("policy", "v1", "poddisruptionbudgets")
    if budgets is None:
        return
    labels = (pod.get("metadata") or {}).get("labels") or {}
    for _ in range(MAX_RETRIES):
        matching = [
            entry
            for entry in engine.store.bucket(budgets.storage).entries(namespace)
            if _selects(entry.obj(), labels)
        ]
        if not matching:
            return
        if len(matching) > 1:
            raise errors.internal_error(
                "This pod has more than one PodDisruptionBudget, which the eviction "
                "subresource does not support."
            )
        (entry,) = matching
        budget = entry.obj()
        status = budget.setdefault("status", {})
        if not _ready(pod) and _unhealthy_may_go(budget):
            return
        generation = (budget.get("metadata") or {}).get("generation") or 0
        if (status.get("observedGeneration") or 0) < generation:
            raise _processing(budget)
        allowed = status.get("disruptionsAllowed") or 0
        if allowed <= 0:
            raise _violates(budget)
        if dry_run:
            return
        status["disruptionsAllowed"] = allowed - 1
        if allowed == 1:
            _no_more_disruptions(status)
        disrupted = dict(status.get("disruptedPods") or {})
        disrupted[(pod.get("metadata") or {}).get("name", "")] = codec.format_time(codec.now())
        status["disruptedPods"] = disrupted
        bucket = engine.store.bucket(budgets.storage)
        if bucket.get(namespace, entry.name) is not entry:
            continue  # the budget changed meanwhile: decide again
        engine.store.put(
            budgets.storage,
            budget,
            prev=entry,
            fields=engine.fields_fn(budgets.storage),
            typed=True,
        )
        return
    raise errors.conflict("poddisruptionbudgets", "policy", "")


def _selects(budget: Obj, labels: dict[str, str]) -> bool:
    selector = (budget.get("spec") or {}).get("selector")
    if selector is None:
        return False
    return selectors.from_label_selector_object(selector).matches(labels)


def _ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _unhealthy_may_go(budget: Obj) -> bool:
    """Whether an unready pod may go without spending a disruption."""
    policy = (budget.get("spec") or {}).get("unhealthyPodEvictionPolicy")
    if policy == "AlwaysAllow":
        return True
    status = budget.get("status") or {}
    desired = status.get("desiredHealthy") or 0
    return bool((status.get("currentHealthy") or 0) >= desired > 0)


def _no_more_disruptions(status: Obj) -> None:
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != DISRUPTION_ALLOWED]
    previous: Obj = next(
        (c for c in status.get("conditions") or [] if c.get("type") == DISRUPTION_ALLOWED), {}
    )
    since = previous.get("lastTransitionTime") if previous.get("status") == "False" else None
    conditions.append(
        {
            "type": DISRUPTION_ALLOWED,
            "status": "False",
            "reason": "InsufficientPods",
            "message": "",
            "observedGeneration": status.get("observedGeneration") or 0,
            "lastTransitionTime": since or codec.format_time(codec.now()),
        }
    )
    status["conditions"] = conditions


def _processing(budget: Obj) -> errors.ApiError:
    name = (budget.get("metadata") or {}).get("name", "")
    cause = f"The disruption budget {name} is still being processed by the server."
    return errors.ApiError(
        code=429,
        reason="TooManyRequests",
        message="Cannot evict pod as it would violate the pod's disruption budget.",
        details={
            "causes": [{"reason": "DisruptionBudget", "message": cause}],
            "retryAfterSeconds": RETRY_AFTER_S,
        },
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


def _violates(budget: Obj) -> errors.ApiError:
    status = budget.get("status") or {}
    name = (budget.get("metadata") or {}).get("name", "")
    cause = (
        f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy pods "
        f"and has {status.get('currentHealthy', 0)} currently"
    )
    return errors.ApiError(
        code=429,
        reason="TooManyRequests",
        message="Cannot evict pod as it would violate the pod's disruption budget.",
        details={"causes": [{"reason": "DisruptionBudget", "message": cause}]},
    )
