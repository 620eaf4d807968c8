"""The domain controller: ComputeDomain finalizer and status, the domain's ResourceClaimTemplate,
the channel DeviceClass, and domain membership events.

Modules, outside in:

- ``__main__``: the composition root;
- ``controller``: informers, queues, reconcile loops and leader election of one replica;
- ``caches``, ``routing``: the informers; which domains each change concerns;
- ``reconciler``: the reconcile of one domain (a thin shell of reads and writes);
- ``deviceclass``, ``orphans``: the DeviceClass loop; what a crash leaves, collected at start;
- ``writes``: the API writes (each ComputeDomain written is kept in shared/kube's OwnWrites, so
  a reconcile reads our own writes before the cache shows them);
- ``facts``, ``members``, ``status``, ``template``, ``membership``, ``notices``: pure decisions
  (``members`` reads a Placement's slices as member nodes and slices; ``status_messages`` and
  ``status_entries`` are the wording and the entries of ``status``);
- ``objects``, ``settings``: the slices of pods and nodes kept in cache; CDO_DOMAIN_CONTROLLER_*.

docs/domain-controller.md describes the resource, the status and the deletion flow.
"""
