"""Where a pod can be scheduled: the pure predicates kube-scheduler applies before binding.

One implementation, used by the simulated scheduler (``sim/scheduler``) and the clique
allocator (which pins a gang only to nodes where the scheduler will bind each pod). Modules,
one concept each: ``quantity`` (resource quantities in milli-units), ``labels`` (one label
requirement), ``selectors`` (label and node selectors, a pod's node selector and required node
affinity), ``taints`` (taints against tolerations), ``requests`` (what a pod requests, and how
many such pods a node still takes). The typed selector and affinity Structs are
:mod:`shared.kube.affinity`'s.
"""
