"""Channel device nodes, the checkpoint, and the ResourceSlice's devices."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import msgspec
import pytest

from services.imex_agent.cdi import SliceSeat
from services.imex_agent.channels import (
    ChannelDeviceError,
    ChannelDevices,
    parse_major,
    resolve_major,
)
from services.imex_agent.checkpoint import (
    CheckpointData,
    CheckpointError,
    CheckpointStore,
    ClaimRecord,
    DeviceRecord,
)
from services.imex_agent.resourceslice import desired_devices, desired_slice, slice_name
from services.imex_agent.settings import DraSettings

PROC_DEVICES = """Character devices:
  1 mem
195 nvidia
508 nvidia-caps-imex-channels
509 nvidia-caps

Block devices:
  8 sd
508 nvidia-caps-imex-channels-fake
"""


def test_major_number_from_proc_devices() -> None:
    assert parse_major(PROC_DEVICES) == 508
    assert parse_major("Character devices:\n  1 mem\n") is None
    assert parse_major("Block devices:\n508 nvidia-caps-imex-channels\n") is None


def test_major_from_settings_or_a_clear_error(tmp_path: Path) -> None:
    proc = tmp_path / "devices"
    proc.write_text("Character devices:\n  1 mem\n")
    assert resolve_major(DraSettings(device_major=300, proc_devices=str(proc))) == 300
    with pytest.raises(ChannelDeviceError, match="lists no nvidia-caps-imex-channels"):
        resolve_major(DraSettings(proc_devices=str(proc)))
    with pytest.raises(ChannelDeviceError, match="cannot read"):
        resolve_major(DraSettings(proc_devices=str(tmp_path / "missing")))


def test_placeholder_devices(tmp_path: Path) -> None:
    devices = ChannelDevices(root=tmp_path / "dev", major=508, mode="placeholder")
    assert devices.present() == set()
    assert devices.ensure(5) is True
    assert devices.ensure(5) is False
    assert (tmp_path / "dev" / "channel5").read_text() == "c 508:5\n"
    (tmp_path / "dev" / "other").write_text("")
    assert devices.present() == {5}
    assert devices.remove(5) is True
    assert devices.remove(5) is False
    with pytest.raises(ChannelDeviceError, match=r"outside 0\.\.2047"):
        devices.ensure(2048)


def may_mknod(directory: Path) -> bool:
    probe = directory / "probe"
    try:
        os.mknod(probe, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        return False
    probe.unlink()
    return True


def test_mknod_mode_makes_character_devices_or_says_what_is_missing(tmp_path: Path) -> None:
    devices = ChannelDevices(root=tmp_path / "dev", major=508, mode="mknod")
    if not may_mknod(tmp_path):
        with pytest.raises(ChannelDeviceError, match="CAP_MKNOD"):
            devices.ensure(3)
        return
    assert devices.ensure(3) is True
    info = os.lstat(tmp_path / "dev" / "channel3")
    assert stat.S_ISCHR(info.st_mode)
    assert (os.major(info.st_rdev), os.minor(info.st_rdev)) == (508, 3)
    assert devices.ensure(3) is False


def record(uid: str, channel: int, *, seat: SliceSeat | None = None) -> ClaimRecord:
    return ClaimRecord(
        uid=uid,
        namespace="ns",
        name=f"claim-{uid}",
        domain_namespace="ns",
        domain_name="d",
        domain_uid="du",
        channel=channel,
        devices=(DeviceRecord(request="channel", pool="n1", device="attach-0"),),
        cdi_ids=(f"cdo.dev/imex-channel={uid}",),
        seat=seat,
    )


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "plugin" / "checkpoint.json")
    assert store.load() == CheckpointData()
    data = CheckpointData(claims={"a": record("a", 4)}, channels=[4, 4])
    store.save(data)
    loaded = store.load()
    assert loaded.claims == {"a": record("a", 4)}
    assert loaded.channels == [4]
    assert loaded.channels_in_use() == {4}


def test_checkpoint_keeps_the_pods_seat_and_reads_records_of_the_previous_release(
    tmp_path: Path,
) -> None:
    store = CheckpointStore(tmp_path / "checkpoint.json")
    seat = SliceSeat(clique="c.1", index=1, size=4, rank=6, slice_rank=2)
    store.save(CheckpointData(claims={"a": record("a", 4, seat=seat)}, channels=[4]))
    assert store.load().claims["a"].seat == seat
    # A record the previous release wrote has no seat.
    old = msgspec.json.encode(
        {
            "version": 1,
            "claims": {
                "b": {k: v for k, v in msgspec.to_builtins(record("b", 5)).items() if k != "seat"}
            },
            "channels": [5],
        }
    )
    assert b"seat" not in old
    store.path.write_bytes(old)
    assert store.load().claims == {"b": record("b", 5)}


def test_damaged_checkpoint_is_an_error_not_an_empty_start(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_text('{"version": 1, "claims": {"a": {"uid": ')
    with pytest.raises(CheckpointError, match="damaged"):
        CheckpointStore(path).load()
    path.write_text('{"version": 99}')
    with pytest.raises(CheckpointError, match="version 99"):
        CheckpointStore(path).load()


def test_slice_devices() -> None:
    devices = desired_devices(node="n1", clique="c.1", attachments=3)
    assert [device.name for device in devices] == ["attach-0", "attach-1", "attach-2"]
    assert devices[2].attributes["index"].integer == 2
    assert devices[0].attributes["clique"].string == "c.1"
    assert desired_devices(node="n1", clique=None, attachments=3) == ()
    # A node on no NVLink fabric: attachments for domains without IMEX, in no clique.
    without = desired_devices(node="n1", clique="", attachments=2)
    assert [sorted(device.attributes) for device in without] == [["index", "node"]] * 2
    body = desired_slice(node="n1", node_uid="u", clique="c.1", attachments=2, generation=4)
    assert body["metadata"]["name"] == slice_name("n1") == "n1-compute-domain.cdo.dev"
    assert body["spec"]["pool"] == {"name": "n1", "generation": 4, "resourceSliceCount": 1}
    assert body["spec"]["devices"][1] == {
        "name": "attach-1",
        "attributes": {
            "clique": {"string": "c.1"},
            "node": {"string": "n1"},
            "index": {"int": 1},
        },
    }
