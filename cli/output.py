"""The kubectl-style options of the commands that print objects, and printing in each format.

``-o json`` and ``-o yaml`` print the command's document (the same content as its tables);
``-o name`` one ``kind/name`` a line; ``-o wide`` the tables with more columns; no ``-o`` the
tables. ``-o jsonpath=TEMPLATE`` prints the template over the document and ``-o
custom-columns=SPEC`` a table of the command's rows (:mod:`cli.jsonpath`); ``--no-headers``
leaves out the header lines of the tables. ``-n NAMESPACE`` and ``-A`` choose namespaces where a
command reads namespaced objects.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any, TextIO

import msgspec
import yaml

from cli.jsonpath import column_rows, jsonpath
from cli.tables import table

FORMATS = ("json", "yaml", "wide", "name")
JSONPATH = "jsonpath="
CUSTOM_COLUMNS = "custom-columns="
TEMPLATES = (JSONPATH, CUSTOM_COLUMNS)


class OutputFormats(tuple[str, ...]):
    """The formats a command takes; ``jsonpath=...`` and ``custom-columns=...`` with any
    template (argparse checks a value with ``in``; completion lists the prefixes)."""

    def __contains__(self, value: object) -> bool:
        if isinstance(value, str):
            for prefix in TEMPLATES:
                if prefix in self[:] and value.startswith(prefix) and len(value) > len(prefix):
                    return True
        return super().__contains__(value)


def add_output_option(
    parser: argparse.ArgumentParser, *, formats: Iterable[str] = FORMATS, columns: bool = True
) -> None:
    """``-o``: ``formats``, ``jsonpath=`` and (with ``columns``: the command has rows)
    ``custom-columns=``."""
    choices = OutputFormats((*formats, JSONPATH, *((CUSTOM_COLUMNS,) if columns else ())))
    parser.add_argument(
        "-o",
        "--output",
        choices=choices,
        default="",
        metavar="FORMAT",
        help=f"output format: {'|'.join(c + '...' if c in TEMPLATES else c for c in choices)} "
        "(default: tables)",
    )


def add_no_headers_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-headers",
        action="store_true",
        help="leave out the header lines of tables (and of custom-columns)",
    )


def templated(output: str) -> bool:
    return output.startswith(TEMPLATES)


def write_templated(
    value: object, output: str, out: TextIO, *, rows: str = "", no_headers: bool = False
) -> None:
    """``-o jsonpath=...`` over ``value``'s document, or ``-o custom-columns=...`` over its
    list ``rows`` (a field of the document)."""
    data = document(value)
    if output.startswith(JSONPATH):
        # As kubectl: the template's text and nothing more (no newline of its own).
        out.write(jsonpath(output[len(JSONPATH) :], data))
    else:
        headers, cells = column_rows(output[len(CUSTOM_COLUMNS) :], data.get(rows, []))
        lines = table(headers, cells) if cells or not no_headers else []
        out.write("".join(line + "\n" for line in (lines[1:] if no_headers else lines)))
    out.flush()


def without_headers(text: str, *, headers: Iterable[str]) -> str:
    """``text`` without its lines that are table headers (start with one of ``headers``) or
    section titles (upper case, no table under them yet)."""
    starts = tuple(headers)
    return "\n".join(line for line in text.split("\n") if not line.startswith(starts))


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
