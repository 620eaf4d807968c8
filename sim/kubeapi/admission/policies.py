"""ValidatingAdmissionPolicy enforcement: which policies and bindings pick a request, and
what their CEL validations decide.

It runs in the validating phase, after mutation and the object's own validation, before
the validating webhooks (the real server's plugin order). For every policy whose
``matchConstraints`` pick the request and every binding of it (``spec.policyName``) whose
``matchResources`` pick it too, the policy's ``matchConditions`` are evaluated, then each
validation; a validation that is not ``true`` is acted on as the binding's
``validationActions`` say:

- ``Deny``: the request fails. The first denial is the error, exactly the real server's:
  ``<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<policy>' with binding
  '<binding>' denied request: <message>`` with the validation's ``reason`` (default
  ``Invalid``) and the code it maps to (Forbidden 403, Unauthorized 401,
  RequestEntityTooLarge 413, otherwise 422), and the message as the one cause. The name is
  the new object's (``Unknown`` on DELETE, which has none, as upstream).
- ``Warn``: a ``Warning`` header ``Validation failed for ValidatingAdmissionPolicy '<policy>'
  with binding '<binding>': <message>``.
- ``Audit``: a ``validation.policy.admission.k8s.io/validation_failure`` record in
  ``audit_records``; with ``on_audit`` (``ServerConfig.audit_log``, :mod:`.auditlog`) the
  request's records, and its denial if any, are also handed on once the request is decided.

The message is the messageExpression's result when it yields a non-empty one-line string,
else ``message``, else ``failed expression: <expression>``. An expression that fails to
evaluate (and a match condition that is not a bool) is an error: under ``failurePolicy:
Fail`` it denies with ``expression '<expression>' resulted in error: <why>``, under ``Ignore``
it is skipped. A binding without a policy, and a policy without a binding, do nothing.
Requests on webhook configurations and on policies and bindings themselves are exempt.

A policy with a ``paramKind`` is evaluated once per parameter its binding selects
(:mod:`params`), with it as ``params``; a binding whose parameters cannot be found is a
configuration error (``failed to configure binding: <why>``) under the failure policy.

Not supported: ``authorizer`` in expressions (refused when the policy is written), and audit
annotations (compiled when written, not evaluated).
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from sim.kubeapi.admission.matching import (
    WEBHOOK_STORAGES,
    AdmissionRequest,
    Configurations,
    in_version,
    prepare_forms,
    request_body,
    rule_matches,
    selectors_match,
)
from sim.kubeapi.admission.params import ParamError, collect_params
from sim.kubeapi.conversion.converter import Converter
from sim.kubeapi.machinery import errors
from sim.kubeapi.storage.resources import Obj, Registry, ResourceType
from sim.kubeapi.validation import policy_cel

POLICIES = "admissionregistration.k8s.io/validatingadmissionpolicies"
BINDINGS = "admissionregistration.k8s.io/validatingadmissionpolicybindings"
EXEMPT_STORAGES = WEBHOOK_STORAGES | {POLICIES, BINDINGS}
AUDIT_KEY = "validation.policy.admission.k8s.io/validation_failure"
REASON_CODES = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413, "Invalid": 422}


def reason_code(reason: str) -> int:
    """The HTTP status of a denial's reason; anything else is 422, as upstream."""
    return REASON_CODES.get(reason, 422)


@dataclass(frozen=True, slots=True)
class Decision:
    """One validation that did not admit the request."""

    message: str
    reason: str = ""
    index: int = 0


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """What the real server writes as the ``validation_failure`` audit annotation."""

    policy: str
    binding: str
    expression_index: int
    message: str
    validation_actions: tuple[str, ...]

    def annotation(self) -> tuple[str, str]:
        value = [
            {
                "message": self.message,
                "policy": self.policy,
                "binding": self.binding,
                "expressionIndex": self.expression_index,
                "validationActions": list(self.validation_actions),
            }
        ]
        return AUDIT_KEY, json.dumps(value, separators=(",", ":"))


AuditSink = Callable[[AdmissionRequest, Sequence[AuditRecord], errors.ApiError | None], None]
"""Takes one request's audit records and the denial it got (None: admitted by the policies)."""


