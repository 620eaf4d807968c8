"""The emulator's data directory (``ServerConfig.data_dir``): what makes a restarted server the
same server. kube-apiserver keeps its objects in etcd and reads its keys from files; here one
directory holds both:

- ``store.jsonl``: the objects and their resourceVersions (``journal``);
- ``service-account.key``: the key ServiceAccount tokens are signed with, so tokens issued
  before a restart are still accepted;
- ``ca.crt`` / ``ca.key``: the serving CA (with TLS), so kubeconfigs written before a restart
  still trust the server.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from sim.kubeapi.storage.journal import Journal

SERVICE_ACCOUNT_KEY = "service-account.key"
CA_CERT = "ca.crt"
CA_KEY = "ca.key"


class DataDir:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(path)

    def read(self, name: str) -> bytes | None:
        try:
            return (self.path / name).read_bytes()
        except FileNotFoundError:
            return None

    def keep(self, name: str, content: bytes) -> None:
        """Write ``name`` readable by its owner only (it may be a private key)."""
        target = self.path / name
        temporary = target.with_suffix(".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as out:
            out.write(content)
        temporary.replace(target)

    def kept(self, name: str, make: Callable[[], bytes]) -> bytes:
        """The content of ``name``, made (and kept) the first time."""
        found = self.read(name)
        if found is None:
            found = make()
            self.keep(name, found)
        return found
