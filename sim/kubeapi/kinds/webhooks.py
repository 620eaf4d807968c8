"""``admissionregistration.k8s.io/v1`` Mutating- and ValidatingWebhookConfiguration."""

from __future__ import annotations

from typing import Any

from sim.kubeapi.machinery import errors, selectors
from sim.kubeapi.machinery.errors import FieldError
from sim.kubeapi.storage import columns
from sim.kubeapi.storage.resources import Column, Obj, Strategy

SIDE_EFFECTS = ("None", "NoneOnDryRun")
FAILURE_POLICIES = ("Fail", "Ignore")
OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")


class WebhookConfigurationStrategy(Strategy):
    has_generation = True

    def __init__(self, *, mutating: bool) -> None:
        self.mutating = mutating

    def default(self, obj: Obj) -> None:
        for hook in obj.get("webhooks") or ():
            if not isinstance(hook, dict):
                continue
            hook.setdefault("failurePolicy", "Fail")
            hook.setdefault("matchPolicy", "Equivalent")
            hook.setdefault("namespaceSelector", {})
            hook.setdefault("objectSelector", {})
            hook.setdefault("timeoutSeconds", 10)
            if self.mutating:
                hook.setdefault("reinvocationPolicy", "Never")
            service = (hook.get("clientConfig") or {}).get("service")
            if isinstance(service, dict):
                service.setdefault("port", 443)
            for rule in hook.get("rules") or ():
                if isinstance(rule, dict):
                    rule.setdefault("scope", "*")

    def validate(self, obj: Obj) -> list[FieldError]:
        out: list[FieldError] = []
        seen: set[str] = set()
        for i, hook in enumerate(obj.get("webhooks") or ()):
            out.extend(self._validate_hook(hook, f"webhooks[{i}]", seen))
        return out

    def _validate_hook(self, hook: Any, path: str, seen: set[str]) -> list[FieldError]:
        if not isinstance(hook, dict):
            return [errors.type_invalid(path, hook, "must be an object")]
        out: list[FieldError] = []
        name = hook.get("name")
        if not name:
            out.append(errors.required(f"{path}.name"))
        else:
            if len(name.split(".")) < 3:
                out.append(
                    errors.invalid(
                        f"{path}.name",
                        name,
                        "should be a domain with at least three segments separated by dots",
                    )
                )
            if name in seen:
                out.append(errors.duplicate(f"{path}.name", name))
            seen.add(name)
        client = hook.get("clientConfig") or {}
        url, service = client.get("url"), client.get("service")
        if bool(url) == bool(service):
            out.append(
                errors.required(f"{path}.clientConfig", "exactly one of url or service is required")
            )
        if url and not str(url).startswith("https://"):
            out.append(
                errors.invalid(
                    f"{path}.clientConfig.url", url, "'https' is the only allowed URL scheme"
                )
            )
        if isinstance(service, dict):
            for key in ("namespace", "name"):
                if not service.get(key):
                    out.append(errors.required(f"{path}.clientConfig.service.{key}"))
        side_effects = hook.get("sideEffects")
        if side_effects is None:
            out.append(
                errors.required(f"{path}.sideEffects", 'must specify one of "None", "NoneOnDryRun"')
            )
        elif side_effects not in SIDE_EFFECTS:
            out.append(errors.not_supported(f"{path}.sideEffects", side_effects, SIDE_EFFECTS))
        versions = hook.get("admissionReviewVersions")
        if not versions:
            out.append(
                errors.required(
                    f"{path}.admissionReviewVersions", "must specify one of v1, v1beta1"
                )
            )
        elif "v1" not in versions and "v1beta1" not in versions:
            out.append(
                errors.invalid(
                    f"{path}.admissionReviewVersions",
                    versions,
                    "must include at least one of v1, v1beta1",
                )
            )
        policy = hook.get("failurePolicy")
        if policy not in FAILURE_POLICIES:
            out.append(errors.not_supported(f"{path}.failurePolicy", policy, FAILURE_POLICIES))
        timeout = hook.get("timeoutSeconds")
        if not isinstance(timeout, int) or not 1 <= timeout <= 30:
            out.append(
                errors.invalid(
                    f"{path}.timeoutSeconds",
                    timeout,
                    "the timeout value must be between 1 and 30 seconds",
                )
            )
        for j, rule in enumerate(hook.get("rules") or ()):
            for op in rule.get("operations") or ():
                if op not in OPERATIONS:
                    out.append(
                        errors.not_supported(f"{path}.rules[{j}].operations", op, OPERATIONS)
                    )
        for key in ("namespaceSelector", "objectSelector"):
            out.extend(selectors.validate_label_selector_object(hook.get(key), f"{path}.{key}"))
        for j, cond in enumerate(hook.get("matchConditions") or ()):
            for field in ("name", "expression"):
                if not (cond or {}).get(field):
                    out.append(errors.required(f"{path}.matchConditions[{j}].{field}"))
        return out

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "Webhooks",
                "integer",
                lambda o: len(o.get("webhooks") or []),
                "",
                "Number of webhooks",
            ),
            columns.age_column(),
        ]
