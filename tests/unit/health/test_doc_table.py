"""docs/health-classification.md lists the table the code uses, row for row."""

from __future__ import annotations

import re
from pathlib import Path

from services.health_monitor.classification import SIGNAL_RULES
from services.health_monitor.xid_catalog import BUCKET_RULES, XID_CATALOG, Bucket

DOC = Path(__file__).resolve().parents[3] / "docs" / "health-classification.md"
BUCKET_ROW = re.compile(r"^\| `([A-Z0-9_]+)` \| (ok|warning|fatal) \| ([a-z_]+) \| (.+) \|$")
SIGNAL_ROW = re.compile(r"^\| `([a-z0-9_.]+)` \| (ok|warning|fatal) \| ([a-z_]+) \|")


def expand(text: str) -> set[int]:
    xids: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if part in ("", "—"):
            continue
        first, _, last = part.partition("-")
        xids.update(range(int(first), int(last or first) + 1))
    return xids


def test_bucket_table_matches_the_catalog() -> None:
    rows = [BUCKET_ROW.match(line) for line in DOC.read_text().splitlines()]
    documented = {
        Bucket(row[1]): (row[2], row[3], expand(row[4])) for row in rows if row is not None
    }
    expected = {
        bucket: (
            severity.value,
            action.value,
            {xid for xid, (entry, _) in XID_CATALOG.items() if entry is bucket},
        )
        for bucket, (severity, action) in BUCKET_RULES.items()
    }
    assert documented == expected


def test_signal_table_matches_the_code() -> None:
    rows = [SIGNAL_ROW.match(line) for line in DOC.read_text().splitlines()]
    documented = {row[1]: (row[2], row[3]) for row in rows if row is not None}
    expected = {key: (rule.severity.value, rule.action.value) for key, rule in SIGNAL_RULES.items()}
    assert documented == expected
