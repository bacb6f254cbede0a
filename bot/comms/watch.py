"""The incident channel is a data store: flag pasted secrets.

The message listener scans first (pure, no I/O); only a flagged message in an
incident channel becomes a request, run on the after-ack lane like every other and
deduplicated by Slack's event_id in Redis, so a retried delivery is never processed
twice (a delivery whose processing died or whose warning Slack refused is processed again). The warning names the kind of
secret and never repeats it; the audit entry (from the one executor) holds the
kinds and the message ts, not the text.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncApp

from bot import logs
from bot.comms.commands import SecretFlag
from bot.comms.secrets import kinds_text, scan
from bot.comms.system import Once
from bot.core import dispatch
from bot.core.registry import route
from bot.core.request import Outcome, Request, Source
from bot.incidents.models import Incident
from bot.slack import app as slack_app
from bot.slack.gateway import SlackFailure
from bot.slack.lane import Lane
from bot.store import Keys

if TYPE_CHECKING:
    from bot.core.services import Services

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


@route(SecretFlag, spec=None, summary="a pasted secret was flagged (message event)")
async def secret_flag(svc: "Services", req: Request, inc: Incident | None) -> Outcome:
    cmd: SecretFlag = req.command  # type: ignore[assignment]
    assert inc is not None and inc.channel_id
    text = (f":warning: <@{req.actor}> that message looks like it contains a {kinds_text(cmd.kinds)}. "
            "This channel is a data store: delete the message and rotate the credential now. "
            "Link to the audit-store query instead of pasting secrets, prompts or PII.")
    try:
        await svc.slack.post(inc.channel_id, text, thread_ts=cmd.message_ts)
    except SlackFailure as f:
        return Outcome(result="error", message=f"Could not post the warning ({f.error}).",
                       audit={"slack_error": f.error})
    return Outcome(message="flagged", audit={"kinds": cmd.kinds})


async def _flag(svc: "Services", body: dict[str, Any], msg: dict[str, Any], kinds: list[str]) -> None:
    channel = str(msg.get("channel") or "")
    inc_id = await svc.incidents.by_channel(channel)
    if inc_id is None:
        return
    event_id = str(body.get("event_id") or f"{channel}:{msg.get('ts')}")
    once = Once(svc, Keys.dedupe("slack-event", event_id))
    if not await once.claim():
        log.info("event_duplicate", event_id=event_id, incident=inc_id)
        return
    # Warn in the message's thread (a reply in a thread warns in that thread).
    cmd = SecretFlag(kinds=kinds, message_ts=str(msg.get("thread_ts") or msg.get("ts") or "")[:40])
    out = await dispatch.execute(svc, Request(command=cmd, actor=msg["user"], source=Source.event,
                                              channel_id=channel, incident_id=inc_id))
    # Not warned (Slack refused): Slack's own retry of the event gets another go.
    await (once.done() if out.ok else once.release())


def install(app: AsyncApp, svc: "Services") -> None:
    lane: Lane = svc.extras["after_ack"]

    @app.event("message")
    async def on_message(body: dict[str, Any], event: dict[str, Any]) -> None:
        msg = human_message(event)
        if msg is None or not msg.get("user"):
            return
        kinds = scan(str(msg.get("text") or ""), svc.policy.comms.secret_patterns)
        if kinds:
            lane.submit(lambda: _flag(svc, body, msg, kinds))


slack_app.LISTENERS.append(install)
