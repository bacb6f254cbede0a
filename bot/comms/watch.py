"""The incident channel is a data store: flag pasted secrets.

The chat surface's message listener (bot/slack/events.py) asks ``flagged`` first
(pure, no I/O: the person-written text scanned with the built-in and policy
patterns); only a flagged message goes on to ``flag``, run on the after-ack lane like
every other request. ``flag`` keeps to messages in an incident channel and
deduplicates by the delivery's event id in Redis, so a retried delivery is never
processed twice (a delivery whose processing died or whose warning the chat refused
is processed again). The warning names the kind of secret and never repeats it; the
audit entry (from the one executor) holds the kinds and the message ts, not the text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot import logs
from bot.chat import ChatError, person
from bot.comms.commands import SecretFlag
from bot.comms.secrets import kinds_text, scan
from bot.comms.system import Once
from bot.core import dispatch
from bot.core.request import Outcome, Request, Source
from bot.core.services import Services
from bot.incidents.models import Incident
from bot.store import Keys

log = logs.get(__name__)

# Subtypes that carry a person's own words; the rest (joins, deletions, bot posts) are not scanned.
_HUMAN_SUBTYPES = {None, "file_share", "thread_broadcast", "me_message"}


def human_message(event: dict[str, Any]) -> dict[str, Any] | None:
    """The person-written message inside a message event, or None (bots, joins, our own edits)."""
    subtype = event.get("subtype")
    if subtype == "message_changed":
        msg = event.get("message") or {}
        # An edit keeps its subtype on the inner message; only a person's edited text is scanned.
        if msg.get("bot_id") or msg.get("subtype") == "bot_message":
            return None
        return {**msg, "channel": event.get("channel")}
    if subtype not in _HUMAN_SUBTYPES or event.get("bot_id"):
        return None
    return event


@dataclass(frozen=True)
class Flagged:
    """A person's message that looks like it holds a secret: where it is and which kinds, never the text."""

    channel: str
    user: str
    ts: str | None
    thread_ts: str | None
    kinds: list[str]


def _opt(v: Any) -> str | None:
    return None if v is None else str(v)


def flagged(svc: Services, event: dict[str, Any]) -> Flagged | None:
    """The message event as something to flag, or None (not a person's words, or nothing found). No I/O."""
    msg = human_message(event)
    if msg is None or not msg.get("user"):
        return None
    kinds = scan(str(msg.get("text") or ""), svc.policy.comms.secret_patterns)
    if not kinds:
        return None
    return Flagged(
        channel=str(msg.get("channel") or ""),
        user=str(msg["user"]),
        ts=_opt(msg.get("ts")),
        thread_ts=_opt(msg.get("thread_ts")),
        kinds=kinds,
    )


async def flag(svc: Services, event_id: str | None, found: Flagged) -> None:
    """Warn in the incident channel about ``found``, once per delivery (``event_id``; None: the
    channel and message ts stand in). Outside an incident channel nothing happens."""
    inc_id = await svc.incidents.by_channel(found.channel)
    if inc_id is None:
        return
    event_id = str(event_id or f"{found.channel}:{found.ts}")
    once = Once(svc, Keys.dedupe("slack-event", event_id))
    if not await once.claim():
        log.info("event_duplicate", event_id=event_id, incident=inc_id)
        return
    # Warn in the message's thread (a reply in a thread warns in that thread).
    cmd = SecretFlag(kinds=found.kinds, message_ts=(found.thread_ts or found.ts or "")[:40])
    out = await dispatch.execute(
        svc, Request(command=cmd, actor=found.user, source=Source.event, channel_id=found.channel, incident_id=inc_id)
    )
    # Not warned (the chat refused): the platform's own retry of the event gets another go.
    await (once.done() if out.ok else once.release())


async def secret_flag(svc: Services, req: Request, cmd: SecretFlag, inc: Incident) -> Outcome:
    assert inc.channel_id  # found by its channel (flag)
    text = (
        f":warning: {person(req.actor)} that message looks like it contains a {kinds_text(cmd.kinds)}. "
        "This channel is a data store: delete the message and rotate the credential now. "
        "Link to the audit-store query instead of pasting secrets, prompts or PII."
    )
    try:
        await svc.chat.post(inc.channel_id, text, thread=cmd.message_ts)
    except ChatError as f:
        return Outcome(
            result="error", message=f"Could not post the warning ({f.error}).", audit={"slack_error": f.error}
        )
    return Outcome(message="flagged", audit={"kinds": cmd.kinds})
