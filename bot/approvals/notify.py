"""Slack side effects of a decision: edit the card in place, tell the channels.

A failed Slack call never undoes a decision already taken in Redis; it is
logged and the decision stands (the audit log has it either way).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from bot import logs
from bot.approvals import cards
from bot.approvals.ballots import Ballot, Ballots
from bot.slack.gateway import SlackFailure

if TYPE_CHECKING:
    from bot.core.services import Services
    from bot.scheduler import Scheduler

log = logs.get(__name__)


def ballots(svc: "Services") -> Ballots:
    if "ballots" not in svc.extras:
        svc.extras["ballots"] = Ballots(svc.redis)
    return svc.extras["ballots"]


def scheduler(svc: "Services") -> "Scheduler":
    return svc.extras["scheduler"]


async def edit_card(svc: "Services", b: Ballot, line: str | None = None) -> None:
    """The decided card (line given) or the pending card with votes so far."""
    if not b.card_channel or not b.card_ts:
        return
    blocks = cards.decided(b, line) if line is not None else cards.pending(b)
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
