"""managedFields bookkeeping and server-side apply."""

from __future__ import annotations

from typing import Any

import pytest

from sim.kubeapi.machinery import errors
from sim.kubeapi.validation import builtin_schemas
from sim.kubeapi.validation.shape import Shape
from sim.kubeapi.writes.managedfields import (
    changed_paths,
    from_fields_v1,
    leaf_paths,
    read_entries,
    record_update,
    render_path,
    to_fields_v1,
)
from sim.kubeapi.writes.server_side_apply import server_side_apply

DEPLOY = Shape(builtin_schemas.load().schema("apps", "v1", "Deployment"))


def _deployment(**spec: Any) -> dict[str, Any]:
    base = {
        "replicas": 1,
        "template": {"spec": {"containers": [{"name": "a", "image": "a:1"}]}},
    }
    base.update(spec)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "labels": {"x": "1"}},
        "spec": base,
    }


def test_leaf_paths_name_list_elements_by_key() -> None:
    paths = leaf_paths(_deployment(), DEPLOY)
    key = 'k:{"name":"a"}'
    assert ("f:spec", "f:template", "f:spec", "f:containers", key, ".") in paths
    assert ("f:spec", "f:template", "f:spec", "f:containers", key, "f:image") in paths
    assert ("f:metadata", "f:labels", "f:x") in paths
    assert ("f:metadata", "f:name") not in paths
    assert from_fields_v1(to_fields_v1(paths)) == paths


def test_changed_paths() -> None:
    old = _deployment()
    new = _deployment(replicas=3)
    new["metadata"]["labels"] = {"y": "1"}
    changed, removed = changed_paths(old, new, DEPLOY)
    assert changed == {("f:spec", "f:replicas"), ("f:metadata", "f:labels", "f:y")}
    assert removed == {("f:metadata", "f:labels", "f:x")}


def test_render_path() -> None:
    assert (
        render_path(("f:spec", "f:containers", 'k:{"name":"a"}', "f:image"))
        == '.spec.containers[name="a"].image'
    )


def test_record_update_moves_ownership() -> None:
    obj = _deployment()
    record_update(
        old=None,
        new=obj,
        entries=[],
        manager="creator",
        api_version="apps/v1",
        subresource="",
        shape=DEPLOY,
    )
    updated = _deployment(replicas=2)
    updated["metadata"]["managedFields"] = obj["metadata"]["managedFields"]
    record_update(
        old=obj,
        new=updated,
        entries=read_entries(updated),
        manager="scaler",
        api_version="apps/v1",
        subresource="",
        shape=DEPLOY,
    )
    owners = {e.manager: e.paths for e in read_entries(updated)}
    assert owners["scaler"] == {("f:spec", "f:replicas")}
    assert ("f:spec", "f:replicas") not in owners["creator"]


def test_apply_conflicts_force_and_removal() -> None:
    first = server_side_apply(
        live=None,
        applied=_deployment(),
        manager="a",
        api_version="apps/v1",
        force=False,
        subresource="",
        shape=DEPLOY,
    )
    changed = _deployment(replicas=4)
    del changed["metadata"]["labels"]
    with pytest.raises(errors.ApiError) as exc:
        server_side_apply(
            live=first,
            applied=changed,
            manager="b",
            api_version="apps/v1",
            force=False,
            subresource="",
            shape=DEPLOY,
        )
    assert exc.value.code == 409
    assert (
        exc.value.message
        == 'Apply failed with 1 conflict: conflict with "a" using apps/v1: .spec.replicas'
    )
    forced = server_side_apply(
        live=first,
        applied=changed,
        manager="b",
        api_version="apps/v1",
        force=True,
        subresource="",
        shape=DEPLOY,
    )
    assert forced["spec"]["replicas"] == 4
    # a stops applying its labels: removed, since nobody else owns them.
    smaller = _deployment()
    del smaller["metadata"]["labels"]
    del smaller["spec"]["replicas"]
    result = server_side_apply(
        live=forced,
        applied=smaller,
        manager="a",
        api_version="apps/v1",
        force=False,
        subresource="",
        shape=DEPLOY,
    )
    assert "labels" not in result["metadata"] or result["metadata"]["labels"] == {}
    assert result["spec"]["replicas"] == 4


def test_apply_shares_fields_with_equal_values() -> None:
    first = server_side_apply(
        live=None,
        applied=_deployment(),
        manager="a",
        api_version="apps/v1",
        force=False,
        subresource="",
        shape=DEPLOY,
    )
    same = server_side_apply(
        live=first,
        applied=_deployment(),
        manager="b",
        api_version="apps/v1",
        force=False,
        subresource="",
        shape=DEPLOY,
    )
    owners = {e.manager: e.paths for e in read_entries(same)}
    assert ("f:spec", "f:replicas") in owners["a"] and ("f:spec", "f:replicas") in owners["b"]
