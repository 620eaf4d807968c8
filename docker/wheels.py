"""Show that every pin of docker/constraints.txt installs on each platform the image is built for.

    python docker/wheels.py                                  # linux/amd64 and linux/arm64, PyPI
    python docker/wheels.py --platform linux/arm64           # one platform
    python docker/wheels.py --index-url https://mirror.example/simple

The image (docker/Dockerfile) is built for linux/amd64 and linux/arm64 (Grace); its build stage
installs every runtime dependency at its pinned version with pip and no compiler. For each
platform, pip (the ordinary client, from this environment) resolves every pin with
``--only-binary=:all:`` for the image's interpreter and C library: CPython X.Y from the base
image's tag (``python:X.Y.Z-slim-<debian>``), glibc from its Debian release (manylinux tags up to
that glibc; the base image is glibc-based, so musllinux wheels do not apply). The table names the
wheel pip would install for each pin and platform.

A pin with no wheel for a platform is built here from its sdist, with the pins as constraints
(the build tools too), as the image's build stage builds it: it passes when it builds into a
pure-Python wheel (``-none-any``), which is the same on every platform; a compiled one is a
finding (the image would need a compiler for that platform).

Exit status: 0 every pin installs on every platform; 1 a finding; 3 the index cannot be reached
(nothing was checked).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from constraints import CONSTRAINTS, read_pins
from packaging.utils import canonicalize_name

HERE = Path(__file__).resolve().parent
DOCKERFILE = HERE / "Dockerfile"
PYPI = "https://pypi.org/simple"

IMAGE_PLATFORMS = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}
"""The platforms ``./task images`` builds (Docker's name -> the wheel tags' machine)."""

DEBIAN_GLIBC = {"bullseye": (2, 31), "bookworm": (2, 36), "trixie": (2, 41)}
"""The glibc of each Debian release the official python images are built on."""

OLDEST_MANYLINUX = {"x86_64": 5, "aarch64": 17}
"""The first manylinux glibc minor with wheels for the machine (manylinux1; manylinux2014)."""

LEGACY_MANYLINUX = {(2, 5): "manylinux1", (2, 12): "manylinux2010", (2, 17): "manylinux2014"}
"""PEP 600's names for the older manylinux tags, which wheels still carry."""

UNREACHABLE = 3


class WheelCheckError(Exception):
    """pip failed in a way this check cannot read as a missing wheel."""


@dataclass(frozen=True)
class BaseImage:
    python: tuple[int, int]
    debian: str

    @property
    def glibc(self) -> tuple[int, int]:
        return DEBIAN_GLIBC[self.debian]


@dataclass(frozen=True)
class Found:
    """What one pin installs from on one platform: a wheel from the index, or a pure-Python
    wheel built from its sdist."""

    wheel: str
    built: bool = False


# -- pure decisions ------------------------------------------------------------------------


def base_image(dockerfile: str) -> BaseImage:
    """The interpreter and Debian release of the Dockerfile's base image (every stage's)."""
    images = {
        line.split()[1]
        for line in dockerfile.splitlines()
        if line.strip().upper().startswith("FROM ")
    }
    found = set()
    for image in images:
        match = re.fullmatch(r"(?:.*/)?python:(\d+)\.(\d+)\.\d+-slim-(\w+)(?:@sha256:\w+)?", image)
        if match is None:
            raise WheelCheckError(f"base image {image} is not python:X.Y.Z-slim-<debian>")
        debian = match.group(3)
        if debian not in DEBIAN_GLIBC:
            raise WheelCheckError(f"base image {image}: Debian {debian} has no known glibc")
        found.add(BaseImage(python=(int(match.group(1)), int(match.group(2))), debian=debian))
    if len(found) != 1:
        raise WheelCheckError(f"the stages' base images differ or are missing: {sorted(images)}")
    return found.pop()


def platform_tags(machine: str, glibc: tuple[int, int]) -> list[str]:
    """Every manylinux platform tag a glibc ``glibc`` system of ``machine`` installs, newest
    first (pip takes the tags given and no others)."""
    major, newest = glibc
    tags = []
    for minor in range(newest, OLDEST_MANYLINUX[machine] - 1, -1):
        tags.append(f"manylinux_{major}_{minor}_{machine}")
        legacy = LEGACY_MANYLINUX.get((major, minor))
        if legacy is not None:
            tags.append(f"{legacy}_{machine}")
    return tags


def unmatched_pin(pip_output: str, pins: Mapping[str, str]) -> str | None:
    """The pin pip found no distribution for, from its error; None if it says no such thing."""
    match = re.search(r"No matching distribution found for (\S+)", pip_output)
    if match is None:
        return None
    wanted = canonicalize_name(match.group(1).partition("==")[0])
    return next((pin for pin in pins if canonicalize_name(pin) == wanted), None)


def is_pure(wheel: str) -> bool:
    """A wheel that runs on any platform: no compiled code (``<python>-none-any``)."""
    return wheel.endswith("-none-any.whl")


# -- pip ----------------------------------------------------------------------------------


