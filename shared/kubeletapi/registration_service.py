"""Plugin side of plugin registration: answers GetInfo, records what the kubelet reports."""

from __future__ import annotations

import logging
from typing import Any

from shared.kubeletapi import convert
from shared.kubeletapi._generated.pluginregistration.v1 import api_pb2 as registration
from shared.kubeletapi.messages import PluginInfo, RegistrationStatus

log = logging.getLogger(__name__)


class RegistrationServicer:
    """Serves ``pluginregistration.Registration`` for one plugin.

    ``status`` is the kubelet's latest verdict, None until it has given one. A restarted kubelet
    registers the plugin again and so replaces it.
    """

    def __init__(self, info: PluginInfo) -> None:
        self.info = info
        self.status: RegistrationStatus | None = None

    async def get_info(
        self, _request: registration.InfoRequest, _context: Any
    ) -> registration.PluginInfo:
        return convert.plugin_info_to_pb(self.info)

    async def notify_registration_status(
        self, request: registration.RegistrationStatus, _context: Any
    ) -> registration.RegistrationStatusResponse:
        self.status = convert.registration_status_from_pb(request)
        fields = {"driver": self.info.name, "registered": self.status.registered}
        if self.status.registered:
            log.info("registered with the kubelet", extra=fields)
        else:
            log.error("kubelet refused registration: %s", self.status.error, extra=fields)
        return registration.RegistrationStatusResponse()
