"""Action items: `action … --owner --due --verify [--kind]`, `action done AI-n <evidence>`, and
the owner's reminders (rules.py says when).

Durability, in the order things happen:
- add: the id is taken (one global counter), the first reminder is scheduled, then the item is
  stored (Lua). A process that dies between the two leaves a job whose item does not exist; it
  fires, finds nothing, and ends. So every stored item has its reminder pending.
- remind (a scheduler job, run as a system request): posts once per (item, round) through a
  two-step dedupe mark (bot.comms.system.Once: a dead claimer's post is found in the channel, not
  made again), then schedules the next round before the job is acknowledged. A redelivered job
  whose round was posted schedules the same next round (an upsert) and posts nothing.
- done: closes the item once (Lua), then cancels its reminder; a reminder that fires between the
  two finds the item closed and stops.
"""

from __future__ import annotations

from datetime import date

from bot import logs, metrics
from bot.chat import ChatError, person, quote
from bot.clock import iso
from bot.comms.system import Once
from bot.core.dispatch import run_system
from bot.core.posts import announce, joined
from bot.core.request import Outcome, Refusal, Request
from bot.core.services import Services
from bot.incidents.models import Incident
from bot.postmortem import rules
from bot.postmortem.commands import Action, ActionRemind
from bot.postmortem.store import ActionAdded, ActionDone, ActionItem, open_actions, reminded_key, store
from bot.scheduler import Job

log = logs.get(__name__)

REMIND = "postmortem.action_remind"
RETRY_S = 300.0  # a reminder the chat refused is tried again this much later


def _job_key(item: str) -> str:
    return item  # one pending reminder per item: AI-<n> is global


async def schedule_round(svc: Services, item: ActionItem, round_: int) -> float:
    at = rules.reminder_at(date.fromisoformat(item.due), round_, item.created_at)
    await svc.scheduler.schedule(REMIND, _job_key(item.id), at, {"incident": item.incident, "round": round_})
    return at


async def action(svc: Services, req: Request, cmd: Action, inc: Incident) -> Outcome:
    if cmd.done is not None:
        return await _done(svc, req, cmd, inc)
    return await _add(svc, req, cmd, inc)


async def _add(svc: Services, req: Request, cmd: Action, inc: Incident) -> Outcome:
    assert cmd.text and cmd.owner and cmd.due and cmd.verify  # the command's validator says so
    now = svc.clock.now()
    due = date.fromisoformat(cmd.due)
    why = rules.due_refusal(due, now)
    if why:
        raise Refusal(f"{why} Nothing was recorded.", due=cmd.due)
    st = store(svc)
    item = ActionItem(
        id=await st.next_action_id(),
        incident=inc.id,
        text=cmd.text,
        owner=cmd.owner,
        due=cmd.due,
        verify=cmd.verify,
        kind=cmd.kind,
        created_by=req.actor,
        created_at=now,
    )
    first = await schedule_round(svc, item, 1)
    code = await st.add_action(item)
    if code is not ActionAdded.ADDED:
        await svc.scheduler.cancel(REMIND, _job_key(item.id))
        raise Refusal(f"{inc.id} no longer exists; nothing was recorded.", code=code.name)
    when = "shortly (it is due today)" if first <= now + 60 else f"at {rules.utc(first)}"
    warn = await announce(
        svc,
        inc.id,
        f":memo: {item.id} ({item.kind}) for {person(item.owner)}, due {item.due}: {quote(item.text)}\n"
        f"Verify: {quote(item.verify)}",
    )
    return Outcome(
        message=joined(
            f"{item.id} added to {inc.id}'s postmortem: {person(item.owner)} owns it, due {item.due}. They are "
            f"reminded in this channel {when} and every day after until `/incident action done {item.id} <evidence>`.",
            warn,
        ),
        audit={
            "item": item.id,
            "owner": item.owner,
            "due": item.due,
            "kind": item.kind,
            "verify": item.verify,
            "first_reminder": iso(first),
        },
    )


async def _done(svc: Services, req: Request, cmd: Action, inc: Incident) -> Outcome:
    assert cmd.done and cmd.evidence
    st = store(svc)
    got = await st.close_action(inc.id, cmd.done, cmd.evidence, req.actor, svc.clock.now())
    if got.code is ActionDone.MISSING or got.item is None:
        raise Refusal(
            f"{inc.id} has no {cmd.done}; nothing changed. Its items are listed in the postmortem "
            "(`/incident postmortem`); close an item in the channel of the incident it belongs to."
        )
    item = got.item
    if got.code is ActionDone.ALREADY:
        at = rules.utc(item.done_at) if item.done_at else "earlier"
        by = person(item.done_by) if item.done_by else "someone"
        raise Refusal(
            f"{item.id} was closed already by {by} ({at}) with: {quote(item.evidence or '')}. "
            "The first evidence stands; nothing changed."
        )
    await svc.scheduler.cancel(REMIND, _job_key(item.id))
    warn = await announce(
        svc,
        inc.id,
        f":white_check_mark: {item.id} done ({person(req.actor)}): {quote(item.text)}\nEvidence: {quote(cmd.evidence)}",
    )
    return Outcome(
        message=joined(f"{item.id} is done; its reminders stop.", warn),
        audit={"item": item.id, "evidence": cmd.evidence, "owner": item.owner},
    )


