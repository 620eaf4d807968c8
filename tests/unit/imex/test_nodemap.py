from __future__ import annotations

import os
from pathlib import Path

import pytest

from sim.imex.errors import ImexConfigError
from sim.imex.nodemap import (
    HOSTS_FILE_ENV,
    NodeMap,
    Resolver,
    load_node_map,
    parse_hosts,
    parse_node_map,
)


def test_entries_keep_their_order_and_skip_blank_and_comment_lines() -> None:
    node_map = parse_node_map("# rack 1\n127.0.2.1\n\n  node-b.cluster  \n127.0.2.3\n")

    assert node_map.entries == ("127.0.2.1", "node-b.cluster", "127.0.2.3")
    assert len(node_map) == 3


def test_the_digest_depends_on_entries_and_order_only() -> None:
    one = parse_node_map("127.0.2.1\n127.0.2.2\n")

    assert parse_node_map("# same nodes\n127.0.2.1\n\n127.0.2.2\n").digest == one.digest
    assert parse_node_map("127.0.2.2\n127.0.2.1\n").digest != one.digest
    assert parse_node_map("127.0.2.1\n127.0.2.2\n127.0.2.3\n").digest != one.digest


def test_hostnames_compare_case_insensitively() -> None:
    assert parse_node_map("Node-A.\n").digest == parse_node_map("node-a\n").digest


def test_a_duplicate_entry_is_rejected_with_both_lines() -> None:
    with pytest.raises(ImexConfigError, match=r"nodes\.cfg:3: 127\.0\.2\.1 is listed twice"):
        parse_node_map("127.0.2.1\n127.0.2.2\n127.0.2.1\n", source="nodes.cfg")


@pytest.mark.parametrize("entry", ["not a host", "-leading-dash", "under_score", "1.2.3.4:50000"])
def test_entries_that_are_neither_address_nor_hostname_are_rejected(entry: str) -> None:
    with pytest.raises(ImexConfigError, match="neither an IP address nor a valid hostname"):
        parse_node_map(f"{entry}\n")


def test_an_empty_map_is_rejected() -> None:
    with pytest.raises(ImexConfigError, match="lists no nodes"):
        parse_node_map("# nobody\n\n")


def test_load_names_the_file_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(ImexConfigError, match="cannot read IMEX_NODE_CONFIG_FILE"):
        load_node_map(tmp_path / "absent.cfg")


def test_a_map_built_from_entries_equals_the_parsed_one() -> None:
    assert NodeMap.of(("127.0.2.1", "node-b")) == parse_node_map("127.0.2.1\nnode-b\n")


def test_hosts_text_maps_every_name_and_alias_first_line_wins() -> None:
    table = parse_hosts(
        "127.0.2.1 imex-0 imex-0.clique  # slot 0\n"
        "# comment line\n"
        "127.0.2.9 imex-0\n"
        "garbage\n"
        "127.0.2.2\timex-1\n"
    )

    assert table == {"imex-0": "127.0.2.1", "imex-0.clique": "127.0.2.1", "imex-1": "127.0.2.2"}


async def test_the_resolver_reads_the_hosts_file_again_after_it_changes(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.2.1 imex-0\n")
    resolver = Resolver(hosts)

    assert await resolver.resolve("imex-0") == "127.0.2.1"
    assert await resolver.resolve("127.0.2.7") == "127.0.2.7"

    # Same size, same mtime: a resolver that cached by (mtime, size) would miss the edit.
    stat = hosts.stat()
    hosts.write_text("127.0.2.5 imex-0\n")
    os.utime(hosts, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    assert await resolver.resolve("imex-0") == "127.0.2.5"


async def test_without_the_system_resolver_only_the_hosts_file_counts(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.2.1 imex-0\n127.255.255.254 imex-1\n")
    resolver = Resolver(hosts, system=False)

    resolved = await resolver.resolve_all(parse_node_map("imex-0\nimex-1\nlocalhost\n"))

    # localhost is known to the system resolver, not to this hosts file.
    assert resolved == ("127.0.2.1", "127.255.255.254", None)


async def test_an_unknown_name_does_not_resolve(tmp_path: Path) -> None:
    resolver = Resolver(tmp_path / "no-hosts-file")

    assert await resolver.resolve("imex-node-that-does-not-exist.invalid") is None


async def test_the_environment_names_the_hosts_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.2.3 imex-2\n")
    monkeypatch.setenv(HOSTS_FILE_ENV, str(hosts))

    resolved = await Resolver.from_environment().resolve_all(parse_node_map("imex-2\n127.0.2.4\n"))

    assert resolved == ("127.0.2.3", "127.0.2.4")
