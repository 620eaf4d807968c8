"""The steps of a domain's plan (``plan.py`` chains them), each a pure function.

``slices`` (the slices as the steps hold them, to and from the record), ``release`` (step 1),
``grow`` and ``reserve`` (step 2: which slice takes new ranks, then the engine), ``pin`` (step 3:
seats by rank), ``hold`` (step 4), ``spread`` (``spec.gang.nodes`` per slice), ``places`` (node
facts from the engine's view), ``notices`` (the domain's Events).
"""
