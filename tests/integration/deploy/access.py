"""Which Kubernetes API access a program's code makes, read from its source.

Every request a cdo service sends goes through :class:`shared.kube.client.KubeClient`, named by
a :class:`shared.kube.resources.Resource` constant. So the access a package needs can be read
from its syntax tree:

- ``<client>.get|get_or_none|list|create|replace|patch|delete|watch(RESOURCE, ...)`` is that
  verb (``get_or_none`` is ``get``, ``replace`` is ``update``) on the resource, or on
  ``<plural>/<subresource>`` when a literal ``subresource=`` is given;
- ``Informer(client, RESOURCE, ...)`` (or a local ``informer(RESOURCE, ...)`` helper) lists and
  watches;
- constructing ``LeaderElector``, ``EventRecorder`` or ``NodeSlicePublisher``, calling
  ``own_node``, ``refuse_beside_nvidia``, ``review_token`` or ``access_review``, or deriving
  from ``LeaderElectedController`` brings the access of those shared classes, read from their
  own modules the same way;
  ``recorder.record(RESOURCE, obj, ...)`` only names the involved object's kind;
- a ``subresource=`` passed through from a parameter stands for "" and every literal
  ``subresource=`` given anywhere in the same file.

Anything the rules cannot explain (a resource constant used any other way, a raw
``client.request``) is reported as unexplained, so a new access pattern fails loudly instead of
being missed.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from shared.kube.resources import Resource

ROOT = Path(__file__).resolve().parents[3]

CLIENT_VERBS = {
    "get": "get",
    "get_or_none": "get",
    "list": "list",
    "create": "create",
    "replace": "update",
    "patch": "patch",
    "delete": "delete",
    "watch": "watch",
}
INFORMER_CALLS = frozenset({"Informer", "informer"})
REFERENCE_CALLS = frozenset({"record"})
SHARED_COMPONENTS = {
    "LeaderElector": "shared/kube/leader.py",
    "EventRecorder": "shared/kube/recorder.py",
    "LeaderElectedController": "shared/kube/controller.py",
    "NodeSlicePublisher": "shared/kube/nodeslice.py",
    "own_node": "shared/kube/ownnode.py",
    "refuse_beside_nvidia": "shared/crds/coexistence.py",
    "review_token": "shared/kube/reviews.py",
    "access_review": "shared/kube/reviews.py",
}
RESOURCE_ATTRIBUTES = frozenset({"api_version", "kind", "group", "version", "plural", "namespaced"})


@dataclass(frozen=True, order=True)
class Access:
    """One verb on one resource: ``group`` "" is the core API."""

    group: str
    resource: str
    verb: str


@dataclass
class Findings:
    accesses: set[Access] = field(default_factory=set)
    unexplained: list[str] = field(default_factory=list)


def _load(path: Path) -> ModuleType:
    relative = path.resolve().relative_to(ROOT)
    if relative.parts[0] in {"services", "shared", "sim"}:
        name = ".".join(relative.with_suffix("").parts)
        if name.endswith(".__init__"):
            name = name.removesuffix(".__init__")
        return importlib.import_module(name)
    spec = importlib.util.spec_from_file_location(f"_scanned_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _resources(module: ModuleType) -> dict[str, Resource]:
    return {name: value for name, value in vars(module).items() if isinstance(value, Resource)}


def _callee(node: ast.Call) -> str:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return ""


def _literal_subresources(tree: ast.AST) -> set[str]:
    return {
        keyword.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for keyword in node.keywords
        if keyword.arg == "subresource"
        and isinstance(keyword.value, ast.Constant)
        and isinstance(keyword.value.value, str)
    }


def _subresources(node: ast.Call, literals: set[str]) -> set[str] | None:
    for keyword in node.keywords:
        if keyword.arg == "subresource":
            if isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, str):
                return {keyword.value.value}
            if isinstance(keyword.value, ast.Name):
                return {"", *literals}
            return None
    return {""}


def scan_file(path: Path) -> Findings:
    """The API access of one source file."""
    findings = Findings()
    constants = _resources(_load(path))
    tree = ast.parse(path.read_text(), filename=str(path))
    explained: set[int] = set()
    literals = _literal_subresources(tree)
    where = path.resolve().relative_to(ROOT)

    def add(resource: Resource, sub: str, verbs: Iterable[str]) -> None:
        plural = f"{resource.plural}/{sub}" if sub else resource.plural
        findings.accesses.update(Access(resource.group, plural, verb) for verb in verbs)

    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                if isinstance(base, ast.Name) and base.id in SHARED_COMPONENTS:
                    shared = scan_file(ROOT / SHARED_COMPONENTS[base.id])
                    findings.accesses |= shared.accesses
                    findings.unexplained += shared.unexplained
            continue
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in constants and node.attr in RESOURCE_ATTRIBUTES:
                explained.add(id(node.value))
            continue
        if not isinstance(node, ast.Call):
            continue
        callee = _callee(node)
        if callee in SHARED_COMPONENTS:
            shared = scan_file(ROOT / SHARED_COMPONENTS[callee])
            findings.accesses |= shared.accesses
            findings.unexplained += shared.unexplained
            continue
        if callee == "request" and isinstance(node.func, ast.Attribute):
            findings.unexplained.append(f"{where}:{node.lineno}: raw request()")
            continue
        named = [arg for arg in node.args if isinstance(arg, ast.Name) and arg.id in constants]
        if not named:
            continue
        if callee in REFERENCE_CALLS:
            explained.update(id(arg) for arg in named)
        elif callee in INFORMER_CALLS:
            for arg in named:
                explained.add(id(arg))
                add(constants[arg.id], "", ("list", "watch"))
        elif (
            callee in CLIENT_VERBS
            and isinstance(node.func, ast.Attribute)
            and node.args
            and node.args[0] is named[0]
        ):
            subs = _subresources(node, literals)
            if subs is None:
                findings.unexplained.append(f"{where}:{node.lineno}: unreadable subresource")
                continue
            explained.add(id(named[0]))
            for sub in subs:
                add(constants[named[0].id], sub, (CLIENT_VERBS[callee],))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.id in constants
            and id(node) not in explained
        ):
            findings.unexplained.append(f"{where}:{node.lineno}: {node.id} used otherwise")
    return findings


def python_files(root: Path) -> Iterator[Path]:
    yield from sorted(path for path in root.rglob("*.py") if "__pycache__" not in path.parts)


SIGNER_VERBS = {"approval": "approve", "status": "sign"}
"""A write of a CSR's ``approval`` or ``status`` also needs that verb on the ``signers`` resource
(kube-apiserver's CertificateApproval and CertificateSigning admission plugins)."""


def _signer_access(accesses: Iterable[Access]) -> set[Access]:
    group = "certificates.k8s.io"
    return {
        Access(group, "signers", SIGNER_VERBS[access.resource.split("/", 1)[1]])
        for access in accesses
        if access.group == group
        and access.verb == "update"
        and access.resource.split("/", 1)[-1] in SIGNER_VERBS
        and access.resource.startswith("certificatesigningrequests/")
    }


def scan(paths: Iterable[Path]) -> Findings:
    """The API access of every Python file under ``paths`` (files or directories)."""
    total = Findings()
    for path in paths:
        for file in python_files(path) if path.is_dir() else [path]:
            found = scan_file(file)
            total.accesses |= found.accesses
            total.unexplained += found.unexplained
    total.accesses |= _signer_access(total.accesses)
    return total
