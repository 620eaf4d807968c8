"""A node's machine set, through the node host's control API, into the states platform teams
meet on real GPU nodes, and the IMEX agent reporting each on the node as it would there."""

from __future__ import annotations

from shared.crds.names import CDI_ENABLED_CONDITION, IMEX_READY_CONDITION
from tests.integration.nodehost.conftest import Hosted
from tests.support.wait import wait_for


async def condition(hosted: Hosted, node: str, kind: str) -> tuple[str, str, str] | None:
    found = (await hosted.node(node)).condition(kind)
    return None if found is None else (found.status, found.reason, found.message)


async def reaches(hosted: Hosted, node: str, kind: str, status: str, reason: str) -> str:
    """Wait for the node's condition ``kind`` to say ``status``/``reason``; its message."""

    async def probe() -> str | None:
        found = await condition(hosted, node, kind)
        return found[2] if found is not None and found[:2] == (status, reason) else None

    return await wait_for(probe, timeout=30, interval=0.1, what=f"{node} {kind}={reason}")


async def test_cdi_off_in_the_runtime_is_reported_on_the_node(hosted: Hosted) -> None:
    await hosted.settled()
    node = hosted.names[0]
    message = await reaches(hosted, node, CDI_ENABLED_CONDITION, "True", "CdiEnabled")
    assert "containerd://2.1.4: containerd 2.x enables CDI by default" in message
    status, answer = await hosted.control("POST", f"/nodes/{node}/faults",
                                          {"kind": "cdi", "enabled": False})  # fmt: skip
    assert status == 200, answer
    message = await reaches(hosted, node, CDI_ENABLED_CONDITION, "False", "CdiDisabled")
    assert "enable_cdi = false in /etc/containerd/config.toml" in message
    # The other nodes and the node's IMEX are untouched.
    other = await condition(hosted, hosted.names[1], CDI_ENABLED_CONDITION)
    assert other is not None and other[0] == "True"
    assert (await condition(hosted, node, IMEX_READY_CONDITION) or ("",))[0] == "True"
    await hosted.control("POST", f"/nodes/{node}/faults", {"kind": "cdi", "enabled": True})
    await reaches(hosted, node, CDI_ENABLED_CONDITION, "True", "CdiEnabled")


async def test_the_hosts_imex_service_and_missing_programs_are_reported(hosted: Hosted) -> None:
    await hosted.settled()
    node = hosted.names[0]
    status, answer = await hosted.control("POST", f"/nodes/{node}/faults",
                                          {"kind": "host_imex", "running": True})  # fmt: skip
    assert status == 200, answer
    message = await reaches(hosted, node, IMEX_READY_CONDITION, "False", "ForeignImexDaemon")
    assert "already answer" in message
    await hosted.control("POST", f"/nodes/{node}/faults", {"kind": "host_imex", "running": False})
    await reaches(hosted, node, IMEX_READY_CONDITION, "True", "ImexReady")

    missing = {"kind": "imex_programs", "installed": False}
    status, answer = await hosted.control("POST", f"/nodes/{node}/faults", missing)
    assert status == 200, answer
    message = await reaches(hosted, node, IMEX_READY_CONDITION, "False", "ImexProgramsMissing")
    assert "nvidia-imex, nvidia-imex-ctl not found" in message
    await hosted.control("POST", f"/nodes/{node}/faults",
                         {"kind": "imex_programs", "installed": True})  # fmt: skip
    await reaches(hosted, node, IMEX_READY_CONDITION, "True", "ImexReady")
