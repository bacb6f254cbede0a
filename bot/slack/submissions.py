"""Form submissions: a submitted modal -> the typed command its form stands for.

The form's wire ids come from forms.py; what the values mean is the
capability's (``Registry.form``): its parse raises FieldError for bad input,
shown on the field, and the modal stays open. The policy check runs before the
ack too (a fast Redis read), so a refusal is shown on the form, where the
submitter sees it whether or not they are in the incident channel; then the
form's own check may refuse the same way after a quick look at state (the
public-granularity check), so the person keeps what they typed. The command
runs after the ack on the after-ack lane, where the executor checks the policy
again; its outcome is sent to the submitter as an ephemeral message in the
incident channel (a modal has no response_url), or as a direct message when
that is refused (they are not in the channel).
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from pydantic import ValidationError
from redis.exceptions import RedisError
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest

from bot import logs
from bot.chat import ChatError, FieldError
from bot.core import authz, dispatch, invalid
from bot.core.registry import FormSpec
from bot.core.request import Request, Source
from bot.core.services import Services
from bot.ids import INCIDENT_ID
from bot.slack import forms, teams
from bot.slack.inbound import inbound_of
from bot.slack.lane import Lane
from bot.slack.replays import Job, Replays
from bot.slack.shapes import Kind, View, ViewSubmission

log = logs.get(__name__)

# The form's answer is the HTTP response, due within Slack's 3 s, however long a hung Redis waits.
CHECK_S = 1.0


def _value(view: View, block_id: str, action_id: str) -> str:
    """A submitted plain-text value ('' when empty)."""
    values = (view.state.values if view.state else None) or {}
    return str(values.get(block_id, {}).get(action_id, {}).get("value") or "")


async def _tell(svc: Services, inc_id: str | None, user: str, text: str) -> None:
    if not text:
        return
    inc = await svc.incidents.get(inc_id) if inc_id else None
    if inc is not None and inc.channel_id:
        try:
            await svc.chat.ephemeral(inc.channel_id, user, text)
            return
        except ChatError as f:  # e.g. user_not_in_channel: say it in a direct message instead
            log.info("modal_reply_not_in_channel", error=f.error)
    try:
        await svc.chat.post(user, text)  # posting to a user id opens the DM with them
    except ChatError as f:  # the command is done and audited; only the echo was lost
        log.warning("modal_reply_failed", error=f.error)


def _first_input(view: View) -> str | None:
    """The block an error can be shown on (Slack accepts errors only on input blocks)."""
    for b in view.blocks or []:
        if b.get("type") == "input" and b.get("block_id"):
            return str(b["block_id"])
    return next(iter((view.state.values if view.state else None) or {}), None)


async def _refuse(ack: AsyncAck, view: View, message: str) -> None:
    block = _first_input(view)
    await (ack(response_action="errors", errors={block: message}) if block else ack())


def _incident_of(view: View) -> str | None:
    meta = view.private_metadata or ""
    return meta if INCIDENT_ID.fullmatch(meta) else None


async def _check(svc: Services, req: Request, spec: FormSpec, wire: forms.SlackForm) -> FieldError | None:
    """The policy's refusal, shown on the form's first field; else the form's own check."""
    inc = await svc.incidents.get(req.incident_id) if req.incident_id else None
    route = svc.registry.routes[req.command.name]
    if route.needs_incident and inc is None:
        raise ValueError("the form's incident does not exist")
    if (denial := await authz.authorize(svc, req, route, inc)) is not None:
        return FieldError(next(iter(wire.fields)), denial)
    if spec.check is None:
        return None
    return await spec.check(svc, req.command, req.incident_id)


async def _run(svc: Services, req: Request) -> None:
    with structlog.contextvars.bound_contextvars(request_id=req.id, incident=req.incident_id):
        out = await dispatch.execute(svc, req)
        await _tell(svc, req.incident_id, req.actor, out.message)


async def unknown(svc: Services, body: ViewSubmission) -> None:
    """A form Firebreak does not know (Bolt answered 404): its audit entry."""
    detail = {"callback_id": body.view.callback_id[:100]}
    await invalid.record(svc, "modal.unknown", actor=body.user.id, incident=_incident_of(body.view), detail=detail)


def install(app: AsyncApp, svc: Services, lane: Lane, replays: Replays) -> None:
    async def on_view(ack: AsyncAck, context: AsyncBoltContext, request: AsyncBoltRequest) -> None:
        body = inbound_of(context).model
        assert isinstance(body, ViewSubmission)  # Bolt routes only view submissions here
        view, user = body.view, body.user.id
        callback = view.callback_id
        known = forms.by_callback(callback)
        assert known is not None  # only callback ids in forms.FORMS are routed here
        spec = svc.registry.forms[known[0]]
        wire = known[1]
        inc_id = _incident_of(view)
        try:
            if inc_id is None:
                raise ValueError("no incident in the form")
            values = {name: _value(view, *ids) for name, ids in wire.fields.items()}
            req = Request(
                command=spec.parse(values),
                actor=user,
                source=Source.modal,
                incident_id=inc_id,
                other_team=teams.other_team(Kind.view, inbound_of(context).body, context.authorize_result),
            )
            async with asyncio.timeout(CHECK_S):  # timing out: "can't reach its store" below
                problem = await _check(svc, req, spec, wire)
            if problem is not None:
                raise problem
        except FieldError as e:
            await ack(response_action="errors", errors={wire.field(e.field)[0]: e.message})
            detail: dict[str, Any] = {"callback_id": callback, "reason": e.message}
            lane.submit(replays.once(request, Kind.view, _record(svc, "modal.refused", user, inc_id, detail)))
            return
        except (ValidationError, ValueError):
            message = "This form no longer matches an incident Firebreak knows; close it and start again."
            await _refuse(ack, view, message)
            detail = {"callback_id": callback, "reason": message}
            lane.submit(replays.once(request, Kind.view, _record(svc, "modal.invalid", user, inc_id, detail)))
            return
        except Exception as exc:  # the form must be answered within Slack's 3 s whatever failed; logged whole
            log.exception("modal_check_failed", callback_id=callback)
            store = isinstance(exc, (RedisError, OSError, TimeoutError))
            why = "can't reach its store" if store else "could not check this form"
            await _refuse(ack, view, f"Firebreak {why}; nothing changed. Try again in a minute.")
            return
        await ack()
        lane.submit(replays.once(request, Kind.view, lambda: _run(svc, req)))

    for command, wire in forms.FORMS.items():
        if command in svc.registry.forms:  # a form of a capability this app has
            app.view(wire.callback_id)(on_view)


def _record(svc: Services, action: str, user: str, inc_id: str | None, detail: dict[str, Any]) -> Job:
    async def record() -> None:
        await invalid.record(svc, action, actor=user, incident=inc_id, detail=detail)

    return record
