"""Clique allocator: places each ComputeDomain's gang of pods in NVLink cliques, in one clique
when it fits and in rank-aware slices (one clique each) when it does not.

``placement`` is the pure decision engine (no I/O): given the cliques, their nodes and the
reservations already made, it decides where a domain's pods go, slice by slice, and which IMEX
channel the domain gets in each clique. The service around it reads those inputs from
Kubernetes and applies the decisions:

- ``webhook``: the pod admission webhook that gates a domain's pods at creation;
- ``gang``, ``ranks``, ``nodes``, ``records``, ``plan`` (with its steps in ``planning``),
  ``capacity``: pure functions (gang size, pod ranks, node facts, the Placement record, the
  per-domain plan, clique capacity);
- ``caches``, ``routing``, ``state``: informers, which domains (and whether capacity) each
  change concerns, the engine's view; the leader's own Placement writes are kept in
  shared/kube/ownwrites.py's ``OwnWrites``;
- ``reconciler``, ``writes``, ``publisher``: the reconcile loop, API writes, capacity events;
- ``metrics``, ``settings``: the allocator's own instruments; CDO_CLIQUE_ALLOCATOR_*;
- ``controller``: everything assembled; ``__main__`` composes it into a process.

See docs/clique-allocator.md.
"""
