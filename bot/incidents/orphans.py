"""A declare's channel with no incident: archived, never left behind.

`declare` creates the channel first and saves the incident after, so a process that dies (or
loses its store) in between would leave a channel no incident claims, and the number it took.
The channel's id goes into the request's intent as soon as it exists; then either the handler
archives it at once (the store failed before anything was saved), or the repair of the
interrupted request (bot/core/intents.py) does: it finishes what a saved incident lacks, and
archives a channel nothing claimed.

Archive, not adopt: the repair runs minutes later (a live replica's request must never be taken
for dead), and by then the person has been told the declare failed, or heard nothing, and has
almost always declared again. Adopting the old channel then would open a second incident for the
same outage, with a second IC seat, channel and reminders. Archiving loses nothing (the channel and
its messages stay readable), costs only the number, and the person is told which incident is theirs.
"""

from __future__ import annotations

from bot import logs
from bot.chat import ChatError, channel_ref, person, quote
from bot.clock import hhmm
from bot.core.intent_store import Intent
from bot.core.intents import STALE_AFTER_S, Recovered
from bot.core.services import Services
from bot.ids import SYSTEM_ACTOR
from bot.incidents.store import repo

log = logs.get(__name__)


async def archive_orphan(svc: Services, channel: str, inc_id: str, title: str, actor: str, at: float) -> None:
    """Say why in the channel, then archive it. Raises ChatError when Slack refuses the archive;
    one already archived counts as done."""
    by = "opened by Firebreak from Alertmanager alerts" if actor == SYSTEM_ACTOR else f"declared by {person(actor)}"
    note = (
        f":file_cabinet: This channel was created for {inc_id} ({quote(title)}), {by} at "
        f"{hhmm(at)} UTC, but Firebreak stopped before it saved the incident. Nothing is tracked here, so "
        "Firebreak archives it. Declare again with `/incident declare` if it is still needed."
    )
    try:
        await svc.chat.post(channel, note)
    except ChatError as f:
        if f.error == "is_archived":
            return
        log.warning("orphan_note_not_posted", channel=channel, error=f.error)
    await svc.chat.archive(channel)
    log.warning("orphan_channel_archived", channel=channel, incident=inc_id)


async def archive_now(svc: Services, channel: str, inc_id: str, title: str, actor: str) -> str:
    """The store failed before anything was saved: archive the channel now; the reply."""
    lost = f"Firebreak lost its store before it saved {inc_id}, so no incident was opened"
    try:
        await archive_orphan(svc, channel, inc_id, title, actor, svc.clock.now())
    except ChatError as f:
        return (
            f"{lost}, and the channel it had created, {channel_ref(channel)}, could not be archived ({f.error}): "
            "archive it by hand. Declare again in a minute."
        )
    return f"{lost}; the channel it had created, {channel_ref(channel)}, is archived. Declare again in a minute."


def unsure(inc_id: str, channel: str) -> str:
    """The reply when the store failed while the incident was being saved: it may or may not exist."""
    minutes = round(STALE_AFTER_S / 60)
    return (
        f"Firebreak lost its store while saving {inc_id}; its channel {channel_ref(channel)} exists, {inc_id} may not. "
        f"In a minute, run `/incident status` there: if it answers, {inc_id} is open and you are IC. If not, "
        f"declare again; Firebreak archives the unused channel within {minutes} minutes and tells you."
    )


async def declare_interrupted(svc: Services, intent: Intent) -> Recovered | None:
    """INTERRUPTED for a request that opens an incident (`declare`, or alerts opening one: both note
    the channel in their intent, open_incident): finish what a saved incident lacks, archive a
    channel nothing claimed."""
    channel, number = intent.notes.get("channel"), intent.notes.get("number")
    if not isinstance(channel, str) or not isinstance(number, int):
        return None  # no channel was made (or none we know of): nothing to put right
    inc_id = f"INC-{number}"
    store = repo(svc)
    owner = await store.by_channel(channel)
    if owner is None:
        inc = await store.get(inc_id)
        if inc is not None and inc.channel_id == channel:
            await store.bind_channel(inc_id, channel)  # saved, then stopped before its channel was bound
            owner = inc_id
    if owner is not None:
        return Recovered(
            detail={"incident_channel": channel},
            incident=owner,
            say=f"{owner} is open in {channel_ref(channel)} and you are IC; "
            "run `/incident status` there to check its card.",
        )
    await archive_orphan(svc, channel, inc_id, str(intent.args.get("title") or ""), intent.actor, intent.started_at)
    return Recovered(
        detail={"incident_channel": channel, "archived": True, "unsaved": inc_id},
        say=(
            f"{inc_id} was never saved, so its channel {channel_ref(channel)} was archived "
            f"and {inc_id} will not be used. If you have not declared again since, run `/incident declare` now."
        ),
    )
