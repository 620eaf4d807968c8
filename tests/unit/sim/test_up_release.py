"""``cdo sim up`` refuses release settings kube-apiserver would refuse, before it starts
anything, with kube-apiserver's message."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--kubernetes-version", "1.33"], "Kubernetes version '1.33' is not emulated"),
        (["--feature-gates", "NoSuchGate=true"], "unrecognized feature gate: NoSuchGate"),
        (
            ["--kubernetes-version", "1.35", "--feature-gates", "DynamicResourceAllocation=false"],
            "feature is locked to true",
        ),
        (["--feature-gates", "DRADeviceTaints"], "missing bool value for DRADeviceTaints"),
        (
            [
                "--kubernetes-version",
                "1.35",
                "--runtime-config",
                "resource.k8s.io/v1beta2/devicetaintrules",
            ],
            "Kubernetes 1.35 has no such API",
        ),
    ],
)
def test_release_settings_kube_apiserver_refuses_stop_up_before_it_starts(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    code = main(["sim", "up", *flags, "--state-dir", str(state)])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not state.exists(), "nothing is started or written"
