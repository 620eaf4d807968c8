"""JSON over HTTP to the control APIs of the simulated cluster and of the node host."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from shared.command_errors import CommandError, UnreachableError

HTTP_TIMEOUT_S = 10.0


def request(
    base_url: str, method: str, path: str, body: object = None, *, timeout_s: float = HTTP_TIMEOUT_S
) -> Any:
    """A JSON request to a control API; CommandError with its message, UnreachableError if down
    (or not answering within ``timeout_s``)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        base_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", str(exc))
        except (ValueError, AttributeError):
            message = str(exc)
        raise CommandError(message) from None
    except (urllib.error.URLError, OSError) as exc:
        raise UnreachableError(f"{base_url} does not answer: {exc}") from None
