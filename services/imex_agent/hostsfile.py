"""The agent's block in a hosts file: the addresses of the node map's stable hostnames (pure).

The block sits between two marker lines and is the only part of the file the agent touches, so
it can live in a container's ``/etc/hosts`` next to the entries the kubelet wrote. Lines are
sorted by hostname, so the same mapping always renders the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping

BEGIN = "# BEGIN cdo IMEX node map (managed by the cdo IMEX agent; do not edit)"
END = "# END cdo IMEX node map"


def render_block(hosts: Mapping[str, str]) -> list[str]:
    """The block's lines for hostname -> address."""
    lines = [BEGIN]
    lines += [f"{address} {name}" for name, address in sorted(hosts.items())]
    lines.append(END)
    return lines


def merge(existing: str, hosts: Mapping[str, str]) -> str:
    """``existing`` with the agent's block replaced by one for ``hosts`` (appended if absent)."""
    kept: list[str] = []
    inside = False
    for line in existing.splitlines():
        if line.strip() == BEGIN:
            inside = True
            continue
        if inside:
            if line.strip() == END:
                inside = False
            continue
        kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join([*kept, *render_block(hosts)]) + "\n"


def parse_block(text: str) -> dict[str, str]:
    """Hostname -> address as the agent's block in ``text`` says (empty without a block)."""
    table: dict[str, str] = {}
    inside = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped == BEGIN:
            inside = True
            continue
        if stripped == END:
            inside = False
            continue
        if inside and stripped and not stripped.startswith("#"):
            address, *names = stripped.split()
            for name in names:
                table[name] = address
    return table
