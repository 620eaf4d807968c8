"""The store on disk, so that a restarted emulator is the same API server (as kube-apiserver is
over etcd): every object, uid and resourceVersion comes back.

``<data dir>/store.jsonl`` holds one JSON line per committed change, appended (and flushed to
the operating system, which keeps it when the process is killed) as the store commits it: the
stored object with what the store indexes it by, or a deletion. At start the lines are read back
in order (a last line cut short by a kill is dropped: its write was never answered), the newest
state of each object kept, and the file rewritten with only those and the resourceVersion counter
(also whenever it has grown to :data:`COMPACT_LINES` lines more than there are objects).

What is not kept is the watch cache: like kube-apiserver's, it starts empty at the restart, at
the newest resourceVersion, so a watch or exact list from an older version gets ``410 Expired``
and its client lists again (``Store.restore``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

import msgspec

from sim.kubeapi.storage.store import Entry, Event

log = logging.getLogger(__name__)

FILE = "store.jsonl"
COMPACT_LINES = 50_000
"""Lines beyond the number of stored objects after which the file is rewritten."""


class Line(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One committed change: an object's new state (``item``), or its deletion."""

    bucket: str
    rv: int
    namespace: str = ""
    name: str
    deleted: bool = False
    item: msgspec.Raw = msgspec.Raw(b"{}")
    type_meta: str = ""
    uid: str = ""
    labels: dict[str, str] = {}
    fields: dict[str, str] = {}
    owners: tuple[str, ...] = ()
    deleting: bool = False
    finalizers: tuple[str, ...] = ()

    @classmethod
    def put(cls, bucket: str, entry: Entry) -> Line:
        return cls(
            bucket=bucket,
            rv=entry.rv,
            namespace=entry.namespace,
            name=entry.name,
            item=msgspec.Raw(entry.item),
            type_meta=entry.type_meta.decode(),
            uid=entry.uid,
            labels=entry.labels,
            fields=entry.fields,
            owners=entry.owners,
            deleting=entry.deleting,
            finalizers=entry.finalizers,
        )

    def entry(self) -> Entry:
        return Entry(
            item=bytes(self.item),
            type_meta=self.type_meta.encode(),
            rv=self.rv,
            namespace=self.namespace,
            name=self.name,
            uid=self.uid,
            labels=dict(self.labels),
            fields=dict(self.fields),
            owners=self.owners,
            deleting=self.deleting,
            finalizers=self.finalizers,
        )


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Line)


class Journal:
    """The append-only file of one data directory."""

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.path = data_dir / FILE
        self._file: IO[bytes] | None = None
        self._lines = 0

    def load(self) -> tuple[list[tuple[str, Entry]], int]:
        """Every stored object as ``(bucket, entry)`` and the newest resourceVersion (0: none)."""
        latest: dict[tuple[str, str, str], Line] = {}
        newest = 0
        for line in self._read():
            newest = max(newest, line.rv)
            if not line.bucket:
                continue  # the counter alone (a rewrite's first line)
            key = (line.bucket, line.namespace, line.name)
            if line.deleted:
                latest.pop(key, None)
            else:
                latest[key] = line
        return [(line.bucket, line.entry()) for line in latest.values()], newest

    def _read(self) -> Iterator[Line]:
        try:
            text = self.path.read_bytes()
        except FileNotFoundError:
            return
        lines = text.split(b"\n")
        for number, raw in enumerate(lines, start=1):
            if not raw:
                continue
            try:
                yield _decoder.decode(raw)
            except msgspec.DecodeError:
                if number >= len(lines) - 1:
                    log.warning("dropping a change cut short when the server stopped")
                    return
                raise

    def rewrite(self, objects: Iterable[tuple[str, Entry]], *, rv: int) -> None:
        """Replace the file with the counter ``rv`` (which may be newer than every object: a
        deletion's) and one line per object, then append from there."""
        self.close()
        temporary = self.path.with_suffix(".tmp")
        count = 0
        with temporary.open("wb") as out:
            out.write(_encoder.encode(Line(bucket="", rv=rv, name="", deleted=True)) + b"\n")
            for bucket, entry in objects:
                out.write(_encoder.encode(Line.put(bucket, entry)) + b"\n")
                count += 1
            out.flush()
            os.fsync(out.fileno())
        temporary.replace(self.path)
        self._lines = count

    def append(self, bucket: str, event: Event) -> None:
        """Record one committed change (a store listener)."""
        if event.type == "DELETED":
            line = Line(bucket=bucket, rv=event.rv, namespace=event.entry.namespace,
                        name=event.entry.name, deleted=True)  # fmt: skip
        else:
            line = Line.put(bucket, event.entry)
        if self._file is None:
            self._file = self.path.open("ab")
        self._file.write(_encoder.encode(line) + b"\n")
        self._file.flush()
        self._lines += 1

    def needs_compaction(self, objects: int) -> bool:
        return self._lines > objects + COMPACT_LINES

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
