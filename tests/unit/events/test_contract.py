"""proto/ is generated from the event Structs; these tests fail when the two drift apart."""

import json
from pathlib import Path

import jsonschema
import msgspec
import pytest
import yaml

from shared.events import EVENT_TYPES, Event
from shared.events.contract import drifted, render
from tests.unit.events.samples import sample_events

PROTO = Path(__file__).resolve().parents[3] / "proto"


def test_committed_contract_matches_the_code() -> None:
    assert drifted(PROTO) == [], "proto/ is out of date: run ./task schemas"


def test_contract_files_cover_every_event() -> None:
    files = render()
    for cls in EVENT_TYPES:
        assert f"events/{cls.ce_type()}.schema.json" in files


@pytest.mark.parametrize("event", sample_events(), ids=lambda e: type(e).__name__)
def test_payloads_validate_against_their_schema(event: Event) -> None:
    schema = json.loads((PROTO / f"events/{event.ce_type()}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(msgspec.json.decode(msgspec.json.encode(event)), schema)
    broken = msgspec.json.decode(msgspec.json.encode(event))
    broken["id"] = 17
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_asyncapi_document_lists_every_subject() -> None:
    document = yaml.safe_load((PROTO / "asyncapi.yaml").read_text())
    assert document["asyncapi"].startswith("3.")
    addresses = {channel["address"] for channel in document["channels"].values()}
    assert addresses == {cls.subject_template.template for cls in EVENT_TYPES}
    for channel in document["channels"].values():
        placeholders = {p.strip("{}") for p in channel["address"].split(".") if "{" in p}
        assert set(channel.get("parameters", {})) == placeholders
