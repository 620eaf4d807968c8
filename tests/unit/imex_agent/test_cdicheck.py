"""Whether a node's runtime injects CDI devices: the finding per runtime, version and
containerd configuration, and containerd's files (with their imports) read below a root."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.imex_agent.cdicheck import ConfigFile, RuntimeFacts, cdi_finding, parse_runtime
from services.imex_agent.runtimecheck import read_containerd_config

V2_ON = '[plugins."io.containerd.grpc.v1.cri"]\nenable_cdi = true\n'
V2_OFF = '[plugins."io.containerd.grpc.v1.cri"]\nenable_cdi = false\n'
V3_OFF = 'version = 3\n[plugins."io.containerd.cri.v1.runtime"]\nenable_cdi = false\n'
OTHER = '[plugins."io.containerd.grpc.v1.cri".containerd]\nsnapshotter = "overlayfs"\n'
MAIN = "/etc/containerd/config.toml"
DROP_IN = "/etc/containerd/conf.d/10-cdi.toml"


def files(*texts: str | None) -> tuple[ConfigFile, ...]:
    paths = [MAIN, DROP_IN]
    return tuple(
        ConfigFile(path=paths[i], text=text, error="" if text is not None else "No such file")
        for i, text in enumerate(texts)
    )


@pytest.mark.parametrize(
    ("runtime", "config", "status", "says"),
    [
        ("cri-o://1.31.2", (), "True", "CRI-O enables CDI from 1.23 on"),
        ("cri-o://1.22.0", (), "False", "upgrade CRI-O"),
        ("containerd://2.1.4", (), "True", "containerd 2.x enables CDI by default"),
        ("containerd://v2.0.0", files(OTHER), "True", f"{MAIN} leaves it on"),
        ("containerd://2.1.4", files(V3_OFF), "False", f"enable_cdi = false in {MAIN}"),
        ("containerd://2.1.4", files(V2_OFF), "False", "restart containerd"),
        ("containerd://1.7.27", files(V2_ON), "True", f"enable_cdi = true in {MAIN}"),
        ("containerd://1.7.27", files(OTHER), "False", "does not set it"),
        # The drop-in, read after the main file, wins.
        ("containerd://1.7.27", files(V2_OFF, V2_ON), "True", f"enable_cdi = true in {DROP_IN}"),
        ("containerd://1.7.27", files(None), "Unknown", "could not read"),
        ("containerd://1.7.27", (), "Unknown", "mount /etc/containerd"),
        ("containerd://1.7.27", files("enable_cdi = = true"), "Unknown", "is not TOML"),
        ("containerd://1.6.20", (), "False", "containerd before 1.7 has no CDI"),
        ("docker://24.0.7", (), "Unknown", "cannot tell"),
        ("", (), "Unknown", "an unnamed runtime"),
    ],
)
def test_the_finding_per_runtime_and_configuration(
    runtime: str, config: tuple[ConfigFile, ...], status: str, says: str
) -> None:
    finding = cdi_finding(RuntimeFacts(runtime_version=runtime, config=config))
    assert finding.status == status
    assert finding.reason == {"True": "CdiEnabled", "False": "CdiDisabled"}.get(
        status, "CdiUnknown"
    )
    assert says in finding.message


def test_runtime_versions_parse() -> None:
    assert parse_runtime("containerd://v2.1.4") == ("containerd", (2, 1))
    assert parse_runtime("cri-o://1.31.2") == ("cri-o", (1, 31))
    assert parse_runtime("containerd://main") == ("containerd", None)


def test_the_configuration_and_its_imports_are_read_below_the_root(tmp_path: Path) -> None:
    etc = tmp_path / "etc" / "containerd"
    (etc / "conf.d").mkdir(parents=True)
    (etc / "config.toml").write_text(
        'version = 2\nimports = ["/etc/containerd/conf.d/*.toml", "extra.toml", '
        '"/opt/elsewhere.toml"]\n' + OTHER
    )
    (etc / "conf.d" / "20-b.toml").write_text(V2_OFF)
    (etc / "conf.d" / "10-a.toml").write_text(V2_ON)
    (etc / "extra.toml").write_text(OTHER)
    read = read_containerd_config(tmp_path)
    assert [file.path for file in read] == [
        MAIN,
        "/etc/containerd/conf.d/10-a.toml",
        "/etc/containerd/conf.d/20-b.toml",
        "/etc/containerd/extra.toml",
        "/opt/elsewhere.toml",
    ]
    assert read[-1].text is None and read[-1].error
    finding = cdi_finding(RuntimeFacts(runtime_version="containerd://1.7.27", config=read))
    assert (finding.status, finding.reason) == ("False", "CdiDisabled")
    assert "/etc/containerd/conf.d/20-b.toml" in finding.message
    assert read_containerd_config(tmp_path / "nothing")[0].error
