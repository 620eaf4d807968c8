"""``POST pods/<name>/eviction`` (policy/v1 Eviction): a pod delete that respects budgets.

The behaviour of kube-apiserver's eviction subresource, as clients see it:

- the body is an Eviction naming the pod; its ``deleteOptions`` apply to the delete;
- a pod that already finished (Succeeded or Failed) or is being deleted is deleted without a
  budget check;
- the PodDisruptionBudgets of the pod's namespace whose selector matches the pod's labels (an
  empty selector matches every pod, none matches none): more than one answers 500 ("This pod
  has more than one PodDisruptionBudget, which the eviction subresource does not support."); one
  whose ``status.disruptionsAllowed`` is 0 answers 429 TooManyRequests ("Cannot evict pod as it
  would violate the pod's disruption budget.", with a ``DisruptionBudget`` cause); otherwise the
  budget's ``disruptionsAllowed`` drops by one, the pod is recorded in its
  ``status.disruptedPods``, and the pod is deleted;
- the answer is 201 with a Success Status.

The disruption controller, which recomputes the budgets' status, is not emulated
(:mod:`sim.kubeapi.kinds.policy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim.kubeapi.machinery import codec, errors, selectors
from sim.kubeapi.storage.resources import Obj, ResourceType
from sim.kubeapi.writes.options import DeleteOptions, Result, WriteOptions

if TYPE_CHECKING:
    from sim.kubeapi.writes.engine import Engine

FINISHED = ("Succeeded", "Failed")
MAX_RETRIES = 5


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
    pod = engine.current(rt, namespace, name)
    phase = (pod.obj().get("status") or {}).get("phase")
    if not pod.deleting and phase not in FINISHED:
        await _spend_budget(engine, namespace=namespace, pod=pod.obj(), dry_run=opts.dry_run)
    await engine.delete(rt, namespace=namespace, name=name, options=options, opts=opts)
    return Result(errors.success_status(code=201), 201)


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
        allowed = status.get("disruptionsAllowed") or 0
        if allowed <= 0:
            raise _violates(budget)
        if dry_run:
            return
        status["disruptionsAllowed"] = allowed - 1
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
