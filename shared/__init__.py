"""Code every cdo service shares: runtime, event bus, events, tracing, Kubernetes plumbing.

Layering: this package imports neither ``services`` nor ``sim``.
"""
