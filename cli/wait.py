"""``cdo wait``: wait for ComputeDomains to meet a condition, as ``kubectl wait`` does.

    cdo wait [computedomain/]NAME... [--for=condition=Ready] [--timeout=30s] [-n NS]
    cdo wait NAME --for=condition=Degraded=false
    cdo wait NAME --for=jsonpath='{.status.status}'=Ready
    cdo wait NAME --for=delete

Each domain is watched (LIST and WATCH on its name) until the condition holds: a condition of
``status.conditions`` with that status (``True`` when none is given; compared without case), a
JSONPath value, or the domain gone. Without ``--for`` it waits for ``condition=Ready``. When all
hold it prints ``computedomain.resource.nvidia.com/NAME condition met`` (``deleted``) for each and
exits 0; at the timeout (default 30 s; ``0`` looks once) it says ``timed out waiting for the
condition on computedomains/NAME`` and exits 1, as kubectl does. A domain that does not exist
exits 1 at once (``--for=delete`` takes it as done); a cluster that does not answer exits 3.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import sys
from dataclasses import dataclass
from typing import Any, TextIO

import msgspec

from cli.connection import (
    REQUEST_TIMEOUT_S,
    Endpoints,
    connect_kube,
    endpoints_from,
    kube_unreachable,
    namespace_from,
)
from cli.jsonpath import JsonPathError, jsonpath
from shared.command_errors import CommandError, UsageError
from shared.crds import COMPUTE_DOMAINS
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.informer import Informer
from shared.kube.meta import KubeObject

KIND = "computedomain.resource.nvidia.com"
GROUP = "resource.nvidia.com"
PLURAL = "computedomains"
DEFAULT_TIMEOUT_S = 30.0
_DURATION = re.compile(r"^(-?\d+(?:\.\d+)?)(ms|s|m|h)?$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_ALIASES = ("computedomain/", "computedomains/", "cd/", f"{KIND}/")


@dataclass(frozen=True)
class Wanted:
    """What ``--for`` asks: ``condition`` (type and status), ``jsonpath`` or ``delete``."""

    kind: str
    name: str = ""
    value: str = ""

    def met(self, obj: dict[str, Any] | None) -> bool:
        if self.kind == "delete":
            return obj is None
        if obj is None:
            return False
        if self.kind == "condition":
            conditions = obj.get("status", {}).get("conditions", []) or []
            return any(
                c.get("type", "").lower() == self.name.lower()
                and str(c.get("status", "")).lower() == self.value.lower()
                for c in conditions
            )
        try:
            found = jsonpath("{" + self.name + "}", obj)
        except JsonPathError:
            return False
        return found == self.value if self.value else bool(found)


def parse_for(text: str) -> Wanted:
    """``condition=TYPE[=STATUS]``, ``jsonpath={EXPR}[=VALUE]`` or ``delete``."""
    if text == "delete":
        return Wanted("delete")
    kind, _, rest = text.partition("=")
    if kind == "condition" and rest:
        name, _, value = rest.partition("=")
        return Wanted("condition", name, value or "True")
    if kind == "jsonpath" and rest:
        match = re.match(r"^'?\{(?P<expr>.+)\}'?(?:=(?P<value>.*))?$", rest)
        if match is not None:
            return Wanted("jsonpath", match.group("expr"), match.group("value") or "")
    raise UsageError(
        f"--for={text}: give condition=TYPE[=STATUS], jsonpath='{{EXPR}}'=VALUE or delete"
    )


def parse_timeout(text: str) -> float:
    """``30s``, ``5m``, ``1h``, ``500ms`` or bare seconds; negative: a week (as kubectl)."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise UsageError(f"--timeout={text}: give a duration such as 30s, 5m or 1h")
    seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    return 7 * 86400.0 if seconds < 0 else seconds


def domain_name(target: str) -> str:
    for alias in _ALIASES:
        if target.startswith(alias):
            return target[len(alias) :]
    if "/" in target:
        raise UsageError(f"{target}: cdo wait waits for ComputeDomains (computedomain/NAME)")
    return target


