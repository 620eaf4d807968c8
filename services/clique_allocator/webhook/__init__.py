"""The pod admission webhook that gates a ComputeDomain's pods until their gang is placed, and the
ComputeDomain conversion webhook (v1beta1 <-> v1beta2) served beside it.

- :mod:`.admission`: AdmissionReview v1 in and out, and the gating decision (pure);
- :mod:`.conversion`: ConversionReview v1 in and out (pure; the conversion is
  :mod:`shared.crds.conversion`'s);
- :mod:`.configuration`: the MutatingWebhookConfiguration that registers it (pure rendering);
- :mod:`.templates`: whether a claim template belongs to a domain (caches, then the API);
- :mod:`.server`: the HTTPS server every replica runs, both paths, with certificate reloading.
"""
