"""``rbac.authorization.k8s.io/v1``: Role, ClusterRole, RoleBinding, ClusterRoleBinding.

Stored and validated like the real server (rules need verbs and either resources or
non-resource URLs, role references and subjects are checked, ``roleRef`` is immutable); with
``ServerConfig.enforce_auth`` the RBAC authorizer (``auth/rbac.py``) decides by them.
ClusterRole aggregation is accepted but not computed.
"""

from __future__ import annotations

from typing import Any

from sim.kubeapi.kinds.common import ensure, get, text
from sim.kubeapi.machinery import errors, names, selectors
from sim.kubeapi.machinery.errors import FieldError
from sim.kubeapi.storage import columns
from sim.kubeapi.storage.resources import Column, Obj, Strategy

GROUP = "rbac.authorization.k8s.io"
SUBJECT_KINDS = ("ServiceAccount", "User", "Group")


def _validate_rule(rule: Any, path: str, *, namespaced: bool) -> list[FieldError]:
    if not isinstance(rule, dict):
        return [errors.type_invalid(path, rule, "must be an object")]
    out: list[FieldError] = []
    if not rule.get("verbs"):
        out.append(errors.required(f"{path}.verbs", "verbs must contain at least one value"))
    urls = rule.get("nonResourceURLs")
    if urls:
        if namespaced:
            out.append(
                errors.invalid(
                    f"{path}.nonResourceURLs",
                    urls,
                    "namespaced rules cannot apply to non-resource URLs",
                )
            )
        if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
            out.append(
                errors.invalid(
                    f"{path}.nonResourceURLs",
                    urls,
                    "rules cannot apply to both regular resources and non-resource URLs",
                )
            )
        return out
    if not rule.get("apiGroups"):
        out.append(
            errors.required(
                f"{path}.apiGroups", "resource rules must supply at least one api group"
            )
        )
    if not rule.get("resources"):
        out.append(
            errors.required(f"{path}.resources", "resource rules must supply at least one resource")
        )
    return out


def _validate_rules(obj: Obj, *, namespaced: bool) -> list[FieldError]:
    out: list[FieldError] = []
    for i, rule in enumerate(obj.get("rules") or ()):
        out.extend(_validate_rule(rule, f"rules[{i}]", namespaced=namespaced))
    return out


class RoleStrategy(Strategy):
    name_rule = staticmethod(names.path_segment_name)

    def __init__(self, *, cluster: bool) -> None:
        self.cluster = cluster

    def validate(self, obj: Obj) -> list[FieldError]:
        out = _validate_rules(obj, namespaced=not self.cluster)
        aggregation = obj.get("aggregationRule")
        if self.cluster and aggregation is not None:
            chosen = (
                aggregation.get("clusterRoleSelectors") if isinstance(aggregation, dict) else None
            )
            if not chosen:
                out.append(
                    errors.required(
                        "aggregationRule.clusterRoleSelectors",
                        "at least one clusterRoleSelector required if aggregationRule is non-nil",
                    )
                )
            for i, selector in enumerate(chosen or ()):
                out.extend(
                    selectors.validate_label_selector_object(
                        selector, f"aggregationRule.clusterRoleSelectors[{i}]"
                    )
                )
        return out


# -- bindings -----------------------------------------------------------------------------------


def _default_subject(subject: Any) -> None:
    if (
        isinstance(subject, dict)
        and not subject.get("apiGroup")
        and subject.get("kind") in ("User", "Group")
    ):
        subject["apiGroup"] = GROUP


def _validate_subject(subject: Any, path: str, *, namespaced: bool) -> list[FieldError]:
    if not isinstance(subject, dict):
        return [errors.type_invalid(path, subject, "must be an object")]
    out: list[FieldError] = []
    name = subject.get("name") or ""
    if not name:
        out.append(errors.required(f"{path}.name"))
    kind = subject.get("kind")
    group = subject.get("apiGroup") or ""
    if kind == "ServiceAccount":
        if name:
            for problem in names.dns1123_subdomain(name):
                out.append(errors.invalid(f"{path}.name", name, problem))
        if group:
            out.append(errors.not_supported(f"{path}.apiGroup", group, ("",)))
        if not namespaced and not subject.get("namespace"):
            out.append(errors.required(f"{path}.namespace"))
    elif kind in ("User", "Group"):
        if group != GROUP:
            out.append(errors.not_supported(f"{path}.apiGroup", group, (GROUP,)))
    else:
        out.append(errors.not_supported(f"{path}.kind", kind, SUBJECT_KINDS))
    return out


def _role(o: Obj) -> str:
    return f"{text(o, 'roleRef', 'kind')}/{text(o, 'roleRef', 'name')}"


def _subjects(kind: str) -> Any:
    def cell(o: Obj) -> str:
        shown = []
        for subject in o.get("subjects") or ():
            if not isinstance(subject, dict) or subject.get("kind") != kind:
                continue
            if kind == "ServiceAccount":
                shown.append(f"{subject.get('namespace', '')}:{subject.get('name', '')}")
            else:
                shown.append(str(subject.get("name", "")))
        return ", ".join(shown)

    return cell


class BindingStrategy(Strategy):
    name_rule = staticmethod(names.path_segment_name)

    def __init__(self, *, cluster: bool) -> None:
        self.cluster = cluster

    def default(self, obj: Obj) -> None:
        ref = ensure(obj, "roleRef")
        if not ref.get("apiGroup"):
            ref["apiGroup"] = GROUP
        for subject in obj.get("subjects") or ():
            _default_subject(subject)

    def validate(self, obj: Obj) -> list[FieldError]:
        out: list[FieldError] = []
        ref = obj.get("roleRef") or {}
        group = ref.get("apiGroup") or ""
        if group != GROUP:
            out.append(errors.not_supported("roleRef.apiGroup", group, (GROUP,)))
        kinds = ("ClusterRole",) if self.cluster else ("Role", "ClusterRole")
        kind = ref.get("kind") or ""
        if kind not in kinds:
            out.append(errors.not_supported("roleRef.kind", kind, kinds))
        name = ref.get("name") or ""
        if not name:
            out.append(errors.required("roleRef.name"))
        else:
            for problem in names.path_segment_name(name):
                out.append(errors.invalid("roleRef.name", name, problem))
        for i, subject in enumerate(obj.get("subjects") or ()):
            out.extend(_validate_subject(subject, f"subjects[{i}]", namespaced=not self.cluster))
        return out

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        out = self.validate(new)
        if get(new, "roleRef") != get(old, "roleRef"):
            out.append(errors.invalid("roleRef", get(new, "roleRef"), "cannot change roleRef"))
        return out

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column("Role", "string", _role, "", "The role the binding grants."),
            columns.age_column(),
            Column("Users", "string", _subjects("User"), "", "Users in the binding", 1),
            Column("Groups", "string", _subjects("Group"), "", "Groups in the binding", 1),
            Column(
                "ServiceAccounts",
                "string",
                _subjects("ServiceAccount"),
                "",
                "ServiceAccounts in the binding",
                1,
            ),
        ]
