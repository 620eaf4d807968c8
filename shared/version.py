"""cdo's version: the installed distribution's, which the image and ``--version`` report."""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "cdo"


def version() -> str:
    """The installed ``cdo`` version; ``0+unknown`` when it runs from a tree never installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"