def _pip_environment() -> dict[str, str]:
    """This process's environment without pip's settings: only the index given is asked, with
    none of this machine's find-links, extra indexes or constraints."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _pip(args: Sequence[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", *args],
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=600,
        check=False,
    )


def reachable(index_url: str) -> str | None:
    """None when the index answers; else why not."""
    try:
        with urllib.request.urlopen(f"{index_url.rstrip('/')}/pip/", timeout=20) as answer:
            answer.read(1)
    except (urllib.error.URLError, OSError) as exc:
        return str(getattr(exc, "reason", exc))
    return None


def resolve_wheels(
    pins: Mapping[str, str], *, machine: str, image: BaseImage, index_url: str
) -> tuple[dict[str, str], list[str]]:
    """(pin -> the wheel pip would install, the pins without a wheel) for one platform."""
    version = f"{image.python[0]}.{image.python[1]}"
    abi = f"cp{image.python[0]}{image.python[1]}"
    options = ["install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet"]
    options += ["--only-binary=:all:", "--python-version", version, "--implementation", "cp"]
    options += ["--abi", abi, "--abi", "abi3", "--abi", "none", "--index-url", index_url]
    options += ["--retries", "2", "--timeout", "30"]
    for tag in platform_tags(machine, image.glibc):
        options += ["--platform", tag]
    remaining = dict(pins)
    missing: list[str] = []
    with tempfile.TemporaryDirectory(prefix="cdo-wheels-") as tmp:
        report = Path(tmp) / "report.json"
        while remaining:
            requirements = [f"{name}=={pinned}" for name, pinned in remaining.items()]
            done = _pip([*options, "--report", str(report), *requirements], _pip_environment())
            if done.returncode == 0:
                return _wheels_of(json.loads(report.read_text()), remaining), missing
            pin = unmatched_pin(done.stderr + done.stdout, remaining)
            if pin is None:
                raise WheelCheckError(f"pip failed on {machine}:\n{done.stderr or done.stdout}")
            missing.append(pin)
            del remaining[pin]
    return {}, missing


def _wheels_of(report: dict[str, Any], pins: Mapping[str, str]) -> dict[str, str]:
    """pin -> wheel file name, from pip's installation report."""
    by_name = {canonicalize_name(pin): pin for pin in pins}
    return {
        by_name[canonicalize_name(item["metadata"]["name"])]: item["download_info"]["url"].rsplit(
            "/", 1
        )[1]
        for item in report["install"]
    }


def build_from_sdist(name: str, version: str, *, index_url: str) -> str:
    """The wheel pip builds from the pin's sdist with the pins as constraints (its build tools
    too, as in the image's build stage)."""
    env = _pip_environment()
    env["PIP_CONSTRAINT"] = str(CONSTRAINTS)
    with tempfile.TemporaryDirectory(prefix="cdo-sdist-") as tmp:
        done = _pip(
            [
                "wheel",
                "--no-deps",
                "--no-cache-dir",
                "--quiet",
                "--no-binary",
                name,
                "--index-url",
                index_url,
                "--wheel-dir",
                tmp,
                f"{name}=={version}",
            ],
            env,
        )
        if done.returncode != 0:
            raise WheelCheckError(f"{name}=={version} does not build from its sdist: {done.stderr}")
        (wheel,) = (path.name for path in Path(tmp).glob("*.whl"))
        return wheel


# -- the check ------------------------------------------------------------------------------


def check(
    pins: Mapping[str, str], platforms: Iterable[str], *, image: BaseImage, index_url: str
) -> tuple[dict[str, dict[str, Found]], list[str]]:
    """(pin -> platform -> what it installs from, findings)."""
    table: dict[str, dict[str, Found]] = {pin: {} for pin in pins}
    built: dict[str, str] = {}
    findings: list[str] = []
    for platform in platforms:
        machine = IMAGE_PLATFORMS[platform]
        wheels, missing = resolve_wheels(pins, machine=machine, image=image, index_url=index_url)
        for pin, wheel in wheels.items():
            table[pin][platform] = Found(wheel=wheel)
        for pin in missing:
            if pin not in built:
                built[pin] = build_from_sdist(pin, pins[pin], index_url=index_url)
            table[pin][platform] = Found(wheel=built[pin], built=True)
            if not is_pure(built[pin]):
                findings.append(
                    f"{pin}=={pins[pin]}: no wheel for {platform}, and its sdist builds "
                    f"{built[pin]}, not a pure-Python wheel: the image needs a compiler for it"
                )
    return table, findings


def render(table: Mapping[str, Mapping[str, Found]], pins: Mapping[str, str]) -> str:
    platforms = sorted({platform for row in table.values() for platform in row})
    lines = [" | ".join(["pin", *platforms]), " | ".join(["---"] * (len(platforms) + 1))]
    for pin in sorted(table):
        cells = []
        for platform in platforms:
            found = table[pin].get(platform)
            if found is None:
                cells.append("-")
            elif found.built:
                cells.append(f"built from sdist: {found.wheel}")
            else:
                cells.append(found.wheel)
        lines.append(" | ".join([f"{pin}=={pins[pin]}", *cells]))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--platform",
        action="append",
        choices=sorted(IMAGE_PLATFORMS),
        help="check only this platform (repeatable; default: every platform of the image)",
    )
    parser.add_argument("--index-url", default=PYPI, help=f"the package index (default {PYPI})")
    args = parser.parse_args(argv)
    platforms = args.platform or sorted(IMAGE_PLATFORMS)
    why = reachable(args.index_url)
    if why is not None:
        print(f"cannot reach {args.index_url} ({why}): nothing checked", file=sys.stderr)
        return UNREACHABLE
    try:
        image = base_image(DOCKERFILE.read_text())
        pins = read_pins(CONSTRAINTS.read_text())
        table, findings = check(pins, platforms, image=image, index_url=args.index_url)
    except WheelCheckError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(render(table, pins))
    python = f"{image.python[0]}.{image.python[1]}"
    glibc = f"{image.glibc[0]}.{image.glibc[1]}"
    built = sorted(pin for pin, row in table.items() if any(f.built for f in row.values()))
    print(
        f"\n{len(pins)} pins, CPython {python}, glibc {glibc} ({image.debian}), "
        f"{', '.join(platforms)}; built from sdist: {', '.join(built) or 'none'}"
    )
    for finding in findings:
        print(f"FINDING {finding}", file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
