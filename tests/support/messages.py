"""Reading what Firebreak sent the way a person does, and asking it something: one copy of each
helper, which the capability helpers (levers, triage, approvals, signals, mentions) import."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tests.support.harness import RunningApp


def texts(obj: Any) -> Iterator[str]:
    """Every string under a ``text`` key, at any depth (message text, blocks, fields, headers, views)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "text" and isinstance(v, str):
                yield v
            else:
                yield from texts(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from texts(v)


def block_texts(message: dict) -> list[str]:
    """The texts of the message's (current) blocks, in order: each block's text, its fields, then
    its elements' texts (a context's lines; a button's label is not text a person reads as such)."""
    out = []
    for b in message.get("blocks") or []:
        for t in [b.get("text"), *(b.get("fields") or []), *(b.get("elements") or [])]:
            if isinstance(t, dict) and isinstance(t.get("text"), str):
                out.append(t["text"])
    return out


def text_of(message: dict) -> str:
    """All text a person sees on the (current) message: its fallback text, then its blocks'."""
    return "\n".join([str(message.get("text") or ""), *block_texts(message)])


def channel_texts(app: RunningApp, channel: str | None) -> list[str]:
    """The fallback text of every message in ``channel`` (a DM is ``D<user>``), oldest first."""
    assert channel
    return [str(m.get("text", "")) for m in app.slack.messages(channel)]


async def say(app: RunningApp, text: str, user: str, channel: str, timeout: float = 30.0, expect: str = "") -> str:
    """The answer to `/incident <text>` (which must contain ``expect``). A command that takes seconds
    (a lever's plan, a Prometheus query) acks with a progress note ending in "…" ("Planning …",
    "Asking Prometheus…") and answers through response_url: that answer is awaited. Any other ack
    with text was the answer."""
    key = await app.command(text, user=user, channel=channel)
    ack = (app.last_ack or "").strip()
    out = ack if ack and not ack.endswith("…") else await app.reply(key, timeout=timeout)
    assert expect in out, out
    return out
