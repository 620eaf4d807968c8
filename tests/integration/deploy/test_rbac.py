"""Each ServiceAccount is granted exactly what its program's code calls, and nothing wider.

Three things agree: the table below (which docs/deploy.md shows), the RBAC the overlays render,
and the access read from each program's source (``access.scan``). A new API call in a service
fails this test until the RBAC and the table are updated with it.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from tests.integration.deploy.access import ROOT, Access, scan
from tests.integration.deploy.conftest import NAMESPACE, OVERLAYS, Manifest

CORE, APPS, BATCH, DRA = "", "apps", "batch", "resource.k8s.io"
CD, CDO, LEASES = "resource.nvidia.com", "cdo.dev", "coordination.k8s.io"
WEBHOOKS = "admissionregistration.k8s.io"
CRDS = "apiextensions.k8s.io"
AUTHN = "authentication.k8s.io"
AUTHZ = "authorization.k8s.io"
CERTS = "certificates.k8s.io"
METRICS_REVIEWS = (
    (AUTHN, "tokenreviews", "create"),
    (AUTHZ, "subjectaccessreviews", "create"),
)
"""The runtime's, in every service: who a /metrics caller is and whether it may get /metrics
(CDO_METRICS_AUTH; ClusterRole cdo-metrics-auth)."""


def grants(*rows: tuple[str, str, str]) -> frozenset[Access]:
    return frozenset(
        Access(group, resource, verb) for group, resource, verbs in rows for verb in verbs.split()
    )


EXPECTED: dict[str, frozenset[Access]] = {
    "cdo-domain-controller": grants(
        (CD, "computedomains", "list watch patch"),
        (CD, "computedomains/status", "patch"),
        (CDO, "placements", "list watch"),
        (CORE, "pods", "list watch"),
        (CORE, "nodes", "list watch"),
        (DRA, "resourceclaimtemplates", "get list watch create patch delete"),
        (DRA, "deviceclasses", "get list watch create patch"),
        (CORE, "events", "create patch"),
        (LEASES, "leases", "get create update"),
        # The IMEX signer (imexsigner.py): requests, verdicts, certificates, the CA and the
        # revocations (Role, by name); approve and sign on signers/cdo.dev/imex.
        (CERTS, "certificatesigningrequests", "get list watch"),
        (CERTS, "certificatesigningrequests/approval", "update"),
        (CERTS, "certificatesigningrequests/status", "update"),
        (CERTS, "signers", "approve sign"),
        (CORE, "secrets", "get"),
        (CORE, "configmaps", "get"),
        *METRICS_REVIEWS,
    ),
    "cdo-clique-allocator": grants(
        (CDO, "placements", "get list watch create update patch delete"),
        (CD, "computedomains", "list watch"),
        (DRA, "resourceclaimtemplates", "get list watch"),
        (DRA, "resourceslices", "list watch"),
        (DRA, "resourceclaims", "list watch"),
        (DRA, "devicetaintrules", "list watch"),
        (DRA, "deviceclasses", "get"),
        (CORE, "pods", "list watch patch"),
        (CORE, "pods/status", "patch"),
        (CORE, "pods/eviction", "create"),
        (CORE, "nodes", "list watch patch"),
        (APPS, "replicasets", "list watch"),
        (APPS, "statefulsets", "list watch"),
        (BATCH, "jobs", "list watch"),
        (CORE, "events", "create patch"),
        (LEASES, "leases", "get create update"),
        *METRICS_REVIEWS,
    ),
    "cdo-imex-agent": grants(
        (CORE, "nodes", "get list watch patch"),
        (CORE, "nodes/status", "patch"),
        (DRA, "resourceclaims", "get"),
        (CDO, "placements", "get list"),
        (DRA, "resourceslices", "list create update delete"),
        (CERTS, "certificatesigningrequests", "create get"),
        *METRICS_REVIEWS,
    ),
    "cdo-health-monitor": grants(
        (CORE, "nodes", "get list watch patch"),
        (CORE, "nodes/status", "patch"),
        (CORE, "events", "create patch"),
        (CORE, "pods/eviction", "create"),
        (DRA, "devicetaintrules", "list watch create patch delete"),
        (DRA, "resourceslices", "list watch"),
        *METRICS_REVIEWS,
    ),
    "cdo-bootstrap": grants(
        (CORE, "secrets", "get create patch"),
        (WEBHOOKS, "mutatingwebhookconfigurations", "get patch"),
        (WEBHOOKS, "validatingwebhookconfigurations", "get patch"),
        (CRDS, "customresourcedefinitions", "get patch"),
        (APPS, "statefulsets", "get patch"),
    ),
    # components/nats-auth-callout (prod): who a NATS client's token is, and the runtime's
    # metrics reviews; nothing else.
    "cdo-nats-auth": grants(*METRICS_REVIEWS),
}
NATS_AUTH_OVERLAYS = frozenset({"prod"})
"""The overlays with the nats-auth-callout component (and so the cdo-nats-auth account)."""

RUNTIME = ROOT / "shared" / "runtime" / "metricsaccess.py"
"""What the runtime calls in every service (its /metrics gate)."""
SOURCES = {
    "cdo-domain-controller": (ROOT / "services" / "domain_controller", RUNTIME),
    "cdo-clique-allocator": (ROOT / "services" / "clique_allocator", RUNTIME),
    "cdo-imex-agent": (ROOT / "services" / "imex_agent", RUNTIME),
    "cdo-health-monitor": (ROOT / "services" / "health_monitor", RUNTIME),
    "cdo-bootstrap": (ROOT / "deploy" / "kustomize" / "base" / "bootstrap" / "bootstrap.py",),
    "cdo-nats-auth": (ROOT / "services" / "nats_auth", RUNTIME),
}

NAMESPACED_ONLY = frozenset({"leases", "secrets"})
"""Granted by a Role in cdo's namespace, never cluster-wide."""


