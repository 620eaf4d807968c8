"""The parameter resources of a ValidatingAdmissionPolicy binding, found as kube-apiserver
finds them.

A policy with ``spec.paramKind`` (apiVersion and kind of any served resource, a custom one
included) is evaluated once per parameter its binding's ``spec.paramRef`` selects, with the
parameter as ``params``:

- ``name``: that one object; ``selector``: every object whose labels match (an empty selector
  matches all), ordered by namespace and name;
- for a namespaced kind, in ``paramRef.namespace``, or else in the namespace of the object
  being admitted (a request for a cluster-scoped object is then a configuration error);
  ``paramRef.namespace`` on a cluster-scoped kind is a configuration error;
- no parameter found: under ``parameterNotFoundAction: Deny`` a configuration error, under
  ``Allow`` the binding admits (nothing to evaluate);
- a policy with a ``paramKind`` whose binding has no ``paramRef`` is evaluated once with null
  ``params``; a ``paramRef`` of a policy without ``paramKind`` is ignored.

A configuration error is acted on by the policy's ``failurePolicy``, with the message
``failed to configure binding: <why>``. The real server reads parameters from an informer;
the emulator reads its store, so a parameter is seen from the moment it is written.
"""

from __future__ import annotations

from typing import Any

from sim.kubeapi.machinery import selectors
from sim.kubeapi.storage.resources import Obj, Registry
from sim.kubeapi.storage.store import Store

NO_PARAMS: list[Obj | None] = [None]
"""What a policy without parameters is evaluated with: one null ``params``."""


class ParamError(Exception):
    """The binding's parameters cannot be found: a configuration error of the binding."""


def _api_group_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def collect_params(
    *,
    param_kind: Any,
    param_ref: Any,
    namespace: str,
    registry: Registry,
    store: Store,
) -> list[Obj | None]:
    """The ``params`` each evaluation of one binding sees (raises ParamError)."""
    if not isinstance(param_kind, dict) or not param_kind:
        return NO_PARAMS
    if not isinstance(param_ref, dict) or not param_ref:
        return NO_PARAMS
    api_version = str(param_kind.get("apiVersion") or "")
    kind = str(param_kind.get("kind") or "")
    rt = registry.by_kind(*_api_group_version(api_version), kind)
    if rt is None:
        raise ParamError(
            f"paramKind kind `&ParamKind{{APIVersion:{api_version},Kind:{kind},}}` not known"
        )
    ref_namespace = str(param_ref.get("namespace") or "")
    if rt.namespaced:
        scope = ref_namespace or namespace
        if not scope:
            raise ParamError(
                "cannot use namespaced paramRef in policy binding that matches cluster-scoped "
                "resources"
            )
    elif ref_namespace:
        raise ParamError("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
    else:
        scope = ""
    bucket = store.bucket(rt.storage)
    name = param_ref.get("name")
    selector = param_ref.get("selector")
    params: list[Obj | None]
    if name:
        if selector is not None:
            raise ParamError("paramRef.name and paramRef.selector are mutually exclusive")
        entry = bucket.get(scope, str(name))
        params = [] if entry is None else [rt.from_storage(entry.obj())]
    elif selector is not None:
        wanted = selectors.from_label_selector_object(selector)
        params = []
        for entry in bucket.entries(scope if rt.namespaced else None):
            obj = entry.obj()
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if wanted.matches(labels):
                params.append(rt.from_storage(obj))
    else:
        raise ParamError("one of name or selector must be provided")
    if not params and param_ref.get("parameterNotFoundAction") == "Deny":
        raise ParamError("no params found for policy binding with `Deny` parameterNotFoundAction")
    return params
