"""The NATS bootstrap: the one-shot identity that administers JetStream.

It creates the event stream and the snapshot bucket, or brings them to the layout its
CDO_NATS_* settings describe, and exits (:func:`shared.bus.jetstream.set_up`). The services only
publish, read and make their own consumers; NATS refuses them anything more
(services/nats_auth/permissions.py; the static users of deploy's auth.conf). It runs as the
``cdo-nats-bootstrap`` Job at install and at every later ``kubectl apply`` once the finished
Job has expired, and in ``cdo sim up`` before the services start.

    python -m services nats-bootstrap              # CDO_NATS_URL, credentials, layout
    python -m services nats-bootstrap --settings   # every CDO_NATS_* variable
"""

from services.nats_bootstrap.bootstrap import BootstrapFailedError, bootstrap

__all__ = ["BootstrapFailedError", "bootstrap"]
