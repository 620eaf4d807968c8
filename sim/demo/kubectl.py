"""The real ``kubectl`` (the one beside the demo's Python), as the demo runs it: apply and delete
of the example manifests in ``deploy/examples/`` and a merge patch, their output lines returned
for the screen.

The files are applied as they are. With annotations (the demo's trace context, when traces are
exported) the ComputeDomain, the first manifest, is annotated on its way in by ``kubectl annotate
--local``, so that the domain's story joins the demo's trace from its first reconcile.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from opentelemetry.trace import Span, Tracer

from shared.crds.names import TRACE_CONTEXT_ANNOTATION
from shared.tracing import annotations_for, exports
from sim.demo.monitor import StoryError

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"
"""Where the manifests the demo applies are, as users would apply them."""


def kubectl_binary() -> str:
    return str(Path(sys.executable).parent / "kubectl")


def file_args(manifests: Sequence[Path]) -> list[str]:
    """``-f A -f B``: the files in the order given."""
    return [arg for manifest in manifests for arg in ("-f", str(manifest))]


def trace_annotations(tracer: Tracer, span: Span) -> dict[str, str]:
    """The annotation that puts a domain in ``span``'s trace; none when nothing is exported."""
    return annotations_for(span, key=TRACE_CONTEXT_ANNOTATION) if exports(tracer) else {}


async def kubectl(kubeconfig: str, *args: str, stdin: bytes | None = None) -> list[str]:
    process = await asyncio.create_subprocess_exec(
        kubectl_binary(), "--kubeconfig", kubeconfig, *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await process.communicate(stdin)
    lines = out.decode(errors="replace").splitlines()
    if process.returncode != 0:
        raise StoryError(f"kubectl {' '.join(args)} failed:\n" + "\n".join(lines))
    return lines


async def apply(
    kubeconfig: str, manifests: Sequence[Path], annotations: dict[str, str]
) -> list[str]:
    """``kubectl apply`` of ``manifests``, the ComputeDomain first; see the module docstring."""
    if not annotations:
        return await kubectl(kubeconfig, "apply", *file_args(manifests))
    domain, *rest = manifests
    pairs = [f"{key}={value}" for key, value in annotations.items()]
    annotated = await kubectl(
        kubeconfig, "annotate", "--local", "-f", str(domain), *pairs, "-o", "yaml"
    )
    lines = await kubectl(kubeconfig, "apply", "-f", "-", stdin="\n".join(annotated).encode())
    return lines + (await kubectl(kubeconfig, "apply", *file_args(rest)) if rest else [])


async def delete(kubeconfig: str, manifests: Sequence[Path]) -> list[str]:
    """``kubectl delete --wait=false`` of ``manifests`` in that order: the caller waits for
    what it needs gone, with its own bound and progress."""
    return await kubectl(kubeconfig, "delete", "--wait=false", *file_args(manifests))


async def patch(
    kubeconfig: str, resource: str, name: str, merge: Mapping[str, object]
) -> list[str]:
    """``kubectl patch RESOURCE NAME --type merge -p JSON``: a change a user makes by hand."""
    return await kubectl(
        kubeconfig, "patch", resource, name, "--type", "merge", "-p", json.dumps(merge)
    )
