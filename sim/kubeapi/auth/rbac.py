"""The RBAC authorizer: Roles, ClusterRoles and their bindings decide each request.

As on the real server, ``system:masters`` passes everything; otherwise a request is allowed
when a ClusterRoleBinding, or a RoleBinding in the request's namespace, names the user, one
of its groups, or (for ``system:serviceaccount:<ns>:<name>``) its ServiceAccount, and the
role it refers to has a rule that covers the request (``rules``). A binding to a role that
does not exist grants nothing and its absence becomes the denial's reason.

For speed, bindings are indexed by subject and role rules decoded once; both are rebuilt
after any change to an RBAC object, and decisions are cached per user and request until
then (a commit listener on the store drops them).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from sim.kubeapi.auth import identity, rules
from sim.kubeapi.auth.attributes import Attributes
from sim.kubeapi.storage.store import Event, Store

GROUP = "rbac.authorization.k8s.io"
ROLES = f"{GROUP}/roles"
CLUSTER_ROLES = f"{GROUP}/clusterroles"
ROLE_BINDINGS = f"{GROUP}/rolebindings"
CLUSTER_ROLE_BINDINGS = f"{GROUP}/clusterrolebindings"
RBAC_STORAGES = frozenset({ROLES, CLUSTER_ROLES, ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS})
CACHE_LIMIT = 65_536

SubjectKey = tuple[str, str]
RoleKey = tuple[str, str, str]
"""(kind, namespace, name): ("ClusterRole", "", "view") or ("Role", "ns", "reader")."""


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Grant:
    """One binding of a subject to a role: where it applies ("" = every namespace), and the
    words the real authorizer uses for it in an allowing reason."""

    namespace: str
    role: RoleKey
    source: str


class Index:
    """Bindings by subject and the rules of every role, decoded from one store state."""

    def __init__(self, store: Store) -> None:
        self.grants: dict[SubjectKey, list[Grant]] = defaultdict(list)
        self.roles: dict[RoleKey, list[Any]] = {}
        for storage, kind in ((ROLES, "Role"), (CLUSTER_ROLES, "ClusterRole")):
            for entry in _entries(store, storage):
                self.roles[(kind, entry.namespace, entry.name)] = list(
                    entry.obj().get("rules") or ()
                )
        for storage in (ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS):
            for entry in _entries(store, storage):
                self._add_binding(entry.namespace, entry.obj())

    def _add_binding(self, namespace: str, binding: dict[str, Any]) -> None:
        ref = binding.get("roleRef") or {}
        kind = str(ref.get("kind") or "")
        role: RoleKey = (kind, namespace if kind == "Role" else "", str(ref.get("name") or ""))
        name = str((binding.get("metadata") or {}).get("name") or "")
        described = (
            f'RoleBinding "{name}/{namespace}"' if namespace else f'ClusterRoleBinding "{name}"'
        )
        for subject in binding.get("subjects") or ():
            key = subject_key(subject, namespace)
            if key is None:
                continue
            source = f'{described} of {role[0]} "{role[2]}" to {_describe(subject, namespace)}'
            self.grants[key].append(Grant(namespace=namespace, role=role, source=source))


def subject_key(subject: Any, binding_namespace: str) -> SubjectKey | None:
    """A binding subject as the key users are looked up by; SAs become their user name."""
    if not isinstance(subject, dict):
        return None
    kind, name = subject.get("kind"), str(subject.get("name") or "")
    if kind == "ServiceAccount":
        namespace = str(subject.get("namespace") or binding_namespace)
        return ("User", identity.service_account_user(namespace, name))
    if kind in ("User", "Group"):
        return (str(kind), name)
    return None


def _describe(subject: dict[str, Any], binding_namespace: str) -> str:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "ServiceAccount":
        return f'ServiceAccount "{name}/{subject.get("namespace") or binding_namespace}"'
    return f'{kind} "{name}"'


def _entries(store: Store, storage: str) -> list[Any]:
    bucket = store.buckets.get(storage)
    return list(bucket.entries()) if bucket is not None else []


def _missing(role: RoleKey) -> str:
    kind, _, name = role
    return f'{kind.lower()}.{GROUP} "{name}" not found'


def _reason(problems: list[str]) -> str:
    """The RBAC authorizer's reason: its lookup errors, aggregated the way Go prints them."""
    unique = list(dict.fromkeys(problems))
    if not unique:
        return ""
    joined = unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"
    return f"RBAC: {joined}"


class RbacAuthorizer:
    """Decides requests from the RBAC objects in ``store``; see the module docstring."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._index: Index | None = None
        self._cache: dict[tuple[Any, ...], Decision] = {}
        store.add_listener(self._on_commit)

    def _on_commit(self, storage: str, event: Event) -> None:
        if storage in RBAC_STORAGES:
            self._index = None
            self._cache.clear()

    def authorize(self, attrs: Attributes) -> Decision:
        if attrs.user.is_master:
            return Decision(True)
        user = attrs.user
        key = (
            user.name,
            user.groups,
            attrs.verb,
            attrs.resource_request,
            attrs.group,
            attrs.resource,
            attrs.subresource,
            attrs.namespace,
            attrs.name,
            attrs.path,
        )
        found = self._cache.get(key)
        if found is None:
            found = self._decide(attrs)
            if len(self._cache) >= CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = found
        return found

    def _decide(self, attrs: Attributes) -> Decision:
        index = self._index
        if index is None:
            index = self._index = Index(self.store)
        keys = [("User", attrs.user.name), *(("Group", g) for g in attrs.user.groups)]
        problems: list[str] = []
        for key in keys:
            for grant in index.grants.get(key, ()):
                if grant.namespace and grant.namespace != attrs.namespace:
                    continue
                role_rules = index.roles.get(grant.role)
                if role_rules is None:
                    problems.append(_missing(grant.role))
                    continue
                if rules.any_allows(role_rules, attrs):
                    return Decision(True, f"RBAC: allowed by {grant.source}")
        return Decision(False, _reason(problems))
