"""A per-node service's own Node object, waited for: the service may start before its kubelet
registered the Node, so it reads until the Node exists (backing off to 10 s between reads)."""

from __future__ import annotations

import asyncio
import logging

import msgspec

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.models import Node
from shared.kube.resources import NODES

log = logging.getLogger("cdo.kube.ownnode")

_node_decoder = msgspec.json.Decoder(Node)


async def own_node(client: KubeClient, name: str) -> Node:
    """The Node called ``name``, once it exists; API errors are logged and read again."""
    pause = 0.2
    while True:
        try:
            raw = await client.get_or_none(NODES, name)
        except KubeApiError as exc:
            log.warning("cannot read this node", extra={"node": name, "error": str(exc)})
            raw = None
        if raw is not None:
            return _node_decoder.decode(raw)
        log.info("waiting for this node's Node object", extra={"node": name})
        await asyncio.sleep(pause)
        pause = min(pause * 2, 10.0)
