"""cdo's custom resources, defined once: the Structs services decode are the CRDs' schema.

- :mod:`shared.crds.computedomain`: ``ComputeDomain`` (``resource.nvidia.com``, ``v1beta2`` stored
  and read, ``v1beta1`` served too);
- :mod:`shared.crds.conversion`: between the two ComputeDomain versions (the webhook's decision);
- :mod:`shared.crds.placement`: ``Placement`` (``placements.cdo.dev/v1alpha1``);
- :mod:`shared.crds.openapi`: Struct -> OpenAPI v3 structural schema;
- :mod:`shared.crds.definitions`: the CRD manifests (names, printer columns, CEL rules);
- :mod:`shared.crds.render` and ``python -m shared.crds --write deploy/kustomize/base/crds``:
  the committed YAML (a test fails when it drifts from the code);
- :mod:`shared.crds.install`: install them into an API server (tests, benchmarks);
- :mod:`shared.crds.names`: labels, finalizers, conditions and classes every service shares.
"""

from shared.crds.computedomain import (
    ComputeDomain,
    ComputeDomainChannel,
    ComputeDomainNode,
    ComputeDomainSpec,
    ComputeDomainStatus,
    DomainCondition,
    GangSpec,
    ResourceClaimTemplateReference,
)
from shared.crds.definitions import (
    COMPUTE_DOMAINS,
    COMPUTE_DOMAINS_V1BETA1,
    PLACEMENTS,
    all_crds,
    compute_domain_crd,
    placement_crd,
)
from shared.crds.install import install_crds
from shared.crds.placement import (
    PlacedPod,
    Placement,
    PlacementSlice,
    PlacementSpec,
    SliceMember,
)

__all__ = [
    "COMPUTE_DOMAINS",
    "COMPUTE_DOMAINS_V1BETA1",
    "PLACEMENTS",
    "ComputeDomain",
    "ComputeDomainChannel",
    "ComputeDomainNode",
    "ComputeDomainSpec",
    "ComputeDomainStatus",
    "DomainCondition",
    "GangSpec",
    "PlacedPod",
    "Placement",
    "PlacementSlice",
    "PlacementSpec",
    "ResourceClaimTemplateReference",
    "SliceMember",
    "all_crds",
    "compute_domain_crd",
    "install_crds",
    "placement_crd",
]
