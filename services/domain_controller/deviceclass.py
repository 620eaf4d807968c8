"""The DeviceClass ``compute-domain-channel.cdo.dev``: created once, repaired if edited.

Every domain's claims request one device of this class; it selects the attachment devices the
IMEX agents publish (``device.driver == "compute-domain.cdo.dev"``). It is cluster-wide and
shared, so it has no owner and outlives every domain.
"""

from __future__ import annotations

from services.domain_controller.caches import Caches
from services.domain_controller.template import (
    MANAGED_BY,
    desired_device_class,
    device_class_drifted,
    device_class_spec,
)
from services.domain_controller.writes import DomainWrites
from shared.crds.names import CHANNEL_DEVICE_CLASS
from shared.kube.keys import ObjectKey
from shared.kube.reconcile import Result


class DeviceClassReconciler:
    def __init__(self, *, caches: Caches, writes: DomainWrites) -> None:
        self._caches = caches
        self._writes = writes

    async def reconcile(self, key: ObjectKey) -> Result:
        current = self._caches.device_classes.cache.get(CHANNEL_DEVICE_CLASS)
        if current is None:
            await self._writes.create_device_class(desired_device_class())
        elif device_class_drifted(current):
            await self._writes.patch_device_class(
                CHANNEL_DEVICE_CLASS,
                {"metadata": {"labels": MANAGED_BY}, "spec": device_class_spec()},
            )
        return Result()
