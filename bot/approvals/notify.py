"""Chat side effects of a decision: post the card, edit it in place, tell the channels.

A failed chat call never undoes a decision already taken in Redis; it is
logged and the decision stands (the audit log has it either way).
"""

from __future__ import annotations

from bot import logs
from bot.approvals import views
from bot.approvals.store import Ballot, ballots
from bot.chat import Card, ChatError
from bot.core.request import IncidentView, Refusal
from bot.core.services import Services

log = logs.get(__name__)


async def post_card(
    svc: Services, inc: IncidentView, b: Ballot, what: str, text: str, card: Card, consequence: str
) -> None:
    """Post a new ballot's card in the incident channel and remember where; or refuse, saying
    what comes of the ballot without its card (`what` names the card, `consequence` says the rest)."""
    if not inc.channel_id:
        raise Refusal(f"{b.id}: {inc.id} has no channel for the {what}; {consequence}")
    try:
        ts = await svc.chat.post(inc.channel_id, text, card)
    except ChatError as f:
        raise Refusal(f"{b.id}: Slack refused the {what} ({f.error}); {consequence}") from None
    await ballots(svc).set_card(inc.id, b.id, inc.channel_id, ts)


async def edit_card(svc: Services, b: Ballot, line: str | None = None) -> None:
    """The decided card (line given) or the pending card with votes so far."""
    if not b.card_channel or not b.card_ts:
        return
    if line is not None:
        card = views.decided(b, line)
    else:
        inc = await svc.incidents.get(b.incident)  # the seats named as they are now
        card = views.pending(b, views.holders_of(b, inc) if inc else None)
    try:
        await svc.chat.update(b.card_channel, b.card_ts, views.text(b) + (f" — {line}" if line else ""), card)
    except ChatError as f:
        log.warning("approval_card_update_failed", request=b.id, error=f.error)


async def to_channel(svc: Services, b: Ballot, text: str) -> None:
    if not b.card_channel:
        return
    try:
        await svc.chat.post(b.card_channel, text)
    except ChatError as f:
        log.warning("approval_post_failed", request=b.id, error=f.error)


NOT_POSTED = " Firebreak could not post this to the security channel: tell security yourself."


def unposted(posted: bool) -> str:
    """What a reply adds when the security channel did not get its post."""
    return "" if posted else NOT_POSTED


async def to_security(svc: Services, text: str) -> bool:
    """Post to FIREBREAK_SECURITY_CHANNEL; False when unset or the chat refused."""
    channel = svc.settings.firebreak_security_channel
    if not channel:
        log.warning("security_channel_unset", message="FIREBREAK_SECURITY_CHANNEL is not set")
        return False
    try:
        await svc.chat.post(channel, text)
    except ChatError as f:
        log.warning("security_post_failed", error=f.error)
        return False
    return True
