"""Slack side effects of a decision: edit the card in place, tell the channels.

A failed Slack call never undoes a decision already taken in Redis; it is
logged and the decision stands (the audit log has it either way).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from bot import logs
from bot.approvals import cards
from bot.approvals.ballots import Ballot, Ballots
from bot.core.request import Refusal
from bot.slack.gateway import SlackFailure

if TYPE_CHECKING:
    from bot.core.services import Services
    from bot.incidents.models import Incident

log = logs.get(__name__)


def seated(inc: "Incident") -> dict[str, str | None]:
    return {r: h.user for r, h in inc.roles.items()}


def ballots(svc: "Services") -> Ballots:
    if "ballots" not in svc.extras:
        svc.extras["ballots"] = Ballots(svc.redis)
    return svc.extras["ballots"]


async def post_card(svc: "Services", inc: "Incident", b: Ballot, card: str, text: str, blocks: list,
                    consequence: str) -> None:
    """Post a new ballot's card in the incident channel and remember where; or refuse, saying
    what comes of the ballot without its card (`consequence`)."""
    if not inc.channel_id:
        raise Refusal(f"{b.id}: {inc.id} has no channel for the {card}; {consequence}")
    try:
        ts = await svc.slack.post(inc.channel_id, text, blocks)
    except SlackFailure as f:
        raise Refusal(f"{b.id}: Slack refused the {card} ({f.error}); {consequence}") from None
    await ballots(svc).set_card(inc.id, b.id, inc.channel_id, ts)


async def edit_card(svc: "Services", b: Ballot, line: str | None = None) -> None:
    """The decided card (line given) or the pending card with votes so far."""
    if not b.card_channel or not b.card_ts:
        return
    if line is not None:
        blocks = cards.decided(b, line)
    else:
        inc = await svc.incidents.get(b.incident)  # the seats named as they are now
        blocks = cards.pending(b, cards.holders_of(b, seated(inc)) if inc else None)
    try:
        await svc.slack.update(b.card_channel, b.card_ts, cards.text(b) + (f" — {line}" if line else ""), blocks)
    except SlackFailure as f:
        log.warning("approval_card_update_failed", request=b.id, error=f.error)


async def to_channel(svc: "Services", b: Ballot, text: str) -> None:
    if not b.card_channel:
        return
    try:
        await svc.slack.post(b.card_channel, text)
    except SlackFailure as f:
        log.warning("approval_post_failed", request=b.id, error=f.error)


NOT_POSTED = " Firebreak could not post this to the security channel: tell security yourself."


def unposted(posted: bool) -> str:
    """What a reply adds when the security channel did not get its post."""
    return "" if posted else NOT_POSTED


async def to_security(svc: "Services", text: str) -> bool:
    """Post to FIREBREAK_SECURITY_CHANNEL; False when unset or Slack refused."""
    channel = svc.settings.firebreak_security_channel
    if not channel:
        log.warning("security_channel_unset", message="FIREBREAK_SECURITY_CHANNEL is not set")
        return False
    try:
        await svc.slack.post(channel, text)
    except SlackFailure as f:
        log.warning("security_post_failed", error=f.error)
        return False
    return True
