"""What a crash can leave behind, collected when a controller starts leading.

- **Templates** labelled ``cdo.dev/compute-domain-uid`` whose domain no longer exists (with that
  uid), and that no live domain controls: deleted, with a uid precondition. Owner references let
  the garbage collector do this too; a template that lost its owner reference, or a cluster
  whose collector is behind, still gets cleaned up.
- **Snapshots** in the KV bucket of domains that are gone without a final event (a finalizer
  removed by hand while the controller was down): the final ``Deleted`` event is published.

Placements are the allocator's (and owned by their domain), so they are not touched here.
"""

from __future__ import annotations

import logging

import msgspec

from services.domain_controller.caches import Caches
from services.domain_controller.membership import DELETED, Ledger
from services.domain_controller.reconciler import DomainReconciler
from services.domain_controller.writes import DomainWrites
from shared.crds.definitions import COMPUTE_DOMAINS
from shared.crds.names import DOMAIN_UID_LABEL
from shared.kube.models import ResourceClaimTemplate

log = logging.getLogger("cdo.domain_controller.orphans")


class Collected(msgspec.Struct, frozen=True, kw_only=True):
    templates: int = 0
    final_events: int = 0


def orphan_templates(caches: Caches) -> list[ResourceClaimTemplate]:
    """Templates made for a domain that is gone, not adopted by a live one."""
    live = {domain.metadata.uid for domain in caches.domains.cache.objects()}
    orphans = []
    for template in caches.templates.cache.objects():
        meta = template.metadata
        uid = meta.labels.get(DOMAIN_UID_LABEL)
        if not uid or uid in live or meta.deletion_timestamp is not None:
            continue
        owned_by_live = any(
            ref.kind == COMPUTE_DOMAINS.kind
            and caches.domain_alive(meta.namespace, ref.name, ref.uid)
            for ref in meta.owner_references
        )
        if not owned_by_live:
            orphans.append(template)
    return orphans


async def collect_orphans(
    *, caches: Caches, writes: DomainWrites, ledger: Ledger, reconciler: DomainReconciler
) -> Collected:
    templates = 0
    for template in orphan_templates(caches):
        meta = template.metadata
        if await writes.delete_template(namespace=meta.namespace, name=meta.name, uid=meta.uid):
            templates += 1
            log.info("deleted orphan template", extra={"template": template.key})
    finals = 0
    for key in ledger.domains():
        entry = ledger.get(key)
        domain = caches.domains.cache.get(str(key))
        if entry is None or (domain is not None and domain.metadata.uid == entry.uid):
            continue
        finals += int(entry.phase != DELETED)
        await reconciler.vanished(key)
    return Collected(templates=templates, final_events=finals)
