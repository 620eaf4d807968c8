"""Addresses the kubelet reports for its pods: the node's own, and one per pod from a /24.

There is no pod network here; pods get addresses only so that status looks like a real one.
A node at ``127.A.B.C`` hands out ``10.B.C.2`` ... ``10.B.C.254`` in turn (wrapping round), and
host-network pods get the node's address.
"""

from __future__ import annotations

import ipaddress

from sim.kubelet.models import Pod


class PodAddresses:
    """The node's address and a round-robin pool of pod addresses."""

    def __init__(self, host_ip: str) -> None:
        self.host_ip = host_ip
        octets = ipaddress.IPv4Address(host_ip).packed
        self._prefix = f"10.{octets[2]}.{octets[3]}."
        self._next = 0

    def pod_ip(self, pod: Pod) -> str:
        if pod.spec.host_network:
            return self.host_ip
        address = f"{self._prefix}{2 + self._next % 253}"
        self._next += 1
        return address
