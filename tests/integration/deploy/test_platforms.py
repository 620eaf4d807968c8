"""The image for Grace nodes too: every pin installs on linux/arm64 as on linux/amd64, and
``./task images`` builds both platforms (docker/wheels.py, Taskfile.yml)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.integration.deploy.conftest import ROOT

DOCKER = ROOT / "docker"


def load_docker_program(name: str) -> ModuleType:
    """A program of docker/ (scripts beside each other, not a package), as a module."""
    if name in sys.modules:
        return sys.modules[name]
    sys.path.insert(0, str(DOCKER))
    try:
        spec = importlib.util.spec_from_file_location(name, DOCKER / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(DOCKER))
    return module


wheels: Any = load_docker_program("wheels")
constraints: Any = load_docker_program("constraints")


def task(*args: str) -> str:
    """go-task's dry run of the project's Taskfile: the commands a task would run."""
    result = subprocess.run(
        [str(Path(sys.executable).parent / "task"), "--dir", str(ROOT), "--dry", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout + result.stderr


def test_the_base_image_gives_the_interpreter_and_the_c_library() -> None:
    image = wheels.base_image((DOCKER / "Dockerfile").read_text())
    assert image.python == (3, 11) and image.debian == "bookworm" and image.glibc == (2, 36)
    two_stages = (
        "FROM docker.io/library/python:3.12.8-slim-trixie AS build\n"
        "FROM python:3.12.8-slim-trixie@sha256:0123abcd\n"
    )
    assert wheels.base_image(two_stages).glibc == (2, 41)
    for broken in (
        "FROM python:3.11.11-alpine3.20\n",
        "FROM python:3.11.11-slim-jessie\n",
        "FROM python:3.11.11-slim-bookworm AS a\nFROM python:3.12.1-slim-bookworm\n",
    ):
        with pytest.raises(wheels.WheelCheckError):
            wheels.base_image(broken)


def test_platform_tags_cover_every_manylinux_up_to_the_images_glibc() -> None:
    arm = wheels.platform_tags("aarch64", (2, 36))
    assert arm[0] == "manylinux_2_36_aarch64"
    assert {"manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64"} <= set(arm)
    # No aarch64 wheel predates manylinux2014; nothing newer than the image's glibc.
    assert "manylinux_2_16_aarch64" not in arm and "manylinux_2_37_aarch64" not in arm
    intel = wheels.platform_tags("x86_64", (2, 36))
    assert {"manylinux1_x86_64", "manylinux2010_x86_64", "manylinux_2_5_x86_64"} <= set(intel)
    assert not [tag for tag in arm + intel if tag.startswith("musllinux")]


def test_a_missing_wheel_is_read_from_pips_error() -> None:
    pins = {"nkeys": "0.2.1", "pyyaml": "6.0.4"}
    error = (
        "ERROR: Could not find a version that satisfies the requirement nkeys==0.2.1 "
        "(from versions: none)\nERROR: No matching distribution found for nkeys==0.2.1\n"
    )
    assert wheels.unmatched_pin(error, pins) == "nkeys"
    assert wheels.unmatched_pin("No matching distribution found for PyYAML==6.0.4", pins) == (
        "pyyaml"
    )
    assert wheels.unmatched_pin("ERROR: network is unreachable", pins) is None
    assert wheels.is_pure("nkeys-0.2.1-py3-none-any.whl")
    assert not wheels.is_pure("pyyaml-6.0.4-cp311-cp311-manylinux2014_aarch64.whl")


def test_a_pin_that_differs_from_the_installed_version_is_reported() -> None:
    installed = {"grpcio": "1.85.4", "idna": "3.21", "six": "1.17.0"}
    pins = {"grpcio": "1.85.3", "idna": "3.21"}
    assert constraints.differences(installed, pins) == [
        "grpcio is pinned at 1.85.3, installed here at 1.85.4",
        "six 1.17.0 is not pinned",
    ]
    assert constraints.differences(installed, {**pins, "grpcio": "1.85.4", "six": "1.17.0"}) == []


@pytest.mark.slow
def test_every_pin_installs_on_every_platform_of_the_image() -> None:
    """The check itself, against PyPI: each pin has a wheel for linux/arm64 and linux/amd64 for
    the image's CPython and glibc, or builds from its sdist as pure Python. Where PyPI cannot be
    reached the check says so and exits 3, and this test skips with its message."""
    result = subprocess.run(
        [sys.executable, str(DOCKER / "wheels.py")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode == wheels.UNREACHABLE:
        pytest.skip(result.stderr.strip())
    assert result.returncode == 0, result.stdout + result.stderr
    pins = constraints.read_pins((DOCKER / "constraints.txt").read_text())
    rows = {
        line.split(" | ")[0]: line.split(" | ")[1:]
        for line in result.stdout.splitlines()
        if "==" in line
    }
    assert sorted(rows) == sorted(f"{name}=={version}" for name, version in pins.items())
    header = result.stdout.splitlines()[0].split(" | ")
    assert header == ["pin", *sorted(wheels.IMAGE_PLATFORMS)]
    for pin, (amd64, arm64) in rows.items():
        assert "aarch64" in arm64 or arm64.endswith("-none-any.whl"), (pin, arm64)
        assert "x86_64" in amd64 or amd64.endswith("-none-any.whl"), (pin, amd64)
    # nkeys has only an sdist on PyPI: it builds as pure Python, as in the image's build stage.
    assert rows[f"nkeys=={pins['nkeys']}"][1].startswith("built from sdist: ")


def test_task_images_builds_every_platform_the_pins_are_checked_for() -> None:
    dry = task("images")
    (build,) = [line for line in dry.splitlines() if "docker buildx build" in line]
    words = build.split()
    platforms = words[words.index("--platform") + 1].split(",")
    assert sorted(platforms) == sorted(wheels.IMAGE_PLATFORMS)
    assert words[words.index("-f") + 1] == "docker/Dockerfile"
    assert words[words.index("-t") + 1] == "registry.example.com/cdo/cdo:0.1.0"
    assert "--output" in words and "--push" not in words
    pushed = task("images", "IMAGE=registry.corp.example/ml/cdo:0.1.0", "PUSH=true")
    assert "-t registry.corp.example/ml/cdo:0.1.0" in pushed and "--push" in pushed


def test_task_wheels_runs_the_check() -> None:
    assert "python docker/wheels.py --platform linux/arm64" in task(
        "wheels", "--", "--platform", "linux/arm64"
    )
