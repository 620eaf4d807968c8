"""The roster and the static nodes_config.cfg: every slot listed, the same bytes on every node
whoever is a member, membership only in the name -> address mapping; slots by tray or claim."""

from __future__ import annotations

import itertools

import pytest

from services.imex_agent.names import (
    ADDRESS_ANNOTATION,
    CLIQUE_ANNOTATION,
    SLOT_ANNOTATION,
    SLOT_SOURCE_ANNOTATION,
    SLOT_SOURCE_CLAIMED,
    SLOT_SOURCE_PLATFORM,
)
from services.imex_agent.roster import (
    NVL72_SLOTS,
    MemberRecord,
    Roster,
    build_roster,
    choose_slot,
    record_of,
    render_nodes_config,
    slot_hostname,
    slot_hostnames,
)
from shared.crds.names import CLIQUE_LABEL
from shared.kube.meta import KubeObject, ObjectMeta

CLIQUE = "6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11.1"
OTHER = "0f6d1c1e-8c1d-4bb7-9d49-3f1e0f0c2a11.1"
SENTINEL = "127.255.255.254"


def rec(node: str, slot: int, *, address: str = "", source: str = "platform") -> MemberRecord:
    return MemberRecord(
        node=node, address=address or f"10.0.0.{slot + 1}", slot=slot, source=source
    )


def node_obj(name: str, *, labels: dict[str, str], annotations: dict[str, str]) -> KubeObject:
    return KubeObject(metadata=ObjectMeta(name=name, labels=labels, annotations=annotations))


@pytest.mark.parametrize(
    ("records", "members", "excluded"),
    [
        pytest.param([], [], [], id="empty"),
        pytest.param(
            [rec("c", 2), rec("a", 0), rec("b", 1)],
            [("a", 0), ("b", 1), ("c", 2)],
            [],
            id="ordered-by-slot-not-name",
        ),
        pytest.param(
            [rec("z", 0), rec("a", 17)], [("z", 0), ("a", 17)], [], id="gaps-kept-in-slot-order"
        ),
        pytest.param(
            [rec("b", 3, address="10.0.0.9"), rec("a", 3, address="10.0.0.8")],
            [("a", 3)],
            ["b"],
            id="contested-slot-lower-name-wins",
        ),
        pytest.param(
            [rec("a", 3, source="claimed"), rec("b", 3, address="10.0.0.9")],
            [("b", 3)],
            ["a"],
            id="platform-slot-beats-claim",
        ),
        pytest.param(
            [rec("a", 0, address="10.1.1.1"), rec("b", 1, address="10.1.1.1")],
            [("a", 0)],
            ["b"],
            id="shared-address-excluded",
        ),
        pytest.param(
            [rec("a", 17), rec("b", 18, address="10.0.1.18")],
            [("a", 17)],
            ["b"],
            id="slot-outside-the-map-excluded",
        ),
    ],
)
def test_build_roster(
    records: list[MemberRecord], members: list[tuple[str, int]], excluded: list[str]
) -> None:
    roster = build_roster(CLIQUE, records)
    assert [(m.node, m.slot) for m in roster.members] == members
    assert [e.node for e in roster.excluded] == excluded
    # The map is every slot, whoever holds them.
    assert roster.entries == slot_hostnames(CLIQUE, NVL72_SLOTS)


def test_a_slot_outside_the_map_says_why() -> None:
    roster = build_roster(CLIQUE, [rec("a", 4)], slots=4)
    assert roster.members == ()
    assert roster.excluded[0].reason == (
        "slot 4 is outside the node map of 4 slots (0..3, maxNodesPerIMEXDomain)"
    )


def test_nodes_config_lists_every_slot_and_depends_on_nothing_else() -> None:
    text = render_nodes_config(CLIQUE, slots=NVL72_SLOTS)
    names = [line for line in text.splitlines() if not line.startswith("#")]
    assert names == [slot_hostname(CLIQUE, slot) for slot in range(18)]
    assert len(set(names)) == 18
    assert text.endswith("\n")
    assert render_nodes_config(CLIQUE, slots=4).count("cdo-imex-") == 4


