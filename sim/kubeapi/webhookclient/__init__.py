"""Calling webhooks as kube-apiserver does: shared by admission and CRD conversion."""
