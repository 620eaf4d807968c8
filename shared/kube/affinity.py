"""Typed Structs of a pod's scheduling constraints: label and node selectors, node affinity,
pod (anti-)affinity, with their required and preferred terms.

Shared by the simulated scheduler and the clique allocator, which both decide where a pod can
go; the matching rules are :mod:`shared.scheduling`'s. Defaults are left out when encoding, so
a selector written back into an object (a claim's allocation) carries only what was set.
"""

from __future__ import annotations

import msgspec


class _Camel(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    pass


class LabelSelectorRequirement(_Camel, frozen=True, kw_only=True):
    key: str
    operator: str
    values: tuple[str, ...] = ()


class LabelSelector(_Camel, frozen=True, kw_only=True):
    match_labels: dict[str, str] = msgspec.field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()


class NodeSelectorRequirement(_Camel, frozen=True, kw_only=True):
    key: str
    operator: str
    values: tuple[str, ...] = ()


class NodeSelectorTerm(_Camel, frozen=True, kw_only=True):
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


class NodeSelector(_Camel, frozen=True, kw_only=True):
    node_selector_terms: tuple[NodeSelectorTerm, ...] = ()


class PreferredSchedulingTerm(_Camel, frozen=True, kw_only=True):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(_Camel, frozen=True, kw_only=True):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: tuple[PreferredSchedulingTerm, ...] = ()


class PodAffinityTerm(_Camel, frozen=True, kw_only=True):
    topology_key: str
    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None


class PodAffinity(_Camel, frozen=True, kw_only=True):
    required_during_scheduling_ignored_during_execution: tuple[PodAffinityTerm, ...] = ()


class Affinity(_Camel, frozen=True, kw_only=True):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None
