"""Which cluster a client talks to: kubeconfig files merged as client-go merges them, or the pod's
service account.

kubectl and every client-go program read the same files the same way
(``k8s.io/client-go/tools/clientcmd``, ``ClientConfigLoadingRules``), and cdo does too:

- **``KUBECONFIG``** holds one or more paths, separated by ``os.pathsep`` (``:`` on Linux); the
  same path named twice is read once, a path that does not exist is skipped, and an empty
  ``KUBECONFIG`` counts as unset. Unset, the one file is ``~/.kube/config``
  (:func:`home_kubeconfig`).
- **Merging** (:func:`merge`): the first file that names a cluster, a user, a context or an
  extension wins that name, and its entry is taken whole (a later file's entry of the same name
  is ignored, even its fields the first one lacks). ``current-context`` and each field of
  ``preferences`` come from the first file that sets them.
- **Relative paths** in a file (a cluster's ``certificate-authority``, a user's
  ``client-certificate``, ``client-key``, ``tokenFile``, and an ``exec`` command that contains
  a ``/``) are relative to that file's directory, and are made absolute before merging.
- **An explicit file** (kubectl's ``--kubeconfig``, a service's ``CDO_<SERVICE>_KUBECONFIG``) is
  read alone and must exist.
- **In a pod** (:func:`in_cluster_possible`): ``KUBERNETES_SERVICE_HOST`` and
  ``KUBERNETES_SERVICE_PORT`` set and the service account's token mounted, as client-go's
  ``rest.InClusterConfig`` reads them.

Which of them a program takes first is its own rule: the CLI's is in ``cli/connection.py``, the
services' in :mod:`shared.kube.access`. Both end in a :class:`ClusterSource`, which
:meth:`shared.kube.client.KubeClient.connect_to` connects with.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from shared.errors import CdoError

KUBECONFIG_ENV = "KUBECONFIG"
HOME_KUBECONFIG = Path(".kube") / "config"
"""``~/.kube/config``, below the home directory."""
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the kubelet mounts a pod's service account: ``token``, ``ca.crt``, ``namespace``."""
SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"
SERVICE_PORT_ENV = "KUBERNETES_SERVICE_PORT"

_NAMED_LISTS = {"clusters": "cluster", "users": "user", "contexts": "context", "extensions": None}
"""The lists whose entries are keyed by ``name`` (maps in client-go), and each entry's body."""
_SCALARS = ("current-context",)
_STRUCTS = ("preferences",)


class KubeconfigError(CdoError):
    """A kubeconfig file that cannot be read or is not a kubeconfig; the message names it."""


@dataclass(frozen=True)
class ClusterSource:
    """Where a client's cluster comes from, and what chose it (for messages)."""

    files: tuple[Path, ...]
    """The kubeconfig files, merged in this order; empty: the pod's service account."""
    origin: str
    """What named them: ``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config``, a setting ..."""
    context: str | None = None
    """The context to use; None: the merged ``current-context``."""
    service_account_dir: Path = SERVICE_ACCOUNT_DIR
    service: tuple[str, str] = ("", "")
    """In a pod: ``KUBERNETES_SERVICE_HOST`` and ``_PORT`` as they were found."""

    @property
    def in_cluster(self) -> bool:
        return not self.files

    def describe(self) -> str:
        """``kubeconfig A:B (from $KUBECONFIG)``, or the service account."""
        if self.in_cluster:
            return f"the pod's service account ({self.service_account_dir})"
        names = os.pathsep.join(str(path) for path in self.files)
        return f"kubeconfig {names} (from {self.origin})"


# -- which files ---------------------------------------------------------------------------------


def env_paths(value: str) -> list[Path]:
    """The paths of a ``KUBECONFIG`` value, in order, each once; empty entries dropped."""
    seen: list[Path] = []
    for part in value.split(os.pathsep):
        if part and Path(part) not in seen:
            seen.append(Path(part))
    return seen


def home_kubeconfig(environ: Mapping[str, str] | None = None) -> Path:
    """``$HOME/.kube/config`` (the user's home directory when ``HOME`` is unset)."""
    environ = os.environ if environ is None else environ
    home = environ.get("HOME")
    return (Path(home) if home else Path.home()) / HOME_KUBECONFIG


def existing(paths: Iterable[Path]) -> tuple[Path, ...]:
    """The paths that are files, in order (client-go skips the missing ones)."""
    return tuple(path for path in paths if path.is_file())


def in_cluster_possible(
    environ: Mapping[str, str] | None = None, *, service_account_dir: Path = SERVICE_ACCOUNT_DIR
) -> bool:
    """Whether this process runs in a pod with a service account (client-go's ``Possible``)."""
    environ = os.environ if environ is None else environ
    return (
        bool(environ.get(SERVICE_HOST_ENV))
        and bool(environ.get(SERVICE_PORT_ENV))
        and (service_account_dir / "token").is_file()
    )


def in_cluster(
    environ: Mapping[str, str] | None = None, *, service_account_dir: Path = SERVICE_ACCOUNT_DIR
) -> ClusterSource:
    """The pod's service account as a source (check :func:`in_cluster_possible` first)."""
    environ = os.environ if environ is None else environ
    return ClusterSource(
        files=(),
        origin="the pod's service account",
        service_account_dir=service_account_dir,
        service=(environ.get(SERVICE_HOST_ENV, ""), environ.get(SERVICE_PORT_ENV, "")),
    )


