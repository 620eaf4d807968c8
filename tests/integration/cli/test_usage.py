"""Every command explains itself, a wrong command line exits 2, and a cluster or NATS that does
not answer (or that nothing names) exits 3 with a message that says which and where."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main
from sim.natsserver import free_port
from tests.integration.cli.conftest import cdo, dead_kubeconfig

COMMANDS = [
    [],
    ["status"],
    ["explain"],
    ["top"],
    ["completion"],
    ["events"],
    ["sim"],
    ["sim", "up"],
    ["sim", "down"],
    ["sim", "power"],
    ["sim", "fault"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "cdo")
def test_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: cdo {' '.join(command)}".rstrip())
    assert "exit codes: 0 ok, 1 failed, 2 usage, 3 cluster or NATS unreachable" in out
    assert "--nats-url" in out


def test_the_console_entry_point_runs() -> None:
    result = cdo("--help")
    assert result.code == 0
    assert "status" in result.stdout and "events" in result.stdout and "sim" in result.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "required: COMMAND"),
        (["sim"], "required: ACTION"),
        (["events", "--since", "10m", "--from-seq", "3"], "not allowed with argument"),
        (["events", "--since", "yesterday"], "--since 'yesterday'"),
        (["events", "--from-seq", "0"], "--from-seq counts from 1"),
        (["explain"], "required: DOMAIN|pod/NAME"),
        (["explain", "node/n1"], "give a ComputeDomain name, computedomain/NAME or pod/NAME"),
        (["explain", "pod/"], "name the pod after 'pod/'"),
        (["explain", "pod/p", "-A"], "explain pod/NAME needs a namespace (-n), not -A"),
        (["explain", "d", "-n", "ml", "-A"], "argument -A/--all-namespaces: not allowed with"),
        (["explain", "d", "-o", "wide"], "argument -o/--output: invalid choice: 'wide'"),
        (["status", "-o", "table"], "argument -o/--output: invalid choice: 'table'"),
        (["top"], "required: resource"),
        (["top", "nodes"], "argument resource: invalid choice: 'nodes'"),
        (["completion", "fish"], "argument shell: invalid choice: 'fish'"),
        (["status", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["sim", "power", "sideways", "n1"], "invalid choice"),
        (["sim", "fault", "n1"], "give exactly one fault"),
        (["sim", "fault", "n1", "--xid", "79", "--clear"], "got --xid, --clear"),
    ],
)
def test_usage_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    try:
        code = main([*argv, "--state-dir", str(tmp_path), "--nats-url", "nats://127.0.0.1:1"])
    except SystemExit as exit_info:  # argparse's own errors
        code = int(exit_info.code or 0)
    assert code == 2
    assert message in capsys.readouterr().err


def test_unreachable_nats_exits_3(tmp_path: Path) -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    result = cdo("events", "--nats-url", url, "--state-dir", str(tmp_path))
    assert result.code == 3
    assert f"NATS at {url} (from --nats-url) does not answer" in result.stderr
    followed = cdo("events", "--follow", "--nats-url", url, "--state-dir", str(tmp_path))
    assert followed.code == 3


def test_unreachable_cluster_exits_3_and_says_what_it_tried(tmp_path: Path) -> None:
    config = dead_kubeconfig(tmp_path / "kubeconfig", free_port())
    result = cdo(
        "status",
        "--kubeconfig",
        str(config),
        "--nats-url",
        f"nats://127.0.0.1:{free_port()}",
        "--state-dir",
        str(tmp_path),
    )
    assert result.code == 3
    assert "the Kubernetes API does not answer" in result.stderr
    assert str(config) in result.stderr
    assert "unavailable" in result.stdout

    nothing = cdo("status", "--state-dir", str(tmp_path / "empty"),
                  env={"CDO_NATS_URL": "", "HOME": str(tmp_path)})  # fmt: skip
    assert nothing.code == 3
    assert "no cluster to ask" in nothing.stderr


@pytest.mark.parametrize("argv", [["explain", "d"], ["top", "cliques"]])
def test_without_a_cluster_one_line_names_what_to_set(argv: list[str], tmp_path: Path) -> None:
    nats = f"nats://127.0.0.1:{free_port()}"
    result = cdo(*argv, "--state-dir", str(tmp_path), "--nats-url", nats,
                 env={"HOME": str(tmp_path)})  # fmt: skip
    assert result.code == 3
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert (
        "pass --kubeconfig, set KUBECONFIG, create ~/.kube/config, or start the simulated cluster"
        in lines[0]
    )
    if argv[0] == "top":
        assert f"NATS at {nats} (from --nats-url) does not answer" in lines[0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sim", "power", "off", "n1"], "no simulated cluster runs in"),
        (["sim", "fault", "n1", "--xid", "79"], "no node host runs in"),
        (["sim", "down"], "nothing started by cdo sim up runs in"),
    ],
)
def test_sim_commands_without_a_cluster_exit_3(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--state-dir", str(tmp_path)]) == 3
    assert message in capsys.readouterr().err
