"""What the kubelet has prepared: claims, the pods that use them, the CDI ids they got.

The real kubelet keeps this in a checkpoint file so that a restarted kubelet still knows what
to unprepare. Here it lives in the :class:`SimulatedKubelet` object and survives a simulated
power cycle (the file would survive on the node's disk); only a new process starts empty, and
then pods are prepared again (NodePrepareResources is idempotent) before they count as running.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from shared.kube.keys import ObjectKey
from shared.kubeletapi import Claim


@dataclass
class PreparedClaim:
    """One claim on this node: its drivers, what each returned, and the pods using it."""

    claim: Claim
    drivers: tuple[str, ...]
    # Driver -> CDI ids from its successful NodePrepareResources for this claim.
    prepared: dict[str, tuple[str, ...]] = field(default_factory=dict)
    pod_uids: set[str] = field(default_factory=set)

    @property
    def complete(self) -> bool:
        return all(driver in self.prepared for driver in self.drivers)

    @property
    def cdi_device_ids(self) -> tuple[str, ...]:
        return tuple(
            dict.fromkeys(cdi for driver in self.drivers for cdi in self.prepared.get(driver, ()))
        )


@dataclass
class PodClaims:
    """The claims the kubelet prepared (or tried to) for one pod."""

    pod_uid: str
    claim_uids: tuple[str, ...]


@dataclass
class Checkpoint:
    """Prepared claims by claim UID and pods by key; one per kubelet."""

    claims: dict[str, PreparedClaim] = field(default_factory=dict)
    pods: dict[ObjectKey, PodClaims] = field(default_factory=dict)
    # Pods whose containers exited (key -> (UID, exit code)) until the API says so too: they
    # must not start again while the informer still shows them running.
    finished: dict[ObjectKey, tuple[str, int]] = field(default_factory=dict)
    # Held across a whole prepare or unprepare, so that a claim shared by two pods is never
    # prepared and unprepared at once.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def cdi_device_ids(self, record: PodClaims) -> tuple[str, ...] | None:
        """The pod's CDI ids when every one of its claims is fully prepared, else None."""
        ids: list[str] = []
        for uid in record.claim_uids:
            prepared = self.claims.get(uid)
            if prepared is None or not prepared.complete:
                return None
            ids.extend(prepared.cdi_device_ids)
        return tuple(dict.fromkeys(ids))
