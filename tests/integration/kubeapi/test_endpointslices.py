"""EndpointSlice (discovery.k8s.io/v1): served with discovery and OpenAPI, its addresses checked
against its address type, the type immutable; stored only (no endpoint controller)."""

from __future__ import annotations

from typing import Any

from .conftest import Http

DISCOVERY = "/apis/discovery.k8s.io/v1"
SLICES = f"{DISCOVERY}/namespaces/default/endpointslices"


def endpoint_slice(name: str, address_type: str, *addresses: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": address_type,
        "ports": [{"port": 8443}],
        "endpoints": [{"addresses": list(addresses), "conditions": {"ready": True}}],
    }


async def test_discovery_and_openapi(http: Http) -> None:
    _, listed, _ = await http.get(DISCOVERY)
    assert [(r["name"], r["namespaced"]) for r in listed["resources"]] == [("endpointslices", True)]
    _, doc, _ = await http.get("/openapi/v3/apis/discovery.k8s.io/v1")
    assert (
        "metadata"
        in doc["components"]["schemas"]["io.k8s.api.discovery.v1.EndpointSlice"]["properties"]
    )


async def test_addresses_match_their_type_and_the_type_stays(http: Http) -> None:
    status, body, _ = await http.post(SLICES, endpoint_slice("bad", "IPv4", "fd00::1"))
    assert status == 422, body
    assert "endpoints[0].addresses[0]" in body["message"]
    status, body, _ = await http.post(SLICES, endpoint_slice("none", "IPv4"))
    assert status == 422 and "endpoints[0].addresses" in body["message"]
    status, body, _ = await http.post(SLICES, endpoint_slice("web-a", "IPv4", "10.0.0.7"))
    assert status == 201, body
    status, found, _ = await http.get(f"{SLICES}?labelSelector=kubernetes.io/service-name=web")
    assert [item["metadata"]["name"] for item in found["items"]] == ["web-a"]
    changed = {**body, "addressType": "IPv6"}
    status, body, _ = await http.put(f"{SLICES}/web-a", changed)
    assert status == 422 and "addressType" in body["message"]
