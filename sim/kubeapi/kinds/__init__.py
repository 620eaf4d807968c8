"""The built-in kinds the emulator serves, each with its per-kind rules."""

from __future__ import annotations

from sim.kubeapi.kinds import (
    admissionpolicies,
    apiextensions,
    apps,
    core,
    cronjobs,
    devicetaints,
    dra,
    events,
    networking,
    policy,
    rbac,
    webhooks,
)
from sim.kubeapi.storage.resources import ALL_VERBS, Converter, Registry, ResourceType, Strategy
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
        schema=builtin_schemas.load().schema(group, version, kind),
        converter=converter or Converter(),
    )


def register_builtins(registry: Registry) -> None:
    """Add every built-in resource type to ``registry``."""
    namespace_verbs = tuple(v for v in ALL_VERBS if v != "deletecollection")
    pod = core.PodStrategy()
    event = core.EventStrategy()
    claim = dra.ResourceClaimStrategy()
    template = dra.ResourceClaimTemplateStrategy()
    device_class = dra.DeviceClassStrategy()
    slice_ = dra.ResourceSliceStrategy()
    taint_rule = devicetaints.DeviceTaintRuleStrategy()
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
        _rt(
            "resource.k8s.io", "v1", "deviceclasses", "DeviceClass", device_class, namespaced=False
        ),
        _rt("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", claim),
        _rt("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", template),
        _rt("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", slice_, namespaced=False),
        _rt(
            "resource.k8s.io",
            "v1",
            "devicetaintrules",
            "DeviceTaintRule",
            taint_rule,
            namespaced=False,
        ),
        _rt(
            "resource.k8s.io",
            "v1beta2",
            "devicetaintrules",
            "DeviceTaintRule",
            taint_rule,
            namespaced=False,
            storage_version="v1",
        ),
        _rt(
            "resource.k8s.io",
            "v1beta1",
            "deviceclasses",
            "DeviceClass",
            device_class,
            namespaced=False,
            storage_version="v1",
        ),
        _rt(
            "resource.k8s.io",
            "v1beta1",
            "resourceclaims",
            "ResourceClaim",
            claim,
            storage_version="v1",
            converter=dra.CLAIM_V1BETA1,
        ),
        _rt(
            "resource.k8s.io",
            "v1beta1",
            "resourceclaimtemplates",
            "ResourceClaimTemplate",
            template,
            storage_version="v1",
            converter=dra.TEMPLATE_V1BETA1,
        ),
        _rt(
            "resource.k8s.io",
            "v1beta1",
            "resourceslices",
            "ResourceSlice",
            slice_,
            namespaced=False,
            storage_version="v1",
            converter=dra.SLICE_V1BETA1,
        ),
    ]
    builtin.extend(_review_types())
    for rt in builtin:
        registry.add(rt, preferred=rt.version == rt.storage_version and rt.group != "events.k8s.io")
    registry.set_preferred("resource.k8s.io", "v1")
    registry.set_preferred("events.k8s.io", "v1")


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
