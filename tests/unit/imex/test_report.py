from __future__ import annotations

import datetime as dt
import json

import msgspec

from sim.imex.protocol import ConnectionStatus, NodeStatus
from sim.imex.report import (
    build_domain_view,
    differs,
    mark_changes,
    render_json,
    render_text,
    timestamp,
)
from sim.imex.states import ConnectionState, DaemonState, DomainState, RefusalReason

A, B, C3 = "127.0.2.1", "127.0.2.2", "127.0.2.3"
MOMENT = dt.datetime(2025, 3, 5, 9, 4, 3, 59_000)
CONNECTED = ConnectionState.CONNECTED


def report(
    host: str,
    cells: dict[str, ConnectionState],
    *,
    refused: dict[str, RefusalReason] | None = None,
    state: DaemonState = DaemonState.READY,
) -> NodeStatus:
    refused = refused or {}
    return NodeStatus(
        state=state,
        index=0,
        host=host,
        hostname=f"tray-{host.rsplit('.', 1)[1]}",
        version="580.95.05",
        pid=1,
        instance="i",
        node_map_digest="d",
        connections=tuple(
            ConnectionStatus(index=i, host=h, status=s, refused=refused.get(h))
            for i, (h, s) in enumerate(cells.items())
        ),
    )


def full_mesh() -> list[NodeStatus | None]:
    return [report(h, {A: CONNECTED, B: CONNECTED, C3: CONNECTED}) for h in (A, B, C3)]


def test_a_fully_connected_domain_is_up_and_prints_the_real_layout() -> None:
    view = build_domain_view([A, B, C3], [A, B, C3], full_mesh(), taken_at=MOMENT)

    assert view.status is DomainState.UP
    assert render_text(view).splitlines()[8:] == [
        "3/5/2025 09:04:03.059",
        "Nodes:",
        "Node #0   - 127.0.2.1       - READY",
        "Node #1   - 127.0.2.2       - READY",
        "Node #2   - 127.0.2.3       - READY",
        "",
        " Nodes From\\To  0  1  2",
        "       0        C  C  C",
        "       1        C  C  C",
        "       2        C  C  C",
        "Domain State: UP",
    ]


def test_the_text_report_starts_with_a_legend_of_every_letter() -> None:
    view = build_domain_view([A], [A], [report(A, {A: CONNECTED})], taken_at=MOMENT)

    legend = render_text(view).splitlines()[:7]

    assert legend[0] == "Connectivity Table Legend:"
    assert [line[:4] for line in legend[1:]] == ["I - ", "N - ", "R - ", "D - ", "A - ", "C - "]


def test_an_unreachable_node_is_unavailable_with_an_invalid_row() -> None:
    reports = full_mesh()
    reports[2] = None
    reports[0] = report(A, {A: CONNECTED, B: CONNECTED, C3: ConnectionState.RECOVERING})

    view = build_domain_view([A, B, C3], [A, B, C3], reports, taken_at=MOMENT)
    text = render_text(view)

    assert view.status is DomainState.DEGRADED
    assert "Node #2   - 127.0.2.3       - UNAVAILABLE" in text
    assert "       0        C  C  R" in text
    assert "       2        I  I  I" in text
    assert text.endswith("Domain State: DEGRADED\n")


def test_no_ready_node_means_the_domain_is_down() -> None:
    view = build_domain_view([A, B], [A, B], [None, None], taken_at=MOMENT)

    assert view.status is DomainState.DOWN


def test_rows_of_a_node_with_another_map_line_up_by_address() -> None:
    # Node C3 lists the nodes in another order (and one more); its cells still land under
    # the ctl's columns, and nodes it does not know are INVALID.
    odd = report(C3, {C3: CONNECTED, "127.0.2.9": ConnectionState.NEVER_CONNECTED, A: CONNECTED})
    reports = [*full_mesh()[:2], odd]

    view = build_domain_view([A, B, C3], [A, B, C3], reports, taken_at=MOMENT)

    assert [cell.status.letter for cell in view.nodes[2].connections] == ["C", "I", "C"]


def test_json_has_the_real_shape_and_key_order() -> None:
    reports = full_mesh()
    reports[1] = None
    view = build_domain_view([A, B, C3], [A, B, C3], reports, taken_at=MOMENT)

    document = json.loads(render_json(view))

    assert list(document) == ["nodes", "timestamp", "status"]
    assert document["status"] == "DEGRADED"
    assert document["timestamp"] == "3/5/2025 09:04:03.059"
    assert list(document["nodes"]) == ["0", "1", "2"]
    node0 = document["nodes"]["0"]
    assert list(node0) == ["status", "host", "connections", "changed", "version"]
    assert node0["status"] == "READY"
    assert node0["host"] == A
    assert node0["version"] == "580.95.05"
    assert node0["connections"]["1"] == {"host": B, "status": "CONNECTED", "changed": True}
    node1 = document["nodes"]["1"]
    assert node1["status"] == "UNAVAILABLE"
    assert {c["status"] for c in node1["connections"].values()} == {"INVALID"}
    assert "version" not in node1


def test_json_is_indented_with_space_after_colon() -> None:
    view = build_domain_view([A], [A], [report(A, {A: CONNECTED})], taken_at=MOMENT)

    text = render_json(view)

    assert '\n    "status": "UP"\n' in text


def test_hostnames_appear_only_when_asked_for() -> None:
    view = build_domain_view([A], [A], [report(A, {A: CONNECTED})], taken_at=MOMENT)

    assert "hostName" not in render_json(view)
    assert json.loads(render_json(view, hostnames=True))["nodes"]["0"]["hostName"] == "tray-1"
    assert "Node #0   - 127.0.2.1 (tray-1) - READY" in render_text(view, hostnames=True)


def test_a_refused_link_carries_the_reason_in_json() -> None:
    lonely = report(
        A,
        {A: CONNECTED, B: ConnectionState.NEVER_CONNECTED},
        refused={B: RefusalReason.NODE_MAP_MISMATCH},
    )
    view = build_domain_view([A, B], [A, B], [lonely, None], taken_at=MOMENT)

    cell = json.loads(render_json(view))["nodes"]["0"]["connections"]["1"]

    assert cell == {
        "host": B,
        "status": "NEVER_CONNECTED",
        "changed": True,
        "refused": "NODE_MAP_MISMATCH",
    }


def test_an_unresolvable_entry_is_shown_by_name_and_cannot_be_connected() -> None:
    view = build_domain_view(
        [A, "tray-9"], [A, None], [report(A, {A: CONNECTED}), None], taken_at=MOMENT
    )

    assert view.nodes[1].host == "tray-9"
    assert view.nodes[0].connections[1].status is ConnectionState.INVALID


def test_monitoring_marks_only_what_changed() -> None:
    first = build_domain_view([A, B], [A, B], full_mesh()[:2], taken_at=MOMENT)
    later = MOMENT + dt.timedelta(seconds=1)
    reports = full_mesh()[:2]
    reports[0] = report(A, {A: CONNECTED, B: ConnectionState.RECOVERING})
    second = build_domain_view([A, B], [A, B], reports, taken_at=later)

    marked = mark_changes(first, second)

    assert [node.changed for node in marked.nodes] == [True, False]
    assert [cell.changed for cell in marked.nodes[0].connections] == [False, True]
    assert differs(first, second)
    assert not differs(first, msgspec.structs.replace(first, taken_at=later))


def test_timestamp_is_month_day_year_without_padding() -> None:
    assert timestamp(dt.datetime(2026, 9, 4, 0, 37, 39, 905_500)) == "9/4/2026 00:37:39.905"
