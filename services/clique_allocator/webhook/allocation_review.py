"""The channel allocation webhook's answer to one AdmissionReview, from the allocator's caches.

A thin shell around :func:`.allocation.judge`: it decodes the claim before and after the
write, and gives the decision the pod, the domains naming the claim's template and the domain's
Placement (the leader's own latest write of it first, then the informer's). Until the caches
have synced it refuses, with a retriable message: the scheduler tries the pod again, and no
device is handed out unjudged. Every answer is counted (``cdo_admissions_total{webhook=
"channel-allocation"}``, result ``allowed``, ``refused`` or ``undecided``) and every refusal
logged with who asked, so an attempt on another domain's devices is visible.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec

from services.clique_allocator.caches import BY_TEMPLATE, Caches, namespaced
from services.clique_allocator.metrics import AllocatorMetrics
from services.clique_allocator.webhook.admission import (
    AdmissionRequest,
    refusal_response,
    review_response,
)
from services.clique_allocator.webhook.allocation import WEBHOOK, judge
from shared.crds.placement import Placement
from shared.kube.models import ResourceClaim
from shared.kube.ownwrites import OwnWrites

log = logging.getLogger("cdo.clique_allocator.webhook")

_claim_decoder = msgspec.json.Decoder(ResourceClaim)


def _claim(raw: msgspec.Raw) -> ResourceClaim | None:
    if raw == b"null":
        return None
    return _claim_decoder.decode(raw)


class AllocationReview:
    """Answers ``POST /validate-channel-allocations``."""

    def __init__(
        self,
        caches: Caches,
        book: OwnWrites[Placement],
        *,
        synced: Callable[[], bool],
        metrics: AllocatorMetrics,
    ) -> None:
        self._caches = caches
        self._book = book
        self._synced = synced
        self._metrics = metrics

    def _count(self, result: str) -> None:
        self._metrics.admissions.labels(WEBHOOK, result).inc()

    def answer(self, review: AdmissionRequest) -> bytes:
        try:
            claim = _claim(review.object)
            old = _claim(review.old_object)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self._count("error")
            return refusal_response(review.uid, f"the request carries no ResourceClaim: {exc}")
        if claim is None:
            self._count("error")
            return refusal_response(review.uid, "the request carries no ResourceClaim")
        if not self._synced():
            self._count("undecided")
            return refusal_response(
                review.uid,
                "the clique allocator has not synced its caches yet; retriable: the claim gets "
                "its cdo attachment device once it has",
            )
        namespace = claim.metadata.namespace or review.namespace
        verdict = judge(
            claim=claim,
            old=old,
            pod_named=lambda name: self._caches.pods.cache.get(namespaced(namespace, name)),
            domains_using=lambda template: self._caches.domains.cache.by_index(
                BY_TEMPLATE, namespaced(namespace, template)
            ),
            placement_of=lambda name: self._placement(namespace, name),
        )
        if verdict.allowed:
            self._count("allowed")
            return review_response(review.uid)
        self._count("refused")
        log.warning(
            "refused a cdo attachment device",
            extra={
                "user": review.user_info.username,
                "claim": f"{namespace}/{claim.metadata.name}",
                "reason": verdict.reason,
                "why": verdict.message,
            },
        )
        return refusal_response(review.uid, verdict.message)

    def _placement(self, namespace: str, name: str) -> Placement | None:
        key = namespaced(namespace, name)
        return self._book.current(key, self._caches.placements.cache.get(key))
