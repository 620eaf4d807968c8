"""CDI specs: every field CDI 0.6.0 requires, the channel device, the domain in the env."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from services.imex_agent.cdi import (
    CdiStore,
    ChannelGrant,
    device_id,
    encode_spec,
    render_spec,
    spec_file_name,
)
from tests.unit.imex_agent.cdi_schema import CDI_SPEC_0_6

UID = "0b9c1a52-5f64-4f0e-9a0e-3f5d8b0f4c21"
GRANT = ChannelGrant(
    claim_uid=UID,
    domain_namespace="team-a",
    domain_name="train",
    domain_uid="d0d0",
    channel=17,
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
