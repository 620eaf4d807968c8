"""Kubeconfig files merged as client-go merges them: which files, which entry of a name wins,
where current-context comes from, and relative paths made absolute against their own file.
tests/integration/cli/test_cluster_finding.py checks the same files against real kubectl."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.kube.kubeconfig import (
    ClusterSource,
    KubeconfigError,
    context_of,
    env_paths,
    home_kubeconfig,
    in_cluster_missing,
    in_cluster_possible,
    load,
    load_for,
    merge,
    read_document,
)


def cluster(name: str, server: str) -> dict[str, Any]:
    return {"name": name, "cluster": {"server": server}}


def context(name: str, cluster_name: str, **extra: str) -> dict[str, Any]:
    return {"name": name, "context": {"cluster": cluster_name, "user": "u", **extra}}


def write(path: Path, **document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", **document}))
    return path


def test_the_first_file_that_names_an_entry_wins_it_whole() -> None:
    first = {
        "clusters": [cluster("shared", "https://a")],
        "users": [{"name": "u", "user": {"token": "a"}}],
    }
    second = {
        "clusters": [
            {
                "name": "shared",
                "cluster": {"server": "https://b", "insecure-skip-tls-verify": True},
            },
            cluster("own", "https://c"),
        ],
        "users": [{"name": "u", "user": {"token": "b", "username": "x"}}],
    }
    merged = merge([first, second])
    assert merged["clusters"] == [cluster("shared", "https://a"), cluster("own", "https://c")]
    # Not a field-by-field merge: the second file's extra fields of "u" are dropped too.
    assert merged["users"] == [{"name": "u", "user": {"token": "a"}}]


def test_current_context_and_preferences_come_from_the_first_file_that_sets_them() -> None:
    merged = merge(
        [
            {"contexts": [context("a", "shared")], "preferences": {}},
            {"current-context": "b", "preferences": {"colors": True}},
            {"current-context": "c", "preferences": {"colors": False, "extensions": []}},
        ]
    )
    assert merged["current-context"] == "b"
    assert merged["preferences"] == {"colors": True}
    assert merge([{"contexts": [context("a", "x")]}]).get("current-context") is None


def test_kubeconfig_paths_are_split_and_deduplicated_and_home_is_found() -> None:
    listed = os.pathsep.join(["/a", "", "/b", "/a"])
    assert env_paths(listed) == [Path("/a"), Path("/b")]
    assert home_kubeconfig({"HOME": "/home/u"}) == Path("/home/u/.kube/config")
    assert home_kubeconfig({}) == Path.home() / ".kube" / "config"


def test_relative_paths_are_taken_from_the_file_that_names_them(tmp_path: Path) -> None:
    path = write(
        tmp_path / "conf" / "config",
        clusters=[
            {"name": "c", "cluster": {"server": "https://x", "certificate-authority": "ca.crt"}}
        ],
        users=[
            {
                "name": "u",
                "user": {
                    "client-certificate": "certs/u.crt",
                    "client-key": "/abs/u.key",
                    "tokenFile": "../token",
                },
            },
            {"name": "plugin", "user": {"exec": {"command": "bin/login", "apiVersion": "v1"}}},
            {"name": "on-path", "user": {"exec": {"command": "gke-auth", "apiVersion": "v1"}}},
        ],
    )
    document = read_document(path)
    base = path.parent.absolute()
    assert document["clusters"][0]["cluster"]["certificate-authority"] == str(base / "ca.crt")
    user = document["users"][0]["user"]
    assert user["client-certificate"] == str(base / "certs/u.crt")
    assert user["client-key"] == "/abs/u.key"
    assert user["tokenFile"] == str(base / "../token")
    assert document["users"][1]["user"]["exec"]["command"] == str(base / "bin/login")
    assert document["users"][2]["user"]["exec"]["command"] == "gke-auth"  # looked up on PATH


def test_missing_files_are_skipped_and_broken_ones_named(tmp_path: Path) -> None:
    good = write(
        tmp_path / "good", clusters=[cluster("c", "https://x")], contexts=[context("x", "c")]
    )
    merged = load([tmp_path / "missing", good])
    assert [entry["name"] for entry in merged["clusters"]] == ["c"]
    (tmp_path / "empty").write_text("")
    assert load([tmp_path / "empty"])["clusters"] == []
    broken = tmp_path / "broken"
    broken.write_text("clusters: {not: a list}\n")
    with pytest.raises(KubeconfigError, match=f"kubeconfig {broken}: clusters is not a list"):
        load([broken])
    (tmp_path / "text").write_text("just words")
    with pytest.raises(KubeconfigError, match="is not a mapping"):
        load([tmp_path / "text"])


def test_a_context_that_is_not_there_is_named_with_those_that_are(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config",
        clusters=[cluster("c", "https://x")],
        contexts=[context("one", "c", namespace="ml"), context("two", "c")],
    )
    source = ClusterSource((path,), "--kubeconfig")
    with pytest.raises(KubeconfigError, match=r"sets no current-context: name one .*one, two"):
        load_for(source)
    with pytest.raises(KubeconfigError, match="context 'three' is not in kubeconfig"):
        load_for(ClusterSource((path,), "--kubeconfig", context="three"))
    config = load_for(ClusterSource((path,), "--kubeconfig", context="one"))
    assert context_of(config, "one") == {"cluster": "c", "user": "u", "namespace": "ml"}
    with pytest.raises(KubeconfigError, match="no such file"):
        load_for(ClusterSource((tmp_path / "nothing",), "--kubeconfig"))


def test_in_cluster_needs_both_variables_and_the_token(tmp_path: Path) -> None:
    variables = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert not in_cluster_possible(variables, service_account_dir=tmp_path)
    assert in_cluster_missing(variables, service_account_dir=tmp_path) == [str(tmp_path / "token")]
    (tmp_path / "token").write_text("t")
    assert in_cluster_possible(variables, service_account_dir=tmp_path)
    assert in_cluster_missing({}, service_account_dir=tmp_path) == [
        "KUBERNETES_SERVICE_HOST",
        "KUBERNETES_SERVICE_PORT",
    ]