async def close_rule(svc: Services, req: Request, inc: object) -> str | None:
    """`action done`: only the item's owner or the incident's IC (rules.may_close)."""
    cmd = req.command
    if not isinstance(cmd, Action) or cmd.done is None or not isinstance(inc, Incident):
        return None
    item = await store(svc).action(inc.id, cmd.done)
    if item is None:
        return None  # the handler says there is no such item
    if rules.may_close(req.actor, item.owner, inc.holder("ic")):
        return None
    ic = inc.holder("ic")
    who = person(item.owner) + (f" or the IC {person(ic)}" if ic else "")
    return f"Only the item's owner or the IC can close {item.id} ({who}); nothing changed."


# Reminders --------------------------------------------------------------------------------------


async def remind_job(svc: Services, job: Job) -> None:
    await run_system(
        svc,
        ActionRemind(item=job.key, round=int(job.payload.get("round", 1)), late=job.late),
        str(job.payload["incident"]),
    )


def _text(item: ActionItem, round_: int, now: float) -> str:
    days = rules.overdue_days(date.fromisoformat(item.due), now)
    when = (
        f"is due today ({item.due})"
        if days == 0
        else f"is {days} day{'s' if days != 1 else ''} overdue (due {item.due})"
    )
    return (
        f":pushpin: {person(item.owner)} {item.id} {when}: {quote(item.text)}\n"
        f"Verify: {quote(item.verify)}\n"
        f"When it ships: `/incident action done {item.id} <evidence>`."
    )


async def remind(svc: Services, req: Request, cmd: ActionRemind, inc: Incident) -> Outcome:
    """Post round ``cmd.round`` of an open item's reminder once, then schedule the next round."""
    st = store(svc)
    item = await st.action(inc.id, cmd.item)
    if item is None:
        raise Refusal(f"{inc.id} has no {cmd.item} (it was never stored); no reminder.", skipped="missing")
    if item.state == "done":
        raise Refusal(f"{item.id} is done; no reminder.", skipped="done")
    now = svc.clock.now()
    due = date.fromisoformat(item.due)
    nxt = rules.next_round(due, cmd.round, item.created_at, now)
    once = Once(svc, reminded_key(inc.id, item.id, cmd.round))
    if not await once.claim():
        # Posted already (a redelivered job): make sure the next round is pending, post nothing.
        await schedule_round(svc, item, nxt)
        raise Refusal(f"{item.id}'s reminder {cmd.round} was posted already.", skipped="duplicate")
    assert inc.channel_id  # every incident gets its channel before it is stored
    found = await once.landed_before(inc.channel_id)
    if not found:
        try:
            await svc.chat.post(inc.channel_id, _text(item, cmd.round, now), mark=once.key)
        except ChatError as f:
            # Not left to the job's lease (three tries, then the chain of reminders would end):
            # the same round again in RETRY_S, for as long as the chat refuses.
            await once.release()
            retry = now + RETRY_S
            await svc.scheduler.schedule(REMIND, _job_key(item.id), retry, {"incident": inc.id, "round": cmd.round})
            raise Refusal(
                f"Slack refused {item.id}'s reminder ({f.error}); trying again at {rules.utc(retry)}.",
                slack_error=f.error,
                item=item.id,
                round=cmd.round,
                retry_at=iso(retry),
            ) from None
    await once.done()
    await st.reminded(inc.id, item.id, now)
    at = await schedule_round(svc, item, nxt)
    fire_at = rules.reminder_at(due, cmd.round, item.created_at)
    metrics.reminder_posted("action_item", now - fire_at, cmd.late, svc.scheduler.tolerance)
    return Outcome(
        message="reminder posted",
        audit={
            "item": item.id,
            "owner": item.owner,
            "round": cmd.round,
            "late": cmd.late,
            "lateness_s": round(now - fire_at, 3),
            "next": iso(at),
            **({"found_posted": True} if found else {}),
        },
    )


async def repair(svc: Services) -> None:
    """At start: every open item has its next reminder pending. One whose job was lost (it went
    dead after failed tries, or the store was wiped of jobs) gets the round after its last
    reminder; a round that fell due meanwhile fires at the next tick, marked late."""
    for item in await open_actions(svc):
        if await svc.scheduler.pending(REMIND, _job_key(item.id)) is not None:
            continue
        due = date.fromisoformat(item.due)
        round_ = rules.next_round(due, 1, item.created_at, max(item.reminded)) if item.reminded else 1
        await schedule_round(svc, item, round_)
        log.info("action_reminder_repaired", item=item.id, incident=item.incident, round=round_)
