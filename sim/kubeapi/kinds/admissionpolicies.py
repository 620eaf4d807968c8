"""``admissionregistration.k8s.io/v1`` ValidatingAdmissionPolicy and its Binding.

Defaults and validation follow the real server's: ``failurePolicy`` defaults to ``Fail``,
``matchPolicy`` to ``Equivalent``, selectors to ``{}`` and rule scopes to ``*``. A policy
needs ``matchConstraints.resourceRules`` and at least one validation or audit annotation;
every CEL expression (validations, messageExpressions, matchConditions, variables, audit
annotations) is compiled and checked at create and update time (``policy_cel.check``), so a
policy whose expression does not compile is refused with a field error naming it. A
binding needs ``policyName`` and ``validationActions`` (Deny, Warn, Audit; not both Deny
and Warn). A binding naming a policy that does not exist is accepted and has no effect.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import Any

from sim.kubeapi.kinds.common import get, text
from sim.kubeapi.machinery import errors, names, selectors
from sim.kubeapi.machinery.errors import FieldError
from sim.kubeapi.storage import columns
from sim.kubeapi.storage.resources import Column, Obj, Strategy
from sim.kubeapi.validation import policy_cel

FAILURE_POLICIES = ("Fail", "Ignore")
MATCH_POLICIES = ("Exact", "Equivalent")
OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
REASONS = ("Unauthorized", "Forbidden", "Invalid", "RequestEntityTooLarge")
ACTIONS = ("Deny", "Warn", "Audit")
SCOPES = ("*", "Cluster", "Namespaced")
_CEL_IDENTIFIER = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")


def default_match_resources(match: Any) -> None:
    if not isinstance(match, dict):
        return
    match.setdefault("matchPolicy", "Equivalent")
    match.setdefault("namespaceSelector", {})
    match.setdefault("objectSelector", {})
    for key in ("resourceRules", "excludeResourceRules"):
        for rule in match.get(key) or ():
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _validate_rule(rule: Any, path: str) -> list[FieldError]:
    if not isinstance(rule, dict):
        return [errors.type_invalid(path, rule, "must be an object")]
    out: list[FieldError] = []
    for key in ("apiGroups", "apiVersions", "resources", "operations"):
        values = rule.get(key)
        if not values:
            out.append(errors.required(f"{path}.{key}"))
        elif "*" in values and len(values) > 1:
            out.append(
                errors.invalid(f"{path}.{key}", values, "if '*' is present, must not specify other")
            )
    for op in _strings(rule.get("operations")):
        if op not in OPERATIONS:
            out.append(errors.not_supported(f"{path}.operations", op, OPERATIONS))
    scope = rule.get("scope", "*")
    if scope not in SCOPES:
        out.append(errors.not_supported(f"{path}.scope", scope, SCOPES))
    return out


def validate_match_resources(match: Any, path: str, *, rules_required: bool) -> list[FieldError]:
    if match is None:
        return [errors.required(path)] if rules_required else []
    if not isinstance(match, dict):
        return [errors.type_invalid(path, match, "must be an object")]
    out: list[FieldError] = []
    if rules_required and not match.get("resourceRules"):
        out.append(errors.required(f"{path}.resourceRules"))
    for key in ("resourceRules", "excludeResourceRules"):
        for i, rule in enumerate(match.get(key) or ()):
            out.extend(_validate_rule(rule, f"{path}.{key}[{i}]"))
    policy = match.get("matchPolicy")
    if policy is not None and policy not in MATCH_POLICIES:
        out.append(errors.not_supported(f"{path}.matchPolicy", policy, MATCH_POLICIES))
    for key in ("namespaceSelector", "objectSelector"):
        out.extend(selectors.validate_label_selector_object(match.get(key), f"{path}.{key}"))
    return out


def _compiles(path: str, expression: Any, declared: Collection[str]) -> list[FieldError]:
    if not expression:
        return [errors.required(path)]
    if not isinstance(expression, str):
        return [errors.type_invalid(path, expression, "must be a string")]
    why = policy_cel.check(expression, declared)
    return [errors.invalid(path, expression, f"compilation failed: {why}")] if why else []


def _cel_identifier(name: str) -> list[str]:
    return [] if _CEL_IDENTIFIER.match(name) else ["must be a CEL identifier"]


def _named(
    items: Any, path: str, rule: Callable[[str], list[str]]
) -> tuple[list[FieldError], list[tuple[int, Obj]]]:
    """Entries of a list of ``{name, expression}``: names present, valid by ``rule``, unique."""
    out: list[FieldError] = []
    good: list[tuple[int, Obj]] = []
    seen: set[str] = set()
    for i, item in enumerate(items or ()):
        where = f"{path}[{i}]"
        if not isinstance(item, dict):
            out.append(errors.type_invalid(where, item, "must be an object"))
            continue
        name = item.get("name")
        if not name:
            out.append(errors.required(f"{where}.name"))
        elif not isinstance(name, str) or rule(name):
            why = rule(name) if isinstance(name, str) else ["must be a string"]
            out.extend(errors.invalid(f"{where}.name", name, p) for p in why)
        elif name in seen:
            out.append(errors.duplicate(f"{where}.name", name))
        else:
            seen.add(name)
        good.append((i, item))
    return out, good


class ValidatingAdmissionPolicyStrategy(Strategy):
    status_subresource = True
    has_generation = True

    def default(self, obj: Obj) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        spec.setdefault("failurePolicy", "Fail")
        default_match_resources(spec.get("matchConstraints"))

    def initial_status(self, obj: Obj) -> Any:
        return None

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [errors.required("spec")]
        out = validate_match_resources(
            spec.get("matchConstraints"), "spec.matchConstraints", rules_required=True
        )
        policy = spec.get("failurePolicy")
        if policy not in FAILURE_POLICIES:
            out.append(errors.not_supported("spec.failurePolicy", policy, FAILURE_POLICIES))
        param_kind = spec.get("paramKind")
        if isinstance(param_kind, dict):
            for key in ("apiVersion", "kind"):
                if not param_kind.get(key):
                    out.append(errors.required(f"spec.paramKind.{key}"))
        problems, variables = _named(spec.get("variables"), "spec.variables", _cel_identifier)
        out.extend(problems)
        declared: list[str] = []
        for i, variable in variables:
            out.extend(
                _compiles(f"spec.variables[{i}].expression", variable.get("expression"), declared)
            )
            declared.append(str(variable.get("name") or ""))
        problems, conditions = _named(
            spec.get("matchConditions"), "spec.matchConditions", names.qualified_name
        )
        out.extend(problems)
        for i, condition in conditions:
            out.extend(
                _compiles(f"spec.matchConditions[{i}].expression", condition.get("expression"), ())
            )
        validations = spec.get("validations") or []
        audits = spec.get("auditAnnotations") or []
        if not validations and not audits:
            out.append(
                errors.required(
                    "spec.validations",
                    "validations or auditAnnotations must contain at least one item",
                )
            )
        for i, validation in enumerate(validations):
            out.extend(self._validate_validation(validation, f"spec.validations[{i}]", declared))
        for i, audit in enumerate(audits):
            where = f"spec.auditAnnotations[{i}]"
            if not isinstance(audit, dict):
                out.append(errors.type_invalid(where, audit, "must be an object"))
                continue
            if not audit.get("key"):
                out.append(errors.required(f"{where}.key"))
            out.extend(
                _compiles(f"{where}.valueExpression", audit.get("valueExpression"), declared)
            )
        return out

    @staticmethod
    def _validate_validation(validation: Any, path: str, declared: list[str]) -> list[FieldError]:
        if not isinstance(validation, dict):
            return [errors.type_invalid(path, validation, "must be an object")]
        out = _compiles(f"{path}.expression", validation.get("expression"), declared)
        message = validation.get("message")
        if isinstance(message, str) and "\n" in message.strip():
            out.append(
                errors.invalid(f"{path}.message", message, "message must not contain line breaks")
            )
        expr = validation.get("messageExpression")
        if expr is not None:
            out.extend(_compiles(f"{path}.messageExpression", expr, declared))
        reason = validation.get("reason")
        if reason is not None and reason not in REASONS:
            out.append(errors.not_supported(f"{path}.reason", reason, REASONS))
        return out

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "Validations",
                "integer",
                lambda o: len(get(o, "spec", "validations") or []),
                "",
                "Number of validations",
            ),
            Column(
                "ParamKind",
                "string",
                lambda o: _param_kind(o),
                "",
                "The kind of the parameter resource",
            ),
            columns.age_column(),
        ]


def _param_kind(obj: Obj) -> str:
    kind = get(obj, "spec", "paramKind")
    if not isinstance(kind, dict):
        return "<unset>"
    return f"{kind.get('apiVersion', '')}/{kind.get('kind', '')}"


class ValidatingAdmissionPolicyBindingStrategy(Strategy):
    has_generation = True

    def default(self, obj: Obj) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            default_match_resources(spec.get("matchResources"))

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [errors.required("spec")]
        out: list[FieldError] = []
        if not spec.get("policyName"):
            out.append(errors.required("spec.policyName"))
        actions = spec.get("validationActions")
        if not actions:
            out.append(errors.required("spec.validationActions"))
        else:
            seen: set[str] = set()
            for i, action in enumerate(_strings(actions)):
                if action not in ACTIONS:
                    out.append(
                        errors.not_supported(f"spec.validationActions[{i}]", action, ACTIONS)
                    )
                elif action in seen:
                    out.append(errors.duplicate(f"spec.validationActions[{i}]", action))
                seen.add(action)
            if {"Deny", "Warn"} <= seen:
                out.append(
                    errors.invalid(
                        "spec.validationActions",
                        actions,
                        "must not contain both Deny and Warn (repeating the same validation "
                        "failure information in the API response and headers serves no purpose)",
                    )
                )
        out.extend(
            validate_match_resources(
                spec.get("matchResources"), "spec.matchResources", rules_required=False
            )
        )
        return out

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "PolicyName",
                "string",
                lambda o: text(o, "spec", "policyName"),
                "",
                "The policy this binding binds",
            ),
            Column(
                "ParamRef",
                "string",
                lambda o: _param_ref(o),
                "",
                "The parameter resource this binding names",
            ),
            columns.age_column(),
        ]


def _param_ref(obj: Obj) -> str:
    ref = get(obj, "spec", "paramRef")
    if not isinstance(ref, dict):
        return "<unset>"
    name = ref.get("name") or "*"
    return f"{ref['namespace']}/{name}" if ref.get("namespace") else str(name)