def rules_by_account(objs: Iterable[Manifest]) -> dict[str, list[tuple[str, dict[str, object]]]]:
    """Every rule bound to each ServiceAccount, with the kind of role that grants it."""
    objs = list(objs)
    roles = {
        (obj["kind"], obj["metadata"]["name"]): obj
        for obj in objs
        if obj["kind"] in ("Role", "ClusterRole")
    }
    bound: dict[str, list[tuple[str, dict[str, object]]]] = {}
    for binding in objs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ref = binding["roleRef"]
        role = roles[(ref["kind"], ref["name"])]
        scope = "namespace" if binding["kind"] == "RoleBinding" else "cluster"
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount"
            assert subject["namespace"] == NAMESPACE
            for rule in role["rules"]:
                bound.setdefault(subject["name"], []).append((scope, rule))
    return bound


def granted(rules: Iterable[tuple[str, dict[str, object]]]) -> frozenset[Access]:
    found: set[Access] = set()
    for _scope, rule in rules:
        groups = rule["apiGroups"]
        resources = rule["resources"]
        verbs = rule["verbs"]
        assert isinstance(groups, list) and isinstance(resources, list)
        assert isinstance(verbs, list)
        found.update(
            Access(group, resource, verb)
            for group in groups
            for resource in resources
            for verb in verbs
        )
    return frozenset(found)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_wildcards_and_no_escalation(overlays: dict[str, list[Manifest]], overlay: str) -> None:
    for obj in overlays[overlay]:
        if obj["kind"] not in ("Role", "ClusterRole"):
            continue
        assert "aggregationRule" not in obj
        for rule in obj["rules"]:
            if "nonResourceURLs" in rule:
                # The one non-resource grant: what a scraper of /metrics needs.
                assert obj["metadata"]["name"] == "cdo-metrics-reader"
                assert rule == {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
                continue
            for key in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[key], (obj["metadata"]["name"], key)
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])
            assert "serviceaccounts/token" not in rule["resources"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_account_gets_exactly_the_table(
    overlays: dict[str, list[Manifest]], overlay: str
) -> None:
    bound = rules_by_account(overlays[overlay])
    expected = set(EXPECTED)
    if overlay not in NATS_AUTH_OVERLAYS:
        expected.discard("cdo-nats-auth")
    assert sorted(bound) == sorted(expected)
    for account, rules in bound.items():
        assert granted(rules) == EXPECTED[account], account
        for scope, rule in rules:
            resources = rule["resources"]
            assert isinstance(resources, list)
            if NAMESPACED_ONLY & set(resources):
                assert scope == "namespace", (account, resources)


@pytest.mark.parametrize("account", sorted(EXPECTED))
def test_the_table_is_what_the_code_calls(account: str) -> None:
    found = scan(SOURCES[account])
    assert found.unexplained == []
    assert found.accesses == EXPECTED[account]


def test_leases_and_secrets_are_limited_by_name(overlays: dict[str, list[Manifest]]) -> None:
    """Where the API can check a name (not create, list or watch), the rule names it."""
    for account, rules in rules_by_account(overlays["prod"]).items():
        for _scope, rule in rules:
            resources = rule["resources"]
            verbs = rule["verbs"]
            assert isinstance(resources, list) and isinstance(verbs, list)
            sensitive = {
                "leases",
                "secrets",
                "mutatingwebhookconfigurations",
                "customresourcedefinitions",
                "statefulsets",
            } & set(resources)
            if sensitive and set(verbs) & {"get", "update", "patch"}:
                names = rule.get("resourceNames")
                assert isinstance(names, list) and names, (account, rule)
            if account == "cdo-domain-controller" and "leases" in resources:
                assert rule.get("resourceNames") in (None, ["cdo-domain-controller"])
