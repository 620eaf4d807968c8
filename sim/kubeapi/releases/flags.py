"""The release flags as kube-apiserver spells them, for every command that starts an emulator:
``python -m sim.kubeapi``, ``python -m sim up``, ``cdo sim up``, ``python -m bench.e2e``."""

from __future__ import annotations

import argparse

from sim.kubeapi.releases.release import NEWEST_RELEASE, SUPPORTED_RELEASES


def add_release_arguments(parser: argparse.ArgumentParser) -> None:
    """``--kubernetes-version``, ``--feature-gates`` and ``--runtime-config``."""
    parser.add_argument(
        "--kubernetes-version",
        default=NEWEST_RELEASE,
        help=f"the Kubernetes release presented: {', '.join(SUPPORTED_RELEASES)} "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--feature-gates",
        default="",
        help="Name=true|false,... as kube-apiserver's flag (the DRA gates, e.g. "
        "DRADeviceTaints=true)",
    )
    parser.add_argument(
        "--runtime-config",
        default="",
        help="<group>/<version>[/<resource>]=true|false,... as kube-apiserver's flag "
        "(resource.k8s.io versions, e.g. resource.k8s.io/v1beta2=true)",
    )