def test_membership_is_only_the_mapping_with_empty_slots_on_the_sentinel() -> None:
    records = [rec(f"node-{i}", slot) for i, slot in enumerate((4, 0, 9, 1, 2))]
    records.append(rec("late", 4, address="10.9.9.9", source="claimed"))  # loses slot 4
    mappings = {
        tuple(sorted(build_roster(CLIQUE, order).hosts(empty=SENTINEL).items()))
        for order in itertools.permutations(records)
    }
    assert len(mappings) == 1, "every member computes the same mapping"
    hosts = dict(mappings.pop())
    assert list(hosts) == list(slot_hostnames(CLIQUE, NVL72_SLOTS))
    held = {0: "10.0.0.1", 1: "10.0.0.2", 2: "10.0.0.3", 4: "10.0.0.5", 9: "10.0.0.10"}
    for slot in range(NVL72_SLOTS):
        assert hosts[slot_hostname(CLIQUE, slot)] == held.get(slot, SENTINEL)


def test_a_node_replaced_in_its_slot_changes_one_address() -> None:
    before = build_roster(CLIQUE, [rec("a", 0), rec("b", 1), rec("old", 2, address="10.0.0.3")])
    after = build_roster(CLIQUE, [rec("a", 0), rec("b", 1), rec("new", 2, address="10.0.0.30")])
    changed = {
        name
        for name, address in after.hosts(empty=SENTINEL).items()
        if before.hosts(empty=SENTINEL)[name] != address
    }
    assert changed == {slot_hostname(CLIQUE, 2)}
    assert after.hosts(empty=SENTINEL)[slot_hostname(CLIQUE, 2)] == "10.0.0.30"


def test_hostnames_are_stable_per_slot_and_distinct_between_cliques() -> None:
    assert slot_hostname(CLIQUE, 3) == slot_hostname(CLIQUE, 3)
    assert slot_hostname(CLIQUE, 3) != slot_hostname(OTHER, 3)
    assert slot_hostname(CLIQUE, 3) != slot_hostname(CLIQUE, 4)
    map_a = render_nodes_config(CLIQUE, slots=NVL72_SLOTS)
    map_b = render_nodes_config(OTHER, slots=NVL72_SLOTS)
    names_a = {line for line in map_a.splitlines() if not line.startswith("#")}
    names_b = {line for line in map_b.splitlines() if not line.startswith("#")}
    assert not names_a & names_b


def annotated(name: str, clique: str, **overrides: str) -> KubeObject:
    annotations = {
        CLIQUE_ANNOTATION: clique,
        ADDRESS_ANNOTATION: "10.0.0.7",
        SLOT_ANNOTATION: "6",
        SLOT_SOURCE_ANNOTATION: SLOT_SOURCE_PLATFORM,
        **overrides,
    }
    return node_obj(name, labels={CLIQUE_LABEL: clique}, annotations=annotations)


