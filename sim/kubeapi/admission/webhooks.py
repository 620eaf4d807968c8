"""Admission webhooks: mutating then validating, called over HTTPS with AdmissionReview v1.

The dispatcher is the write path's one entry to admission: its ``validate`` also applies
the ValidatingAdmissionPolicies (``policies``) before the validating webhooks.

For each create, update or delete the dispatcher reads the current webhook configurations
from the store and calls every matching webhook (rules, scope, namespaceSelector,
objectSelector, matchConditions: the webhook is skipped when any condition is false, whatever
errors others had; an error with none false follows ``failurePolicy``, as kube-apiserver's
matcher does), trusting only the configured ``caBundle``. Mutating
webhooks' JSONPatch responses are applied in order; a denial becomes the API error the
real server returns; an unreachable or failing webhook is an internal error under
``failurePolicy: Fail`` and is skipped under ``Ignore``.

Not implemented: reinvocation of mutating webhooks, ``matchPolicy: Exact`` subtleties
beyond matching the request's own version first, and authorizer checks in conditions.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from typing import Any

from sim.kubeapi.admission.matching import (
    ADMIN_USER,
    MUTATING,
    VALIDATING,
    WEBHOOK_STORAGES,
    AdmissionRequest,
    Configurations,
    convert,
    in_version,
    prepare_forms,
    request_body,
    rule_matches,
    selectors_match,
)
from sim.kubeapi.admission.policies import AuditSink, PolicyEnforcer
from sim.kubeapi.conversion.converter import Converter
from sim.kubeapi.machinery import codec, errors
from sim.kubeapi.patches.failures import PatchError
from sim.kubeapi.patches.json_patch import json_patch
from sim.kubeapi.storage.resources import Obj, Registry, ResourceType
from sim.kubeapi.storage.store import Store
from sim.kubeapi.validation import cel
from sim.kubeapi.webhookclient.client import CallFailedError, WebhookClient

__all__ = ["ADMIN_USER", "AdmissionRequest", "Dispatcher"]


class Dispatcher:
    """Finds and calls webhooks, through the server's one webhook client."""

    def __init__(
        self,
        *,
        store: Store,
        registry: Registry,
        client: WebhookClient,
        conversion: Converter,
        namespace_labels: Callable[[str], dict[str, str] | None],
        on_audit: AuditSink | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self.client = client
        self.conversion = conversion
        self.namespace_labels = namespace_labels
        # Webhook configurations change rarely and every write is checked against them: they
        # are decoded once per version, and which resource type a hook's rules pick for a
        # request's (type, operation, subresource) is remembered for that version.
        self.configurations = Configurations(store)
        self.policies = PolicyEnforcer(
            configurations=self.configurations,
            registry=registry,
            conversion=conversion,
            namespace_labels=namespace_labels,
            on_audit=on_audit,
        )
        self._targets: dict[tuple[int, int, int, str, str], ResourceType | None] = {}

    def _configurations(self, storage: str) -> list[Obj]:
        """The configurations stored in ``storage``; treat them as read-only."""
        configurations, changed = self.configurations.read(storage)
        if changed:
            self._targets.clear()
        return configurations

    def has_webhooks(self) -> bool:
        return any(self.configurations.present(s) for s in WEBHOOK_STORAGES)

    async def mutate(self, req: AdmissionRequest) -> Obj | None:
        """Run mutating webhooks; returns the (possibly patched) object."""
        if req.rt.storage in WEBHOOK_STORAGES:
            return req.obj
        for config in self._configurations(MUTATING):
            for hook in config.get("webhooks") or ():
                target = await self._matching_type(hook, req)
                if target is None:
                    continue
                response = await self._call(hook, req, target)
                if response is None:
                    continue
                patch = response.get("patch")
                if patch and req.obj is not None:
                    if response.get("patchType", "JSONPatch") != "JSONPatch":
                        raise errors.internal_error(
                            f'failed calling webhook "{hook.get("name")}": unsupported patch '
                            f"type {response.get('patchType')!r}"
                        )
                    try:
                        ops = codec.decode(base64.b64decode(patch))
                        patched = json_patch(codec.copy(in_version(req, target)[0]), ops)
                    except (PatchError, ValueError) as exc:
                        raise errors.internal_error(
                            f'failed calling webhook "{hook.get("name")}": JSON patch could '
                            f"not be applied: {exc}"
                        ) from None
                    if target.webhook is not None and target is not req.rt:
                        req.obj = await self.conversion.converted(patched, req.rt)
                    else:
                        req.obj = convert(patched, target, req.rt)
                    req.forms.clear()
        return req.obj

    def validating(self) -> bool:
        """Whether ``validate`` has anything to do (a webhook, or a bound policy)."""
        return self.has_webhooks() or self.policies.active()

    async def validate(self, req: AdmissionRequest) -> None:
        """Validating admission: the bound ValidatingAdmissionPolicies, then the validating
        webhooks (the real server's plugin order)."""
        await self.policies.validate(req)
        if req.rt.storage in WEBHOOK_STORAGES:
            return
        calls = []
        for config in self._configurations(VALIDATING):
            for hook in config.get("webhooks") or ():
                target = await self._matching_type(hook, req)
                if target is not None:
                    calls.append(self._call(hook, req, target))
        if calls:
            # Validating webhooks run in parallel on the real server too.
            results = await asyncio.gather(*calls, return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    raise result

    # -- matching -------------------------------------------------------------------------------

    async def _matching_type(self, hook: Obj, req: AdmissionRequest) -> ResourceType | None:
        # Hook dicts live as long as their cached version and types as long as the registry's
        # generation, so their ids stay theirs.
        key = (id(hook), self.registry.generation, id(req.rt), req.operation, req.subresource)
        if key in self._targets:
            target = self._targets[key]
        else:
            target = self._targets[key] = self._rules_target(hook, req)
        if target is None:
            return None
        if not self._selectors_match(hook, req):
            return None
        await prepare_forms(req, target, self.conversion)
        if not self._conditions_match(hook, req, target):
            return None
        return target

    def _rules_target(self, hook: Obj, req: AdmissionRequest) -> ResourceType | None:
        """The resource type whose form ``hook``'s rules match ``req`` in, if any."""
        candidates = [req.rt]
        if hook.get("matchPolicy", "Equivalent") == "Equivalent":
            candidates += [
                rt for rt in self.registry.by_storage(req.rt.storage) if rt is not req.rt
            ]
        return next(
            (
                rt
                for rt in candidates
                if any(rule_matches(r, req, rt) for r in hook.get("rules") or ())
            ),
            None,
        )

    def _selectors_match(self, hook: Obj, req: AdmissionRequest) -> bool:
        return selectors_match(
            hook.get("namespaceSelector"), hook.get("objectSelector"), req, self.namespace_labels
        )

    def _conditions_match(self, hook: Obj, req: AdmissionRequest, target: ResourceType) -> bool:
        conditions = hook.get("matchConditions") or []
        if not conditions:
            return True
        obj, old = in_version(req, target)
        activation = {
            "object": obj,
            "oldObject": old,
            "request": request_body(req, target, include_objects=False),
        }
        # Every condition is evaluated: one that is false skips the webhook whatever errors
        # others had; only when none is false does an error count, under the failure policy.
        failed: tuple[Obj, Exception] | None = None
        for condition in conditions:
            try:
                result = cel.evaluate(cel.compile_rule(condition.get("expression", "")), activation)
            except Exception as exc:
                failed = failed or (condition, exc)
                continue
            if not bool(result):
                return False
        if failed is None:
            return True
        if hook.get("failurePolicy", "Fail") == "Ignore":
            return False
        condition, error = failed
        raise errors.internal_error(
            f'failed calling webhook "{hook.get("name")}": failed to evaluate match condition '
            f'"{condition.get("name")}": {error}'
        ) from None

    # -- calling --------------------------------------------------------------------------------

    async def _call(self, hook: Obj, req: AdmissionRequest, target: ResourceType) -> Obj | None:
        name = hook.get("name", "")
        ignore = hook.get("failurePolicy", "Fail") == "Ignore"
        client = hook.get("clientConfig") or {}
        review_request = request_body(req, target)
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": review_request,
        }
        uid = review_request["uid"]
        endpoint = self.client.endpoint(client)
        try:
            answer = await self.client.post(
                client, endpoint, review, timeout_s=float(hook.get("timeoutSeconds", 10))
            )
            response = answer.get("response") if isinstance(answer, dict) else None
            if not isinstance(response, dict):
                raise CallFailedError(endpoint.shown, "webhook response was absent")
            if response.get("uid") != uid:
                raise CallFailedError(
                    endpoint.shown, f"expected response.uid={uid!r}, got {response.get('uid')!r}"
                )
        except CallFailedError as exc:
            if ignore:
                return None
            raise errors.internal_error(
                f'failed calling webhook "{name}": failed to call webhook: {exc}'
            ) from None
        req.warnings.extend(str(w) for w in response.get("warnings") or ())
        if not response.get("allowed"):
            raise _denied(name, response.get("status"))
        return response


def _denied(name: str, result: Any) -> errors.ApiError:
    status = result if isinstance(result, dict) else {}
    code = int(status.get("code") or 0)
    if code < 400:
        code = 400
    denied_by = f'admission webhook "{name}" denied the request'
    if status.get("message"):
        message = f"{denied_by}: {status['message']}"
    elif status.get("reason"):
        message = f"{denied_by}: {status['reason']}"
    else:
        message = f"{denied_by} without explanation"
    return errors.ApiError(
        code=code, reason=status.get("reason", ""), message=message, details=status.get("details")
    )
