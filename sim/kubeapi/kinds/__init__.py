"""The built-in kinds the emulator serves, each with its per-kind rules."""

from __future__ import annotations

import dataclasses

from sim.kubeapi.kinds import (
    admissionpolicies,
    apiextensions,
    apps,
    certificates,
    core,
    cronjobs,
    devicetaints,
    discovery,
    dra,
    events,
    networking,
    policy,
    rbac,
    webhooks,
)
from sim.kubeapi.releases import Release
from sim.kubeapi.storage.resources import (
    ALL_VERBS,
    Converter,
    Registry,
    ResourceType,
    Strategy,
    version_priority,
)
from sim.kubeapi.validation import builtin_schemas


def _rt(
    group: str,
    version: str,
    plural: str,
    kind: str,
    strategy: Strategy,
    *,
    namespaced: bool = True,
    short: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    storage_version: str | None = None,
    storage: str | None = None,
    storage_group: str | None = None,
    extra_subresources: tuple[str, ...] = (),
    converter: Converter | None = None,
    verbs: tuple[str, ...] = ALL_VERBS,
) -> ResourceType:
    subresources = (("status",) if strategy.status_subresource else ()) + extra_subresources
    return ResourceType(
        group=group,
        version=version,
        plural=plural,
        singular=kind.lower(),
        kind=kind,
        namespaced=namespaced,
        strategy=strategy,
        storage=storage or (f"{group}/{plural}" if group else plural),
        storage_version=storage_version or version,
        storage_group=storage_group,
        short_names=short,
        categories=categories,
        verbs=verbs,
        subresources=subresources,
        converter=converter or Converter(),
    )


def register_builtins(registry: Registry, release: Release | None = None) -> None:
    """Add every built-in resource type ``release`` serves (the newest by default) to
    ``registry``."""
    release = release or Release.of()
    schemas = builtin_schemas.load(release.minor)
    namespace_verbs = tuple(v for v in ALL_VERBS if v != "deletecollection")
    pod = core.PodStrategy()
    event = core.EventStrategy()
    builtin = [
        _rt(
            "",
            "v1",
            "namespaces",
            "Namespace",
            core.NamespaceStrategy(),
            namespaced=False,
            short=("ns",),
            extra_subresources=("finalize",),
            verbs=namespace_verbs,
        ),
        _rt("", "v1", "nodes", "Node", core.NodeStrategy(), namespaced=False, short=("no",)),
        _rt(
            "",
            "v1",
            "pods",
            "Pod",
            pod,
            short=("po",),
            categories=("all",),
            extra_subresources=("binding", "eviction"),
        ),
        _rt("", "v1", "configmaps", "ConfigMap", core.ConfigMapStrategy(), short=("cm",)),
        _rt("", "v1", "secrets", "Secret", core.SecretStrategy()),
        _rt(
            "",
            "v1",
            "services",
            "Service",
            core.ServiceStrategy(),
            short=("svc",),
            categories=("all",),
        ),
        _rt(
            "",
            "v1",
            "serviceaccounts",
            "ServiceAccount",
            core.ServiceAccountStrategy(),
            short=("sa",),
            extra_subresources=("token",),
        ),
        _rt("", "v1", "events", "Event", event, short=("ev",)),
        _rt(
            "events.k8s.io",
            "v1",
            "events",
            "Event",
            event,
            short=("ev",),
            storage="events",
            storage_group="",
            storage_version="v1",
            converter=events.EVENTS_V1,
        ),
        _rt("coordination.k8s.io", "v1", "leases", "Lease", apps.LeaseStrategy()),
        _rt(
            "apps",
            "v1",
            "deployments",
            "Deployment",
            apps.DeploymentStrategy(),
            short=("deploy",),
            categories=("all",),
            extra_subresources=("scale",),
        ),
        _rt(
            "apps",
            "v1",
            "replicasets",
            "ReplicaSet",
            apps.ReplicaSetStrategy(),
            short=("rs",),
            categories=("all",),
            extra_subresources=("scale",),
        ),
        _rt(
            "apps",
            "v1",
            "daemonsets",
            "DaemonSet",
            apps.DaemonSetStrategy(),
            short=("ds",),
            categories=("all",),
        ),
        _rt(
            "apps",
            "v1",
            "statefulsets",
            "StatefulSet",
            apps.StatefulSetStrategy(),
            short=("sts",),
            categories=("all",),
            extra_subresources=("scale",),
        ),
        _rt("batch", "v1", "jobs", "Job", apps.JobStrategy(), categories=("all",)),
        _rt(
            "batch",
            "v1",
            "cronjobs",
            "CronJob",
            cronjobs.CronJobStrategy(),
            short=("cj",),
            categories=("all",),
        ),
        _rt("rbac.authorization.k8s.io", "v1", "roles", "Role", rbac.RoleStrategy(cluster=False)),
        _rt(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterroles",
            "ClusterRole",
            rbac.RoleStrategy(cluster=True),
            namespaced=False,
        ),
        _rt(
            "rbac.authorization.k8s.io",
            "v1",
            "rolebindings",
            "RoleBinding",
            rbac.BindingStrategy(cluster=False),
        ),
        _rt(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
            rbac.BindingStrategy(cluster=True),
            namespaced=False,
        ),
        _rt(
            "certificates.k8s.io",
            "v1",
            "certificatesigningrequests",
            "CertificateSigningRequest",
            certificates.CertificateSigningRequestStrategy(),
            namespaced=False,
            short=("csr",),
            extra_subresources=("approval",),
        ),
        _rt(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            policy.PodDisruptionBudgetStrategy(),
            short=("pdb",),
        ),
        _rt(
            "networking.k8s.io",
            "v1",
            "networkpolicies",
            "NetworkPolicy",
            networking.NetworkPolicyStrategy(),
            short=("netpol",),
        ),
        _rt(
            "discovery.k8s.io",
            "v1",
            "endpointslices",
            "EndpointSlice",
            discovery.EndpointSliceStrategy(),
        ),
        _rt(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            apiextensions.CRDStrategy(),
            namespaced=False,
            short=("crd", "crds"),
        ),
        _rt(
            "admissionregistration.k8s.io",
            "v1",
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
            webhooks.WebhookConfigurationStrategy(mutating=True),
            namespaced=False,
        ),
        _rt(
            "admissionregistration.k8s.io",
            "v1",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
            webhooks.WebhookConfigurationStrategy(mutating=False),
            namespaced=False,
        ),
        _rt(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicies",
            "ValidatingAdmissionPolicy",
            admissionpolicies.ValidatingAdmissionPolicyStrategy(),
            namespaced=False,
            categories=("api-extensions",),
        ),
        _rt(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicybindings",
            "ValidatingAdmissionPolicyBinding",
            admissionpolicies.ValidatingAdmissionPolicyBindingStrategy(),
            namespaced=False,
            categories=("api-extensions",),
        ),
    ]
    builtin.extend(_review_types())
    builtin.extend(_dra_types(release))
    for rt in builtin:
        registry.add(
            _with_schema(rt, schemas),
            preferred=rt.version == rt.storage_version and rt.group != "events.k8s.io",
        )
    registry.set_preferred("events.k8s.io", "v1")
    dra_versions = registry.versions(DRA)
    if dra_versions:
        registry.set_preferred(DRA, min(dra_versions, key=version_priority))


