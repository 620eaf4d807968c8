"""Clique allocator: places each ComputeDomain's gang of pods inside one NVLink clique.

``placement`` is the pure decision engine (no I/O): given the cliques, their nodes and the
reservations already made, it decides where a domain's pods go and which IMEX channel the domain
gets in its clique. The service around it reads those inputs from Kubernetes and applies the
decisions (scheduling gates, nodeSelectors, recorded reservations).
"""
