"""aiohttp request -> Bolt request, with a correct reading of form bodies.

Bolt treats a form body as an interactive payload whenever the substring
"payload" appears anywhere in it, so `/incident update payload service slow`
parsed as an empty request and was dropped as unhandled (Slack shows the
user "dispatch_failed"). Here a body is a payload only when it has the field.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_internals import build_async_context
from slack_bolt.request.async_request import AsyncBoltRequest


def parse_body(raw: str, content_type: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    if content_type == "application/json" or raw.startswith("{"):
        return json.loads(raw)
    fields = dict(parse_qsl(raw, keep_blank_values=True))
    return json.loads(fields["payload"]) if "payload" in fields else fields


async def to_bolt_request(request: web.Request) -> AsyncBoltRequest:
    # Slack sends UTF-8; anything else fails the signature check below instead of raising here.
    raw = (await request.read()).decode("utf-8", errors="replace")
    # Built empty, then filled: Bolt's own parse runs in the constructor, before the
    # signature check, and an unsigned `payload=<not JSON>` would make it raise (a 500).
    req = AsyncBoltRequest(body="", query=request.query_string, headers=request.headers)  # type: ignore[arg-type]
    req.raw_body = raw
    try:
        req.body = parse_body(raw, req.content_type)
    except (ValueError, TypeError):
        req.body = {}  # not Slack's shape: refused by the signature check or answered as unhandled
    req.context = build_async_context(AsyncBoltContext({}), req.body)
    return req
