"""Which of a pod's claim templates belong to a ComputeDomain: the caches first, then the API.

The caches answer almost always (see :meth:`Caches.template_class`). A template they have not
seen yet — a domain and its workload applied in one go can reach the webhook before the watch
events do — is looked up in the API: the template itself (labelled by the domain controller),
else the ComputeDomains of the namespace that name it. A lookup that fails raises
:class:`LookupFailedError`, and the webhook refuses the pod rather than guess: a domain's pod
admitted without its gate would be scheduled anywhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import msgspec

from services.clique_allocator.caches import Caches
from shared.crds.computedomain import ComputeDomain
from shared.crds.definitions import COMPUTE_DOMAINS
from shared.crds.names import DOMAIN_LABEL
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.models import ResourceClaimTemplate
from shared.kube.resources import RESOURCE_CLAIM_TEMPLATES


class _DomainList(msgspec.Struct):
    items: list[ComputeDomain]


_decode_template = msgspec.json.Decoder(ResourceClaimTemplate)
_decode_domains = msgspec.json.Decoder(_DomainList)


class LookupFailedError(Exception):
    """The API could not say whether a template belongs to a domain."""


class TemplateClassifier:
    def __init__(self, caches: Caches, client: KubeClient, *, timeout_s: float) -> None:
        self._caches = caches
        self._client = client
        self._timeout_s = timeout_s
        self.lookups = 0

    async def domain_templates(self, namespace: str, names: Iterable[str]) -> set[str]:
        """The names among ``names`` whose claims belong to a ComputeDomain."""
        found: set[str] = set()
        for name in names:
            verdict = self._caches.template_class(namespace, name)
            if verdict == "unknown":
                self.lookups += 1
                try:
                    async with asyncio.timeout(self._timeout_s):
                        is_domain = await self._lookup(namespace, name)
                except (KubeApiError, TimeoutError, msgspec.DecodeError) as exc:
                    raise LookupFailedError(
                        f"cannot tell whether ResourceClaimTemplate {namespace}/{name} belongs "
                        f"to a ComputeDomain: {exc}"
                    ) from exc
                verdict = "domain" if is_domain else "other"
            if verdict == "domain":
                found.add(name)
        return found

    async def _lookup(self, namespace: str, name: str) -> bool:
        raw = await self._client.get_or_none(RESOURCE_CLAIM_TEMPLATES, name, namespace=namespace)
        if raw is not None:
            return DOMAIN_LABEL in _decode_template.decode(raw).metadata.labels
        domains = _decode_domains.decode(
            await self._client.list(COMPUTE_DOMAINS, namespace=namespace)
        )
        return any(domain.template_name == name for domain in domains.items)