def match_target(
    match: Obj,
    req: AdmissionRequest,
    registry: Registry,
    namespace_labels: Callable[[str], dict[str, str] | None],
) -> ResourceType | None:
    """The resource type (the request's, or an equivalent version under ``matchPolicy:
    Equivalent``) in which ``match`` (matchConstraints or matchResources) picks ``req``."""
    if not selectors_match(
        match.get("namespaceSelector"), match.get("objectSelector"), req, namespace_labels
    ):
        return None
    candidates = [req.rt]
    if match.get("matchPolicy", "Equivalent") == "Equivalent":
        candidates += [rt for rt in registry.by_storage(req.rt.storage) if rt is not req.rt]

    def first(rules: list[Obj]) -> ResourceType | None:
        return next((rt for rt in candidates if any(rule_matches(r, req, rt) for r in rules)), None)

    if first(match.get("excludeResourceRules") or []) is not None:
        return None
    rules = match.get("resourceRules") or []
    return first(rules) if rules else req.rt


def request_variable(req: AdmissionRequest, target: ResourceType) -> Obj:
    """The ``request`` CEL variable: the AdmissionRequest with ``options``, its string, list
    and map fields present even when empty, as typed fields read on the real server."""
    body = request_body(req, target, include_objects=False, include_options=True)
    for key in ("name", "namespace", "subResource", "requestSubResource"):
        body.setdefault(key, "")
    user = dict(body.get("userInfo") or {})
    user.setdefault("username", "")
    user.setdefault("uid", "")
    user.setdefault("groups", [])
    user.setdefault("extra", {})
    body["userInfo"] = user
    return body


def _variables(spec: Obj) -> list[policy_cel.Variable]:
    return [
        policy_cel.Variable(name=str(v.get("name", "")), expression=str(v.get("expression", "")))
        for v in spec.get("variables") or ()
        if isinstance(v, dict)
    ]


def _message(validation: Obj, activation: policy_cel.Activation) -> str:
    expr = validation.get("messageExpression")
    message = activation.message(expr) if expr else ""
    if not message:
        message = str(validation.get("message") or "").strip()
    if not message:
        message = f"failed expression: {str(validation.get('expression', '')).strip()}"
    return message


def evaluate(spec: Obj, activation: policy_cel.Activation) -> Iterator[Decision]:
    """The decisions of one policy on one request: match conditions first, then each
    validation. Errors deny under ``failurePolicy: Fail`` and are skipped under ``Ignore``."""
    fail = spec.get("failurePolicy", "Fail") != "Ignore"
    # A false condition skips the policy whatever errors others had (kube-apiserver's matcher).
    failed: policy_cel.EvaluationError | None = None
    for condition in spec.get("matchConditions") or ():
        try:
            if not activation.condition(str(condition.get("expression", ""))):
                return
        except policy_cel.EvaluationError as exc:
            failed = failed or exc
    if failed is not None:
        if fail:
            yield Decision(message=str(failed))
        return
    for index, validation in enumerate(spec.get("validations") or ()):
        try:
            admitted = activation.admits(str(validation.get("expression", "")))
        except policy_cel.EvaluationError as exc:
            if fail:
                yield Decision(message=str(exc), index=index)
            continue
        if not admitted:
            yield Decision(
                message=_message(validation, activation),
                reason=str(validation.get("reason") or "Invalid"),
                index=index,
            )


def denial(req: AdmissionRequest, policy: str, binding: str, decision: Decision) -> errors.ApiError:
    """The real server's error for a request a policy denied."""
    message = (
        f"ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: "
        f"{decision.message}"
    )
    meta = (req.obj or {}).get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or "Unknown"
    err = errors.forbidden_error(req.rt.plural, req.rt.group, name, message)
    reason = decision.reason or "Invalid"
    details = dict(err.details or {})
    details["causes"] = [{"message": message}]
    return errors.ApiError(
        code=reason_code(reason), reason=reason, message=err.message, details=details
    )