class _Raw(KubeObject, frozen=True, kw_only=True):
    """The domain as JSON (whatever its fields), for conditions and JSONPath."""

    status: dict[str, Any] = msgspec.field(default_factory=dict)
    spec: dict[str, Any] = msgspec.field(default_factory=dict)


async def _wait_one(
    client: KubeClient, namespace: str, name: str, wanted: Wanted, *, once: bool
) -> bool:
    """Until ``wanted`` holds for the domain (True); with ``once`` (timeout 0) whether it does
    now. CommandError for a domain that does not exist."""
    changed = asyncio.Event()
    informer = Informer(
        client, COMPUTE_DOMAINS, _Raw, namespace=namespace, field_selector=f"metadata.name={name}"
    )
    informer.add_handler(lambda _old, _new: changed.set())
    task = asyncio.create_task(informer.run(), name=f"wait {name}")
    try:
        await informer.wait_synced()
        key = f"{namespace}/{name}"
        if informer.cache.get(key) is None and wanted.kind != "delete":
            raise CommandError(f'Error from server (NotFound): {PLURAL}.{GROUP} "{name}" not found')
        while True:
            current = informer.cache.get(key)
            if wanted.met(msgspec.to_builtins(current) if current is not None else None):
                return True
            if once:
                return False
            changed.clear()
            await changed.wait()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def wait(
    endpoints: Endpoints,
    *,
    names: list[str],
    namespace: str,
    wanted: Wanted,
    timeout_s: float,
    out: TextIO,
) -> None:
    """Wait for every domain in ``names``; CommandError on timeout or a missing domain."""
    client = await connect_kube(endpoints)
    try:
        try:
            await client.list(COMPUTE_DOMAINS, namespace=namespace, limit=1)
        except KubeApiError as exc:
            if exc.code == 0:
                raise kube_unreachable(endpoints, exc) from exc
            raise CommandError(f"listing ComputeDomains failed: {exc}") from exc
        for name in names:
            try:
                # 0 looks once: time enough to read the domain, none to wait for a change.
                async with asyncio.timeout(timeout_s or REQUEST_TIMEOUT_S):
                    if not await _wait_one(client, namespace, name, wanted, once=not timeout_s):
                        raise TimeoutError
            except TimeoutError:
                raise CommandError(
                    f"timed out waiting for the condition on {PLURAL}/{name}"
                ) from None
            said = "deleted" if wanted.kind == "delete" else "condition met"
            out.write(f"{KIND}/{name} {said}\n")
            out.flush()
    finally:
        await client.close()


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    *,
    common: argparse.ArgumentParser,
    epilog: str,
) -> None:
    parser = commands.add_parser(
        "wait",
        parents=[common],
        help="wait for ComputeDomains to meet a condition (as kubectl wait)",
        description="Wait until each ComputeDomain meets --for (default condition=Ready); "
        "exit 0 when all do, 1 at the timeout or for a domain that does not exist.",
        epilog=epilog,
    )
    parser.add_argument("domains", nargs="+", metavar="DOMAIN", help="NAME or computedomain/NAME")
    parser.add_argument(
        "--for",
        dest="wait_for",
        default="condition=Ready",
        metavar="CONDITION",
        help="condition=TYPE[=STATUS] (status True unless given), jsonpath='{EXPR}'=VALUE, or "
        "delete (default condition=Ready)",
    )
    parser.add_argument(
        "--timeout", default="30s", help="how long to wait: 30s, 5m, 1h; 0 looks once (default 30s)"
    )
    parser.add_argument(
        "-n", "--namespace", help="namespace (default: the context's, else default)"
    )


def run(args: argparse.Namespace) -> None:
    wanted = parse_for(args.wait_for)
    timeout_s = parse_timeout(args.timeout)
    names = [domain_name(target) for target in args.domains]
    endpoints = endpoints_from(args)
    namespace = namespace_from(args, endpoints) or "default"
    asyncio.run(
        wait(
            endpoints,
            names=names,
            namespace=namespace,
            wanted=wanted,
            timeout_s=timeout_s,
            out=sys.stdout,
        )
    )
