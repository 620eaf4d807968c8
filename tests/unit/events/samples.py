"""One filled-in example of every event type, for round-trip tests."""

from shared.events import (
    CliqueCapacity,
    DomainMember,
    DomainMembershipChanged,
    DomainSlice,
    Event,
    ImexPeer,
    NodeCapacity,
    NodeFault,
    NodeImexState,
    NodeRecovered,
)

CLIQUE = "2f1c8a52-7d6b-4cf1-9e0a-56c3c9e0b1a4.1"
OTHER_CLIQUE = "2f1c8a52-7d6b-4cf1-9e0a-56c3c9e0b1a4.2"


def sample_events() -> list[Event]:
    return [
        DomainMembershipChanged(
            namespace="default",
            name="training-domain-1",
            uid="uid-1",
            generation=2,
            phase="Ready",
            clique=CLIQUE,
            channel=3,
            size=2,
            members=(
                DomainMember(
                    node="gb200-r1-n00", index=0, address="127.0.1.1", pods=1, gpus=4, clique=CLIQUE
                ),
                DomainMember(node="gb200-r1-n01.lab", index=1, status="Ready", clique=CLIQUE),
            ),
            slices=(
                DomainSlice(
                    index=0,
                    clique=CLIQUE,
                    channel=3,
                    size=2,
                    pods=1,
                    running=1,
                    nodes=("gb200-r1-n00", "gb200-r1-n01.lab"),
                ),
            ),
        ),
        DomainMembershipChanged(
            namespace="default",
            name="two-racks",
            uid="uid-2",
            generation=1,
            phase="Placed",
            size=2,
            members=(
                DomainMember(node="gb200-r1-n00", index=0, pods=1, gpus=4, clique=CLIQUE),
                DomainMember(node="gb200-r2-n00", index=0, pods=1, gpus=4, clique=OTHER_CLIQUE),
            ),
            slices=(
                DomainSlice(index=0, clique=CLIQUE, channel=3, size=1, pods=1, running=1),
                DomainSlice(index=1, clique=OTHER_CLIQUE, channel=0, first_rank=1, size=1, pods=1),
            ),
            reason="PodsNotRunning",
        ),
        CliqueCapacity(
            clique=CLIQUE,
            cluster_uuid=CLIQUE.split(".")[0],
            nodes=(NodeCapacity(node="gb200-r1-n00", slot=0, gpus_total=4, gpus_free=2),),
            gpus_total=4,
            gpus_free=2,
            domains=1,
            channels_free=2047,
        ),
        NodeFault(
            node="gb200-r1-n00",
            clique=CLIQUE,
            gpus=("GPU-1",),
            signal="xid",
            code=79,
            severity="fatal",
            action="drain_node",
            message="fell off the bus",
        ),
        NodeRecovered(node="gb200-r1-n00", clique=CLIQUE, gpus=("GPU-1",), signals=("xid",)),
        NodeImexState(
            node="gb200-r1-n00",
            clique=CLIQUE,
            daemon_state="READY",
            domain_state="UP",
            peers=(ImexPeer(node="gb200-r1-n01", address="127.0.1.2", state="CONNECTED"),),
            config_digest="abc",
            restarts=1,
        ),
    ]
