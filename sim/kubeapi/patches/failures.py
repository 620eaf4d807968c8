"""The two ways a patch fails, which the server tells apart by status code."""

from __future__ import annotations


class PatchError(ValueError):
    """A patch that does not apply; the server answers 422 with this message."""


class PatchFormatError(ValueError):
    """A patch document that is malformed; the server answers 400 with this message."""