def test_record_of_reads_the_published_annotations() -> None:
    assert record_of(annotated("n", CLIQUE), CLIQUE) == MemberRecord(
        node="n", address="10.0.0.7", slot=6, source=SLOT_SOURCE_PLATFORM
    )


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(annotated("n", OTHER), id="labelled-for-another-clique"),
        pytest.param(
            node_obj("n", labels={CLIQUE_LABEL: CLIQUE}, annotations={}), id="not-published"
        ),
        pytest.param(
            node_obj(
                "n",
                labels={},
                annotations={
                    CLIQUE_ANNOTATION: CLIQUE,
                    ADDRESS_ANNOTATION: "10.0.0.7",
                    SLOT_ANNOTATION: "6",
                },
            ),
            id="not-labelled",
        ),
        pytest.param(
            node_obj(
                "n",
                labels={CLIQUE_LABEL: CLIQUE},
                annotations={
                    CLIQUE_ANNOTATION: OTHER,
                    ADDRESS_ANNOTATION: "10.0.0.7",
                    SLOT_ANNOTATION: "6",
                },
            ),
            id="published-for-the-old-clique",
        ),
        pytest.param(annotated("n", CLIQUE, **{SLOT_ANNOTATION: "six"}), id="bad-slot"),
        pytest.param(annotated("n", CLIQUE, **{SLOT_ANNOTATION: "-1"}), id="negative-slot"),
        pytest.param(annotated("n", CLIQUE, **{ADDRESS_ANNOTATION: ""}), id="no-address"),
    ],
)
def test_record_of_ignores_nodes_that_are_not_members(obj: KubeObject) -> None:
    assert record_of(obj, CLIQUE) is None


@pytest.mark.parametrize(
    ("platform", "current", "others", "expected"),
    [
        pytest.param(7, None, [rec("x", 7)], (7, SLOT_SOURCE_PLATFORM), id="platform-slot-wins"),
        pytest.param(None, None, [], (0, SLOT_SOURCE_CLAIMED), id="first-claim"),
        pytest.param(
            None,
            None,
            [rec("x", 0), rec("y", 1), rec("z", 3)],
            (2, SLOT_SOURCE_CLAIMED),
            id="lowest-free-slot",
        ),
        pytest.param(
            None,
            rec("me", 5, source="claimed"),
            [rec("x", 0)],
            (5, SLOT_SOURCE_CLAIMED),
            id="claim-is-sticky",
        ),
        pytest.param(
            None,
            rec("me", 1, source="claimed"),
            [rec("a", 1, source="claimed"), rec("b", 0)],
            (2, SLOT_SOURCE_CLAIMED),
            id="beaten-claim-moves",
        ),
        pytest.param(
            None,
            rec("me", 1, source="claimed"),
            [rec("zz", 1, source="claimed")],
            (1, SLOT_SOURCE_CLAIMED),
            id="claim-kept-against-a-weaker-rival",
        ),
        pytest.param(
            None,
            rec("me", 4, source="platform"),
            [rec("a", 0)],
            (1, SLOT_SOURCE_CLAIMED),
            id="lost-platform-info-claims-afresh",
        ),
    ],
)
def test_choose_slot(
    platform: int | None,
    current: MemberRecord | None,
    others: list[MemberRecord],
    expected: tuple[int, str],
) -> None:
    assert choose_slot(node="me", platform_slot=platform, current=current, others=others) == (
        expected
    )


def test_claims_converge_to_distinct_slots() -> None:
    """Nodes without platform info that claim at once end with one slot each."""
    names = ["d", "b", "a", "c"]
    published: dict[str, MemberRecord] = {}
    for _ in range(len(names) + 1):
        snapshot = dict(published)
        for name in names:  # everybody decides from the same (stale) view, as in a race
            others = [r for n, r in snapshot.items() if n != name]
            slot, source = choose_slot(
                node=name, platform_slot=None, current=snapshot.get(name), others=others
            )
            published[name] = MemberRecord(
                node=name, address=f"10.0.1.{ord(name)}", slot=slot, source=source
            )
    roster = build_roster(CLIQUE, published.values())
    assert sorted(m.node for m in roster.members) == sorted(names)
    assert sorted(m.slot for m in roster.members) == [0, 1, 2, 3]


def test_roster_lookup_helpers() -> None:
    roster = build_roster(CLIQUE, [rec("a", 0), rec("b", 1)])
    assert roster.member("b") is not None
    assert roster.member("nope") is None
    assert roster.by_address("10.0.0.1") == roster.members[0]
    assert roster.at(1) == roster.member("b")
    assert roster.at(2) is None
    assert Roster(clique=CLIQUE, slots=3).entries == slot_hostnames(CLIQUE, 3)