def _with_schema(rt: ResourceType, schemas: builtin_schemas.BuiltinSchemas) -> ResourceType:
    """The type with the published schema of its kind at the emulated release."""
    return dataclasses.replace(rt, schema=schemas.schema(rt.group, rt.version, rt.kind))


DRA = "resource.k8s.io"
SAME_SHAPE_AS_V1 = ("v1", "v1beta2", "v1alpha3")
"""DRA versions whose objects have v1's shape; the stored version is the first served one."""


def _dra_types(release: Release) -> list[ResourceType]:
    """The ``resource.k8s.io`` types the release serves (:mod:`sim.kubeapi.releases.apis`).

    Objects are stored in v1's shape whatever version is served; v1beta1 converts (see
    :mod:`sim.kubeapi.kinds.dra`), the others have v1's shape. Before 1.35 a DeviceTaintRule
    has no status (KEP-5055 added it)."""
    taint_rule = (
        devicetaints.DeviceTaintRuleStrategy()
        if release.minor >= devicetaints.STATUS_SINCE
        else devicetaints.StatuslessDeviceTaintRuleStrategy()
    )
    kinds: list[tuple[str, str, Strategy, bool, dict[str, Converter]]] = [
        ("deviceclasses", "DeviceClass", dra.DeviceClassStrategy(), False, {}),
        (
            "resourceclaims",
            "ResourceClaim",
            dra.ResourceClaimStrategy(),
            True,
            {"v1beta1": dra.CLAIM_V1BETA1},
        ),
        (
            "resourceclaimtemplates",
            "ResourceClaimTemplate",
            dra.ResourceClaimTemplateStrategy(),
            True,
            {"v1beta1": dra.TEMPLATE_V1BETA1},
        ),
        (
            "resourceslices",
            "ResourceSlice",
            dra.ResourceSliceStrategy(),
            False,
            {"v1beta1": dra.SLICE_V1BETA1},
        ),
        ("devicetaintrules", "DeviceTaintRule", taint_rule, False, {}),
    ]
    out: list[ResourceType] = []
    for plural, kind, strategy, namespaced, converters in kinds:
        versions = release.served_versions(DRA, plural)
        stored = next((v for v in SAME_SHAPE_AS_V1 if v in versions), "v1")
        out.extend(
            _rt(
                DRA,
                version,
                plural,
                kind,
                strategy,
                namespaced=namespaced,
                storage_version=stored,
                storage=f"{DRA}/{plural}",
                converter=converters.get(version),
            )
            for version in sorted(versions, key=version_priority)
        )
    return out


REVIEWS = (
    ("authentication.k8s.io", "tokenreviews", "TokenReview", False),
    ("authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview", False),
    ("authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview", False),
    ("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False),
    ("authorization.k8s.io", "localsubjectaccessreviews", "LocalSubjectAccessReview", True),
)
"""The create-only review APIs; nothing of them is stored (``http/access.py`` answers)."""


def _review_types() -> list[ResourceType]:
    return [
        _rt(group, "v1", plural, kind, Strategy(), namespaced=namespaced, verbs=("create",))
        for group, plural, kind, namespaced in REVIEWS
    ]