def in_cluster_missing(
    environ: Mapping[str, str] | None = None, *, service_account_dir: Path = SERVICE_ACCOUNT_DIR
) -> list[str]:
    """What a pod's service account lacks here: variable names and the token's path."""
    environ = os.environ if environ is None else environ
    missing = [name for name in (SERVICE_HOST_ENV, SERVICE_PORT_ENV) if not environ.get(name)]
    if not (service_account_dir / "token").is_file():
        missing.append(str(service_account_dir / "token"))
    return missing


# -- reading and merging -------------------------------------------------------------------------


def read_document(path: Path) -> dict[str, Any]:
    """One kubeconfig file as data, its relative paths made absolute; KubeconfigError when it
    cannot be read or is not a mapping. An empty file is an empty kubeconfig, as in client-go."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise KubeconfigError(f"kubeconfig {path}: {exc.strerror or exc}") from exc
    try:
        document = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"kubeconfig {path} is not YAML: {exc}") from exc
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise KubeconfigError(f"kubeconfig {path} is not a mapping of kubeconfig fields")
    for key in _NAMED_LISTS:
        entries = document.get(key)
        if entries is not None and not isinstance(entries, list):
            raise KubeconfigError(f"kubeconfig {path}: {key} is not a list")
    return resolve_paths(document, base=path.absolute().parent)


def resolve_paths(document: Mapping[str, Any], *, base: Path) -> dict[str, Any]:
    """``document`` with the file references of its clusters and users made absolute against
    ``base`` (client-go's ``ResolveLocalPaths``); a copy, the input is left alone."""
    resolved = dict(document)
    resolved["clusters"] = [
        _with_paths(entry, "cluster", ("certificate-authority",), base)
        for entry in document.get("clusters") or ()
    ]
    resolved["users"] = [
        _with_paths(entry, "user", ("client-certificate", "client-key", "tokenFile"), base)
        for entry in document.get("users") or ()
    ]
    return resolved


def _with_paths(entry: Any, body_key: str, keys: Sequence[str], base: Path) -> Any:
    if not isinstance(entry, dict) or not isinstance(entry.get(body_key), dict):
        return entry
    body = dict(entry[body_key])
    for key in keys:
        value = body.get(key)
        if isinstance(value, str) and value and not os.path.isabs(value):
            body[key] = str(base / value)
    exec_config = body.get("exec")
    if isinstance(exec_config, dict):
        command = exec_config.get("command")
        # A bare program name is looked up on PATH; only a path is relative to the file.
        if isinstance(command, str) and "/" in command and not os.path.isabs(command):
            body["exec"] = {**exec_config, "command": str(base / command)}
    return {**entry, body_key: body}


def merge(documents: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Documents merged as client-go merges them (see the module docstring); pure."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    for key in _NAMED_LISTS:
        taken: dict[str, Any] = {}
        for document in documents:
            for entry in document.get(key) or ():
                name = entry.get("name") if isinstance(entry, dict) else None
                if isinstance(name, str) and name not in taken:
                    taken[name] = entry
        merged[key] = list(taken.values())
    for key in _SCALARS:
        for document in documents:
            if document.get(key):
                merged[key] = document[key]
                break
    for key in _STRUCTS:
        fields: dict[str, Any] = {}
        for document in documents:
            for field, value in (document.get(key) or {}).items():
                if value not in (None, "", [], {}) and field not in fields:
                    fields[field] = value
        merged[key] = fields
    return merged


def load(paths: Sequence[Path]) -> dict[str, Any]:
    """The files that exist among ``paths``, each read and merged in order."""
    return merge([read_document(path) for path in existing(paths)])


def context_of(config: Mapping[str, Any], context: str | None) -> Mapping[str, Any] | None:
    """The body of context ``context`` (None: the current one), or None when there is none."""
    wanted = context or config.get("current-context")
    for entry in config.get("contexts") or ():
        if isinstance(entry, dict) and entry.get("name") == wanted:
            body = entry.get("context")
            return body if isinstance(body, dict) else {}
    return None


def context_names(config: Mapping[str, Any]) -> list[str]:
    return [
        str(entry["name"])
        for entry in config.get("contexts") or ()
        if isinstance(entry, dict) and entry.get("name")
    ]


def load_for(source: ClusterSource) -> dict[str, Any]:
    """The merged kubeconfig of ``source``, checked to name a usable context; KubeconfigError
    (naming the files and what is wrong) otherwise."""
    if not existing(source.files):
        raise KubeconfigError(f"{source.describe()}: no such file")
    config = load(source.files)
    if context_of(config, source.context) is not None:
        return config
    known = ", ".join(context_names(config)) or "none"
    if source.context:
        raise KubeconfigError(
            f"context {source.context!r} is not in {source.describe()} (its contexts: {known})"
        )
    current = config.get("current-context")
    if current:
        raise KubeconfigError(
            f"current-context {current!r} of {source.describe()} names no context (its "
            f"contexts: {known})"
        )
    raise KubeconfigError(
        f"{source.describe()} sets no current-context: name one (its contexts: {known})"
    )
