"""Membership events: built from the assessment, published once per real change."""

from __future__ import annotations

import msgspec

from services.domain_controller.membership import (
    DELETED,
    Ledger,
    content,
    final_event,
    membership_event,
)
from services.domain_controller.status import compute_status
from shared.crds.computedomain import ComputeDomainStatus
from shared.events import DomainMembershipChanged
from shared.kube.keys import ObjectKey

from .builders import CLIQUE, CLIQUE_B, NOW, TWO_SLICES_PODS, facts, pod, two_slice_facts

KEY = ObjectKey(namespace="ml", name="train")


def event_for(**changes: object) -> DomainMembershipChanged:
    assessment = compute_status(facts(**changes), previous=ComputeDomainStatus(), now=NOW)
    return membership_event(KEY, uid="u1", generation=3, assessment=assessment)


def test_event_carries_phase_clique_channel_size_and_members() -> None:
    event = membership_event(
        KEY,
        uid="u1",
        generation=3,
        assessment=compute_status(facts(), previous=ComputeDomainStatus(), now=NOW),
    )
    assert (event.namespace, event.name, event.uid, event.generation) == ("ml", "train", "u1", 3)
    assert (event.phase, event.clique, event.channel, event.size) == ("Ready", CLIQUE, 7, 3)
    assert [(m.node, m.index, m.pods, m.status) for m in event.members] == [
        ("n1", 0, 2, "Ready"),
        ("n2", 1, 1, "Ready"),
    ]
    assert [(s.index, s.clique, s.channel, s.size, s.pods, s.running) for s in event.slices] == [
        (0, CLIQUE, 7, 3, 3, 3)
    ]
    assert event.subject() == "cdo.v1.domain.ml.train.membership"


def test_event_of_a_domain_in_two_cliques_carries_its_slices_and_no_one_clique() -> None:
    assessment = compute_status(two_slice_facts(), previous=ComputeDomainStatus(), now=NOW)
    event = membership_event(KEY, uid="u1", generation=3, assessment=assessment)
    assert (event.phase, event.clique, event.channel, event.size) == ("Ready", "", None, 6)
    assert [(s.index, s.clique, s.channel, s.first_rank, s.nodes) for s in event.slices] == [
        (0, CLIQUE, 7, 0, ("a1", "a2")),
        (1, CLIQUE_B, 2, 3, ("b1", "b2")),
    ]
    assert [(m.node, m.clique) for m in event.members] == [
        ("a1", CLIQUE),
        ("a2", CLIQUE),
        ("b1", CLIQUE_B),
        ("b2", CLIQUE_B),
    ]


def test_a_pod_starting_in_one_slice_is_a_change() -> None:
    ledger = Ledger()
    ready = membership_event(
        KEY,
        uid="u1",
        generation=3,
        assessment=compute_status(two_slice_facts(), previous=ComputeDomainStatus(), now=NOW),
    )
    ledger.record(KEY, ready)
    pods = (*TWO_SLICES_PODS[:5], pod("p5", "b2", "Pending"))
    waiting = membership_event(
        KEY,
        uid="u1",
        generation=3,
        assessment=compute_status(
            two_slice_facts(pods=pods), previous=ComputeDomainStatus(), now=NOW
        ),
    )
    assert ledger.changed(KEY, waiting)
    assert [s.running for s in waiting.slices] == [3, 2]


def test_identity_fields_do_not_make_a_change() -> None:
    first, second = event_for(), event_for()
    assert first != second  # new id and time
    assert content(first) == content(second)


def test_ledger_publishes_only_real_changes() -> None:
    ledger = Ledger()
    ready = event_for()
    assert ledger.changed(KEY, ready)
    ledger.record(KEY, ready)
    assert not ledger.changed(KEY, event_for())
    pending = event_for(pods=(pod("p1", "n1", "Pending"),))
    assert ledger.changed(KEY, pending)


def test_ledger_starts_from_snapshots_and_forgets() -> None:
    ledger = Ledger()
    ready = event_for()
    ledger.load([ready])
    entry = ledger.get(KEY)
    assert entry is not None and (entry.uid, entry.phase) == ("u1", "Ready")
    assert not ledger.changed(KEY, event_for())
    assert ledger.domains() == [KEY]
    ledger.forget(KEY)
    assert ledger.get(KEY) is None and len(ledger) == 0


def test_final_event_empties_the_domain() -> None:
    final = final_event(KEY, uid="u1", generation=4)
    assert (final.phase, final.reason, final.members, final.channel) == (DELETED, DELETED, (), None)
    assert msgspec.json.decode(msgspec.json.encode(final), type=type(final)) == final
