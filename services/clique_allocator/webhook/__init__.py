"""The pod admission webhook that gates a ComputeDomain's pods until their gang is placed.

- :mod:`.admission`: AdmissionReview v1 in and out, and the gating decision (pure);
- :mod:`.configuration`: the MutatingWebhookConfiguration that registers it (pure rendering);
- :mod:`.templates`: whether a claim template belongs to a domain (caches, then the API);
- :mod:`.server`: the HTTPS server every replica runs, with certificate reloading.
"""