class PolicyEnforcer:
    """Reads the stored policies and bindings and applies them to one request at a time."""

    def __init__(
        self,
        *,
        configurations: Configurations,
        registry: Registry,
        conversion: Converter,
        namespace_labels: Callable[[str], dict[str, str] | None],
        audit_limit: int = 1000,
        on_audit: AuditSink | None = None,
    ) -> None:
        self.configurations = configurations
        self.conversion = conversion
        self.store = configurations.store
        self.registry = registry
        self.namespace_labels = namespace_labels
        self.audit_records: collections.deque[AuditRecord] = collections.deque(maxlen=audit_limit)
        self.on_audit = on_audit

    def _objects(self, storage: str) -> list[Obj]:
        return self.configurations.read(storage)[0]

    def active(self) -> bool:
        """Whether any policy has a binding (otherwise nothing can be enforced)."""
        return all(self.configurations.present(s) for s in (POLICIES, BINDINGS))

    def _namespace_object(self, req: AdmissionRequest) -> Obj | None:
        if not req.rt.namespaced or not req.namespace:
            return None
        entry = self.store.bucket("namespaces").get("", req.namespace)
        if entry is None:
            return None
        namespace = entry.obj()
        meta = namespace.get("metadata") or {}
        kept = ("name", "uid", "labels", "annotations", "creationTimestamp", "deletionTimestamp")
        return {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {k: meta[k] for k in kept if k in meta},
            "spec": namespace.get("spec") or {},
            "status": namespace.get("status") or {},
        }

    async def validate(self, req: AdmissionRequest) -> None:
        """Apply every bound policy to ``req``: raise the first denial, add warnings to
        ``req.warnings`` and audit records to ``audit_records``."""
        if req.rt.storage in EXEMPT_STORAGES or not self.active():
            return
        bindings: dict[str, list[Obj]] = {}
        for binding in self._objects(BINDINGS):
            policy_name = (binding.get("spec") or {}).get("policyName")
            if policy_name:
                bindings.setdefault(policy_name, []).append(binding)
        denied: errors.ApiError | None = None
        audited: list[AuditRecord] = []
        for policy in self._objects(POLICIES):
            name = (policy.get("metadata") or {}).get("name", "")
            spec = policy.get("spec") or {}
            if name not in bindings:
                continue
            target = match_target(
                spec.get("matchConstraints") or {}, req, self.registry, self.namespace_labels
            )
            if target is None:
                continue
            await prepare_forms(req, target, self.conversion)
            for binding in bindings[name]:
                error = self._apply(req, policy, binding, target, audited)
                if denied is None:
                    denied = error
        self.audit_records.extend(audited)
        if audited and self.on_audit is not None:
            self.on_audit(req, audited, denied)
        if denied is not None:
            raise denied

    def _activation(
        self, req: AdmissionRequest, spec: Obj, target: ResourceType, params: Obj | None
    ) -> policy_cel.Activation:
        """One request's CEL inputs for one policy and parameter (converted only when read)."""
        obj, old = in_version(req, target)
        inputs = {
            "object": obj,
            "oldObject": old,
            "request": request_variable(req, target),
            "params": params,
            "namespaceObject": self._namespace_object(req),
        }
        return policy_cel.Activation(inputs, _variables(spec))

    def _decisions(
        self, req: AdmissionRequest, spec: Obj, binding_spec: Obj, target: ResourceType
    ) -> Iterator[Decision]:
        """The decisions of one binding: one evaluation per parameter it selects."""
        try:
            params = collect_params(
                param_kind=spec.get("paramKind"),
                param_ref=binding_spec.get("paramRef"),
                namespace=req.namespace,
                registry=self.registry,
                store=self.store,
            )
        except ParamError as exc:
            if spec.get("failurePolicy", "Fail") != "Ignore":
                yield Decision(message=f"failed to configure binding: {exc}")
            return
        for param in params:
            yield from evaluate(spec, self._activation(req, spec, target, param))

    def _apply(
        self,
        req: AdmissionRequest,
        policy: Obj,
        binding: Obj,
        target: ResourceType,
        audited: list[AuditRecord],
    ) -> errors.ApiError | None:
        """One binding of a matched policy: its warnings, its audit records (added to
        ``audited``), and its denial."""
        policy_name = policy["metadata"]["name"]
        binding_name = (binding.get("metadata") or {}).get("name", "")
        spec = policy.get("spec") or {}
        binding_spec = binding.get("spec") or {}
        matches = binding_spec.get("matchResources")
        if matches and match_target(matches, req, self.registry, self.namespace_labels) is None:
            return None
        actions = tuple(str(a) for a in binding_spec.get("validationActions") or ())
        first: errors.ApiError | None = None
        for decision in self._decisions(req, spec, binding_spec, target):
            if "Deny" in actions and first is None:
                first = denial(req, policy_name, binding_name, decision)
            if "Warn" in actions:
                req.warnings.append(
                    f"Validation failed for ValidatingAdmissionPolicy '{policy_name}' with "
                    f"binding '{binding_name}': {decision.message}"
                )
            if "Audit" in actions:
                audited.append(
                    AuditRecord(
                        policy=policy_name,
                        binding=binding_name,
                        expression_index=decision.index,
                        message=decision.message,
                        validation_actions=actions,
                    )
                )
        return first
