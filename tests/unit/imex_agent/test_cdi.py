"""CDI specs: every field CDI 0.6.0 requires, the channel device, domain and slice in the env."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import msgspec
import pytest

from services.imex_agent.cdi import (
    CdiStore,
    ChannelGrant,
    SliceSeat,
    device_id,
    encode_spec,
    render_spec,
    spec_file_name,
)
from tests.unit.imex_agent.cdi_schema import CDI_SPEC_0_6

UID = "0b9c1a52-5f64-4f0e-9a0e-3f5d8b0f4c21"
SEAT = SliceSeat(
    clique="c0ffee00-0000-4000-8000-000000000001.3", index=2, size=8, rank=21, slice_rank=5
)
GRANT = ChannelGrant(
    claim_uid=UID,
    domain_namespace="team-a",
    domain_name="train",
    domain_uid="d0d0",
    channel=17,
    seat=SEAT,
)


def test_spec_has_every_field_cdi_requires() -> None:
    document = json.loads(encode_spec(render_spec(GRANT, major=234, host_dir=Path("/dev/x"))))
    jsonschema.validate(document, CDI_SPEC_0_6)
    assert document["cdiVersion"] == "0.6.0"
    assert document["kind"] == "cdo.dev/imex-channel"
    (device,) = document["devices"]
    assert device["name"] == UID
    edits = device["containerEdits"]
    assert edits["deviceNodes"] == [
        {
            "path": "/dev/nvidia-caps-imex-channels/channel17",
            "hostPath": "/dev/x/channel17",
            "type": "c",
            "major": 234,
            "minor": 17,
            "permissions": "rw",
        }
    ]
    assert edits["env"] == [
        "CDO_COMPUTE_DOMAIN=team-a/train",
        "CDO_COMPUTE_DOMAIN_UID=d0d0",
        "CDO_IMEX_CHANNEL=17",
        "CDO_CLIQUE_ID=c0ffee00-0000-4000-8000-000000000001.3",
        "CDO_SLICE_INDEX=2",
        "CDO_SLICE_SIZE=8",
        "CDO_SLICE_RANK=5",
        "CDO_RANK=21",
        # NVIDIA's names and value forms (kubernetes-sigs/dra-driver-nvidia-gpu).
        "CLIQUE_ID=c0ffee00-0000-4000-8000-000000000001.3",
        "COMPUTE_DOMAIN_UUID=d0d0",
        "COMPUTE_DOMAIN_NAME=train",
        "COMPUTE_DOMAIN_NAMESPACE=team-a",
    ]


def test_the_same_grant_renders_the_same_bytes() -> None:
    def render(grant: ChannelGrant) -> bytes:
        return encode_spec(render_spec(grant, major=234, host_dir=Path("/dev/x")))

    copy = msgspec.convert(msgspec.to_builtins(GRANT), ChannelGrant)
    assert render(copy) == render(GRANT)
    other = msgspec.structs.replace(
        GRANT, seat=msgspec.structs.replace(SEAT, slice_rank=6, rank=22)
    )
    assert render(other) != render(GRANT)


def test_a_claim_the_previous_release_prepared_keeps_its_environment() -> None:
    """Its checkpoint record has no seat: the spec is re-rendered exactly as it was written."""
    legacy = msgspec.structs.replace(GRANT, seat=None)
    (device,) = render_spec(legacy, major=234, host_dir=Path("/dev/x")).devices
    assert device.container_edits.env == (
        "CDO_COMPUTE_DOMAIN=team-a/train",
        "CDO_COMPUTE_DOMAIN_UID=d0d0",
        "CDO_IMEX_CHANNEL=17",
    )


def test_a_pod_without_gpus_gets_the_channel_and_its_slice_but_no_rank() -> None:
    """A pod that asks only for the channel holds no rank: no rank variables, the rest as any
    member's (NVIDIA's four variables included)."""
    seat = SliceSeat(clique=SEAT.clique, index=0, size=0)
    grant = msgspec.structs.replace(GRANT, seat=seat)
    (device,) = render_spec(grant, major=234, host_dir=Path("/dev/x")).devices
    assert device.container_edits.env == (
        "CDO_COMPUTE_DOMAIN=team-a/train",
        "CDO_COMPUTE_DOMAIN_UID=d0d0",
        "CDO_IMEX_CHANNEL=17",
        "CDO_CLIQUE_ID=c0ffee00-0000-4000-8000-000000000001.3",
        "CDO_SLICE_INDEX=0",
        "CDO_SLICE_SIZE=0",
        "CLIQUE_ID=c0ffee00-0000-4000-8000-000000000001.3",
        "COMPUTE_DOMAIN_UUID=d0d0",
        "COMPUTE_DOMAIN_NAME=train",
        "COMPUTE_DOMAIN_NAMESPACE=team-a",
    )
    assert [node.path for node in device.container_edits.device_nodes] == [
        "/dev/nvidia-caps-imex-channels/channel17"
    ]


def test_device_id_and_file_name_follow_cdi_naming() -> None:
    assert device_id(UID) == f"cdo.dev/imex-channel={UID}"
    assert spec_file_name(UID) == f"cdo.dev-imex-channel_{UID}.json"
    with pytest.raises(ValueError, match="not a valid CDI device name"):
        device_id("-bad/uid")


def test_store_writes_lists_and_removes(tmp_path: Path) -> None:
    store = CdiStore(tmp_path / "cdi")
    spec = render_spec(GRANT, major=234, host_dir=tmp_path)
    assert store.write(UID, spec) is True
    assert store.write(UID, spec) is False
    (tmp_path / "cdi" / "vendor-other_x.json").write_text("{}")
    assert store.claim_uids() == {UID}
    assert store.remove(UID) is True
    assert store.remove(UID) is False
    assert store.claim_uids() == set()
