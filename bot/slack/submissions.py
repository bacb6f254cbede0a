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
import re
from typing import Any

import structlog
from pydantic import ValidationError
from slack_bolt.async_app import AsyncAck, AsyncApp

from bot import logs
from bot.chat import ChatError, FieldError
from bot.core import authz, dispatch, invalid
from bot.core.registry import FormSpec
from bot.core.request import Request, Source
from bot.core.services import Services
from bot.ids import INCIDENT_ID
from bot.slack import forms
from bot.slack.lane import Lane

log = logs.get(__name__)

# The form's answer is the HTTP response, due within Slack's 3 s: the replay check (up to 1 s,
# bot/slack/inbound.py) and this pre-ack check must both fit, however long a hung Redis waits.
CHECK_S = 1.0


def _value(view: dict[str, Any], block_id: str, action_id: str) -> str:
    """A submitted plain-text value ('' when empty)."""
    node = ((view.get("state") or {}).get("values") or {}).get(block_id, {}).get(action_id, {})
    return str(node.get("value") or "")


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


def _first_input(view: dict[str, Any]) -> str | None:
    """The block an error can be shown on (Slack accepts errors only on input blocks)."""
    for b in view.get("blocks") or []:
        if b.get("type") == "input" and b.get("block_id"):
            return str(b["block_id"])
    values = (view.get("state") or {}).get("values") or {}
    return next(iter(values), None)


async def _refuse(ack: AsyncAck, view: dict[str, Any], message: str) -> None:
    block = _first_input(view)
    await (ack(response_action="errors", errors={block: message}) if block else ack())


def _incident_of(view: dict[str, Any]) -> str | None:
    meta = str(view.get("private_metadata", ""))
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


def install(app: AsyncApp, svc: Services, lane: Lane) -> None:
    @app.view(re.compile(".+", re.DOTALL))  # any callback id: unknown ones are answered below
    async def on_view(ack: AsyncAck, body: dict[str, Any]) -> None:
        view = body.get("view") or {}
        user = (body.get("user") or {}).get("id", "unknown")
        callback = str(view.get("callback_id", ""))[:100]
        known = forms.by_callback(callback)
        spec = svc.registry.forms.get(known[0]) if known else None
        if known is None or spec is None:
            await ack()  # nothing to keep open: Firebreak does not know this form
            await invalid.record(
                svc, "modal.unknown", actor=user, incident=_incident_of(view), detail={"callback_id": callback}
            )
            return
        wire = known[1]
        inc_id = _incident_of(view)
        try:
            if inc_id is None:
                raise ValueError("no incident in the form")
            values = {name: _value(view, *ids) for name, ids in wire.fields.items()}
            req = Request(command=spec.parse(values), actor=user, source=Source.modal, incident_id=inc_id)
            async with asyncio.timeout(CHECK_S):  # timing out: "can't reach its store" below
                problem = await _check(svc, req, spec, wire)
            if problem is not None:
                raise problem
        except FieldError as e:
            await ack(response_action="errors", errors={wire.field(e.field)[0]: e.message})
            await invalid.record(
                svc, "modal.refused", actor=user, incident=inc_id, detail={"callback_id": callback, "reason": e.message}
            )
            return
        except (ValidationError, ValueError):
            message = "This form no longer matches an incident Firebreak knows; close it and start again."
            await _refuse(ack, view, message)
            await invalid.record(
                svc, "modal.invalid", actor=user, incident=inc_id, detail={"callback_id": callback, "reason": message}
            )
            return
        except Exception:
            log.exception("modal_check_failed", callback_id=callback)
            await _refuse(ack, view, "Firebreak can't reach its store; nothing changed. Try again in a minute.")
            return
        await ack()
        lane.submit(lambda: _run(svc, req))
