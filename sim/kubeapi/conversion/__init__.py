"""CRD conversion between served versions: ``None`` in process, ``Webhook`` through a
``ConversionReview`` the CRD's webhook answers."""
