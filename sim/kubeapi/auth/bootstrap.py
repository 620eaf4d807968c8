"""The RBAC objects kube-apiserver creates at startup that the emulator needs.

``cluster-admin`` (everything, bound to ``system:masters``), ``system:discovery`` (discovery,
OpenAPI, health and version paths), ``system:basic-user`` (self reviews) for every
authenticated user, and ``system:public-info-viewer`` (health and version) also for
unauthenticated ones. The aggregated ``admin``/``edit``/``view`` roles and the controllers'
roles are not created.
"""

from __future__ import annotations

from typing import Any

from sim.kubeapi.auth.identity import AUTHENTICATED, MASTERS, UNAUTHENTICATED

API_VERSION = "rbac.authorization.k8s.io/v1"
HEALTH_URLS = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
DISCOVERY_URLS = [
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
]


def _metadata(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    }


def _role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterRole",
        "metadata": _metadata(name),
        "rules": rules,
    }


def _binding(name: str, *groups: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterRoleBinding",
        "metadata": _metadata(name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g} for g in groups
        ],
    }


def cluster_roles() -> list[dict[str, Any]]:
    return [
        _role(
            "cluster-admin",
            [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ],
        ),
        _role("system:discovery", [{"nonResourceURLs": DISCOVERY_URLS, "verbs": ["get"]}]),
        _role(
            "system:basic-user",
            [
                {
                    "apiGroups": ["authentication.k8s.io"],
                    "resources": ["selfsubjectreviews"],
                    "verbs": ["create"],
                },
                {
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"],
                },
            ],
        ),
        _role("system:public-info-viewer", [{"nonResourceURLs": HEALTH_URLS, "verbs": ["get"]}]),
    ]


def cluster_role_bindings() -> list[dict[str, Any]]:
    return [
        _binding("cluster-admin", MASTERS),
        _binding("system:discovery", AUTHENTICATED),
        _binding("system:basic-user", AUTHENTICATED),
        _binding("system:public-info-viewer", AUTHENTICATED, UNAUTHENTICATED),
    ]
