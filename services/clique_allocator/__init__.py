"""Clique allocator: places each ComputeDomain's gang of pods inside one NVLink clique.

``placement`` is the pure decision engine (no I/O): given the cliques, their nodes and the
reservations already made, it decides where a domain's pods go and which IMEX channel the domain
gets in its clique. The service around it reads those inputs from Kubernetes and applies the
decisions:

- ``webhook``: the pod admission webhook that gates a domain's pods at creation;
- ``gang``, ``nodes``, ``records``, ``plan``, ``capacity``: pure functions (gang size, node facts,
  the Placement record, the per-domain plan, clique capacity);
- ``caches``, ``book``, ``state``: informers, the leader's own writes, the engine's view;
- ``reconciler``, ``writes``, ``publisher``: the reconcile loop, API writes, capacity events;
- ``controller``: everything assembled; ``__main__`` composes it into a process.

See docs/clique-allocator.md.
"""
