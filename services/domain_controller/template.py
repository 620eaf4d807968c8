"""The domain's ResourceClaimTemplate and the channel DeviceClass: desired shape and ownership.

The template (named by ``spec.channel.resourceClaimTemplate.name``, in the domain's namespace)::

    metadata:
      labels: {cdo.dev/compute-domain: <domain>, cdo.dev/compute-domain-uid: <uid>}
      ownerReferences: [{kind: ComputeDomain, name: <domain>, uid: <uid>, controller: true,
                         blockOwnerDeletion: true}]
    spec:
      metadata:
        labels: {the same two}        # copied onto every claim made from the template
      spec:
        devices:
          requests:
          - name: channel
            exactly: {deviceClassName: compute-domain-channel.cdo.dev,
                      allocationMode: ExactCount, count: 1}

One attachment device per claim: the scheduler picks one on the pod's node, and the IMEX agent
maps the claim (by its labels) to the domain and so to the domain's channel.

Ownership decides what the controller may do with a template of that name:

- nothing there (``missing``): create it;
- controlled by this domain, by owner uid (``ours``): repair labels and owner reference;
  recreate it if its spec drifted (a template's spec is immutable);
- controlled by a ComputeDomain that no longer exists (``stale``): delete it, with a uid
  precondition, and create our own;
- anything else, another live domain's or a user's (``conflict``): never touch it; condition
  ``Ready=False, TemplateNameConflict`` and a Warning Event;
- ours or stale but already being deleted (``terminating``): wait for it to go.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import msgspec

from shared.crds.computedomain import ComputeDomain
from shared.crds.definitions import COMPUTE_DOMAINS
from shared.crds.names import (
    CHANNEL_DEVICE_CLASS,
    DOMAIN_LABEL,
    DOMAIN_UID_LABEL,
    DRIVER_NAME,
)
from shared.kube.models import DeviceClass, ResourceClaimTemplate
from shared.kube.resources import DEVICE_CLASSES, RESOURCE_CLAIM_TEMPLATES

REQUEST_NAME = "channel"
MANAGED_BY = {"app.kubernetes.io/managed-by": "cdo-domain-controller"}

OwnershipKind = Literal["missing", "ours", "stale", "conflict", "terminating"]
OwnerAlive = Callable[[str, str], bool]
"""``(domain name, uid) -> bool``: whether that ComputeDomain exists in the namespace."""


class Ownership(msgspec.Struct, frozen=True, kw_only=True):
    kind: OwnershipKind
    message: str = ""
    """For ``conflict``: who the template belongs to, for the condition and the Event."""


def domain_labels(domain: ComputeDomain) -> dict[str, str]:
    return {DOMAIN_LABEL: domain.metadata.name, DOMAIN_UID_LABEL: domain.metadata.uid}


def owner_reference(domain: ComputeDomain) -> dict[str, Any]:
    return {
        "apiVersion": COMPUTE_DOMAINS.api_version,
        "kind": COMPUTE_DOMAINS.kind,
        "name": domain.metadata.name,
        "uid": domain.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def template_spec(domain: ComputeDomain) -> dict[str, Any]:
    return {
        "metadata": {"labels": domain_labels(domain)},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": REQUEST_NAME,
                        "exactly": {
                            "deviceClassName": CHANNEL_DEVICE_CLASS,
                            "allocationMode": "ExactCount",
                            "count": 1,
                        },
                    }
                ]
            }
        },
    }


def desired_template(domain: ComputeDomain) -> dict[str, Any]:
    return {
        "apiVersion": RESOURCE_CLAIM_TEMPLATES.api_version,
        "kind": RESOURCE_CLAIM_TEMPLATES.kind,
        "metadata": {
            "name": domain.template_name,
            "namespace": domain.metadata.namespace,
            "labels": {**MANAGED_BY, **domain_labels(domain)},
            "ownerReferences": [owner_reference(domain)],
        },
        "spec": template_spec(domain),
    }


def _domain_owner(template: ResourceClaimTemplate) -> tuple[str, str] | None:
    """(name, uid) of the ComputeDomain that controls the template, if any."""
    for ref in template.metadata.owner_references:
        group = ref.api_version.rpartition("/")[0]
        if ref.kind == COMPUTE_DOMAINS.kind and group == COMPUTE_DOMAINS.group and ref.controller:
            return ref.name, ref.uid
    return None


def ownership(
    template: ResourceClaimTemplate | None, domain: ComputeDomain, *, owner_alive: OwnerAlive
) -> Ownership:
    """Whose the template of the domain's name is; see the module docstring."""
    if template is None:
        return Ownership(kind="missing")
    owner = _domain_owner(template)
    name = template.metadata.name
    if owner is not None and owner[1] == domain.metadata.uid:
        deleting = template.metadata.deletion_timestamp is not None
        return Ownership(kind="terminating" if deleting else "ours")
    if owner is not None and not owner_alive(*owner):
        deleting = template.metadata.deletion_timestamp is not None
        return Ownership(kind="terminating" if deleting else "stale")
    if owner is not None:
        message = (
            f"ResourceClaimTemplate {name} belongs to ComputeDomain {owner[0]}; "
            "choose another spec.channel.resourceClaimTemplate.name"
        )
    else:
        message = (
            f"ResourceClaimTemplate {name} already exists and was not created for this "
            "domain; it is left alone. Delete it, or recreate the domain with another "
            "spec.channel.resourceClaimTemplate.name"
        )
    return Ownership(kind="conflict", message=message)


def contains(actual: object, desired: object) -> bool:
    """Whether ``actual`` has everything ``desired`` has (extra, defaulted fields allowed)."""
    if isinstance(desired, Mapping):
        return isinstance(actual, Mapping) and all(
            key in actual and contains(actual[key], value) for key, value in desired.items()
        )
    if isinstance(desired, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(desired)
            and all(contains(a, d) for a, d in zip(actual, desired, strict=True))
        )
    return actual == desired


def spec_drifted(template: ResourceClaimTemplate, domain: ComputeDomain) -> bool:
    return not contains(template.spec, template_spec(domain))


def metadata_repair(template: ResourceClaimTemplate, domain: ComputeDomain) -> dict[str, Any]:
    """A merge patch restoring the template's labels and owner reference ({} when intact)."""
    patch: dict[str, Any] = {}
    labels = domain_labels(domain)
    if any(template.metadata.labels.get(k) != v for k, v in labels.items()):
        patch["labels"] = labels
    refs = [msgspec.to_builtins(ref) for ref in template.metadata.owner_references]
    if not any(contains(ref, owner_reference(domain)) for ref in refs):
        others = [ref for ref in refs if ref.get("uid") != domain.metadata.uid]
        patch["ownerReferences"] = [*others, owner_reference(domain)]
    return {"metadata": patch} if patch else {}


# -- the DeviceClass ---------------------------------------------------------------------------


def device_class_spec() -> dict[str, Any]:
    return {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER_NAME}"'}}]}


def desired_device_class() -> dict[str, Any]:
    return {
        "apiVersion": DEVICE_CLASSES.api_version,
        "kind": DEVICE_CLASSES.kind,
        "metadata": {"name": CHANNEL_DEVICE_CLASS, "labels": dict(MANAGED_BY)},
        "spec": device_class_spec(),
    }


def device_class_drifted(device_class: DeviceClass) -> bool:
    return not contains(device_class.spec, device_class_spec())
