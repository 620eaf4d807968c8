"""The node selector kube-scheduler writes into a claim allocated on one node.

Matching label and node selectors is :mod:`shared.scheduling.selectors`'s, the rule the
scheduler shares with the clique allocator.
"""

from __future__ import annotations

from shared.kube.affinity import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from shared.scheduling.selectors import label_selector_matches, node_selector_matches

__all__ = ["label_selector_matches", "node_name_selector", "node_selector_matches"]


def node_name_selector(name: str) -> NodeSelector:
    """The selector kube-scheduler writes into a claim allocated on one node."""
    return NodeSelector(
        node_selector_terms=(
            NodeSelectorTerm(
                match_fields=(
                    NodeSelectorRequirement(key="metadata.name", operator="In", values=(name,)),
                )
            ),
        )
    )
