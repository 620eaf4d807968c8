"""The kubectl-style options of the commands that print objects, and printing in each format.

``-o json`` and ``-o yaml`` print the command's document (the same content as its tables);
``-o name`` one ``kind/name`` a line; ``-o wide`` the tables with more columns; no ``-o`` the
tables. ``-n NAMESPACE`` and ``-A`` choose namespaces where a command reads namespaced objects.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any, TextIO

import msgspec
import yaml

FORMATS = ("json", "yaml", "wide", "name")


def add_output_option(parser: argparse.ArgumentParser, *, formats: Iterable[str] = FORMATS) -> None:
    choices = tuple(formats)
    parser.add_argument(
        "-o",
        "--output",
        choices=choices,
        default="",
        help=f"output format: {'|'.join(choices)} (default: tables)",
    )


def add_namespace_options(parser: argparse.ArgumentParser, *, all_help: str) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-n", "--namespace", help="namespace (default: the kubeconfig context's, else default)"
    )
    group.add_argument("-A", "--all-namespaces", action="store_true", help=all_help)


def document(value: object) -> Any:
    """Plain JSON-able data (times as RFC 3339 strings)."""
    return msgspec.to_builtins(value)


def write_document(value: object, output: str, out: TextIO) -> None:
    """``value`` as JSON (``json``) or YAML (``yaml``)."""
    data = document(value)
    if output == "yaml":
        out.write(yaml.safe_dump(data, sort_keys=False))
    else:
        out.write(msgspec.json.encode(data).decode() + "\n")
    out.flush()


def structured(output: str) -> bool:
    return output in ("json", "yaml")
