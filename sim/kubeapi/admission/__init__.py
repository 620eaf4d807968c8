"""Admission control on the write path: the built-in plugins clients rely on,
ValidatingAdmissionPolicy (CEL), webhooks over HTTPS with AdmissionReview, and a throwaway PKI
to serve webhooks with."""
