"""The reminder's buttons: "Post update" (opens the update modal) and "Snooze"."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from bot.clock import hhmm
from bot.comms import cards, scripts
from bot.comms.commands import Snooze, UpdateForm
from bot.core.registry import route
from bot.core.request import Command, Outcome, Refusal, Request
from bot.incidents.commands import Update
from bot.incidents.models import INCIDENT_ID, Incident
from bot.incidents.views import announce, joined, refresh_card
from bot.slack.buttons import button
from bot.slack.gateway import SlackFailure
from bot.slack.modals import ModalInputError, field, modal
from bot.store import Keys

if TYPE_CHECKING:
    from bot.core.services import Services


def _inc(value: str) -> str:
    if not INCIDENT_ID.match(value):
        raise ValueError("not an incident id")
    return value


@button("cadence.post_update")
def _post_update(value: str) -> tuple[Command, str | None]:
    return UpdateForm(), _inc(value)


@button("cadence.snooze")
def _snooze(value: str) -> tuple[Command, str | None]:
    inc, _, due = value.partition("/")
    try:
        return Snooze(due=due), _inc(inc)
    except ValidationError:
        raise ValueError("bad due") from None


async def _update_public_check(svc: "Services", cmd: Command, inc_id: str | None) -> ModalInputError | None:
    from bot.comms.update import public_problem, secret_problem  # the rules `/incident update` applies

    inc = await svc.incidents.get(inc_id) if inc_id else None
    if inc is None or not isinstance(cmd, Update):
        return None
    leak = secret_problem(svc, cmd.text)
    if leak:
        return ModalInputError(cards.UPDATE_BLOCK, leak)
    bad = await public_problem(svc, inc, cmd.text)
    # Refused on the form itself, so the person keeps what they typed.
    return ModalInputError(cards.UPDATE_BLOCK, bad[0][:2000]) if bad else None


@modal(cards.UPDATE_MODAL, check=_update_public_check)
def _update_modal(view: dict[str, Any]) -> tuple[Command, str | None]:
    text = field(view, cards.UPDATE_BLOCK, cards.UPDATE_INPUT).strip()
    if not text:
        raise ModalInputError(cards.UPDATE_BLOCK, "Write the update: what users see, in which product and region.")
    if len(text) > 3000:
        raise ModalInputError(cards.UPDATE_BLOCK, "Keep it under 3000 characters.")
    return Update(text=text), _inc(str(view.get("private_metadata", "")))


@route(UpdateForm, spec=None, summary="open the update form (button)")
async def update_form(svc: "Services", req: Request, inc: Incident | None) -> Outcome:
    assert inc is not None
    if not req.trigger_id:
        raise Refusal("Use `/incident update <text>` to post an update.")
    view = cards.update_modal(inc.id, inc.title, inc.last_update_text)
    try:
        await svc.slack.open_view(req.trigger_id, view.to_dict())
    except SlackFailure as f:
        raise Refusal(f"Slack did not open the form ({f.error}); use `/incident update <text>`.") from None
    return Outcome(message="", audit={"prefilled": bool(inc.last_update_text)})


@route(Snooze, spec=None, summary="snooze the update reminder (button)")
async def snooze(svc: "Services", req: Request, inc: Incident | None) -> Outcome:
    cmd: Snooze = req.command  # type: ignore[assignment]
    assert inc is not None
    minutes = svc.policy.cadence.snooze_minutes
    new_due = svc.clock.now() + minutes * 60
    code, current = await scripts.loaded(svc).snooze(
        keys=[Keys.incident(inc.id)], args=[cmd.due, repr(new_due)]
    )
    if int(code) == 0:
        now_due = f"next update due {hhmm(float(current))} UTC" if current else "no update due"
        raise Refusal(f"That reminder is no longer current ({now_due}): an update or snooze came first.")
    if int(code) < 0:
        raise Refusal(f"{inc.id} is {inc.status.value}; no update is due.")
    warn = await announce(svc, inc.id, f":zzz: <@{req.actor}> snoozed the {inc.id} update reminder "
                                       f"to {hhmm(new_due)} UTC.")
    warn2 = await refresh_card(svc, inc.id)
    return Outcome(message=joined(f"Snoozed {minutes:g} min: next update due {hhmm(new_due)} UTC.", warn, warn2),
                   audit={"due_from": cmd.due, "due_to": repr(new_due)})
