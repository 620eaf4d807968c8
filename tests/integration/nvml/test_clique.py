"""node_clique and node_placement as pure functions over constructed readings."""

from __future__ import annotations

import uuid

from shared.nvml import (
    CliqueStatus,
    FabricInfo,
    FabricState,
    PlatformInfo,
    clique_of,
    node_clique,
    node_placement,
)

RACK_A = uuid.UUID("11111111-1111-4111-8111-111111111111")
RACK_B = uuid.UUID("22222222-2222-4222-8222-222222222222")


def fabric(
    gpu: int,
    *,
    cluster: uuid.UUID = RACK_A,
    clique_id: int = 1,
    state: int = FabricState.COMPLETED,
    status: int = 0,
) -> FabricInfo:
    return FabricInfo(
        gpu_index=gpu,
        version=3,
        state=state,
        status=status,
        cluster_uuid=cluster,
        clique_id=clique_id,
        health_mask=0,
        health_summary=1,
    )


def test_clique_string_is_uuid_dot_clique_id() -> None:
    assert clique_of(fabric(0, clique_id=7)) == "11111111-1111-4111-8111-111111111111.7"


def test_ready_when_every_gpu_agrees() -> None:
    clique = node_clique([fabric(gpu) for gpu in range(4)])
    assert clique.status is CliqueStatus.READY
    assert (clique.cluster_uuid, clique.clique_id) == (RACK_A, 1)


def test_same_clique_id_in_two_racks_disagrees() -> None:
    clique = node_clique([fabric(0), fabric(1, cluster=RACK_B)])
    assert clique.status is CliqueStatus.DISAGREE
    assert [group.gpus for group in clique.groups] == [(0,), (1,)]
    assert "GPUs [1]" in clique.reason


def test_not_supported_everywhere_is_not_a_fault() -> None:
    infos = [fabric(gpu, state=FabricState.NOT_SUPPORTED) for gpu in range(2)]
    assert node_clique(infos).status is CliqueStatus.NOT_SUPPORTED


def test_one_gpu_not_started_blocks_the_clique() -> None:
    clique = node_clique([fabric(0), fabric(1, state=FabricState.NOT_STARTED)])
    assert (clique.status, clique.gpus, clique.clique) == (CliqueStatus.PENDING, (1,), None)
    assert "NOT_STARTED" in clique.reason


def test_unknown_state_is_pending() -> None:
    assert node_clique([fabric(0, state=9)]).status is CliqueStatus.PENDING


def test_zero_cluster_uuid_is_unassigned() -> None:
    clique = node_clique([fabric(0, cluster=uuid.UUID(int=0))])
    assert clique.status is CliqueStatus.UNASSIGNED


def test_no_gpus() -> None:
    assert node_clique([]).status is CliqueStatus.NO_GPUS


def platform(gpu: int, *, tray: int = 3, serial: str = "1821324000123") -> PlatformInfo:
    return PlatformInfo(
        gpu_index=gpu,
        version=2,
        tray_index=tray,
        slot_number=tray + 1,
        host_id=1,
        module_id=gpu + 1,
        peer_type=1,
        chassis_serial=serial,
        ib_guid="00" * 16,
    )


def test_placement_needs_every_gpu_to_agree() -> None:
    placement = node_placement([platform(0), platform(1)])
    assert placement is not None
    assert (placement.tray_index, placement.slot_number) == (3, 4)
    assert node_placement([platform(0), platform(1, tray=4)]) is None
    assert node_placement([platform(0), None]) is None
    assert node_placement([]) is None
