"""Modal submissions: callback_id -> the typed command a submission becomes.

Like buttons.py: a decoder gets the submitted view and returns (command,
incident id); bad input raises ModalInputError, shown on the field, and the
modal stays open. A check registered with the modal may refuse a submission
the same way after a quick look at state (e.g. the public-granularity check),
so the person keeps what they typed; it runs only for someone the policy lets
run the command (anyone else gets the policy's refusal, not a wording hint).
The command runs after the ack on the after-ack lane; its outcome is sent to the
submitter as an ephemeral message in the incident channel (a modal has no response_url).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import structlog
from pydantic import ValidationError
from slack_bolt.async_app import AsyncAck, AsyncApp

from bot import logs
from bot.core import authz, dispatch, invalid, registry
from bot.core.request import Command, Request, Source
from bot.incidents.models import INCIDENT_ID
from bot.slack import app as slack_app
from bot.slack.gateway import SlackFailure
from bot.slack.lane import Lane

if TYPE_CHECKING:
    from bot.core.services import Services

log = logs.get(__name__)


class ModalInputError(ValueError):
    def __init__(self, block_id: str, message: str) -> None:
        super().__init__(message)
        self.block_id = block_id
        self.message = message


Decoder = Callable[[dict[str, Any]], tuple[Command, str | None]]
# (svc, command, incident id) -> ModalInputError to show, or None.
Check = Callable[["Services", Command, "str | None"], Awaitable["ModalInputError | None"]]
MODALS: dict[str, Decoder] = {}
CHECKS: dict[str, Check] = {}


def modal(callback_id: str, check: Check | None = None) -> Callable[[Decoder], Decoder]:
    def deco(fn: Decoder) -> Decoder:
        MODALS[callback_id] = fn
        if check is not None:
            CHECKS[callback_id] = check
        return fn

    return deco


def field(view: dict[str, Any], block_id: str, action_id: str) -> str:
    """A submitted plain-text value ('' when empty)."""
    node = ((view.get("state") or {}).get("values") or {}).get(block_id, {}).get(action_id, {})
    return str(node.get("value") or "")


async def _tell(svc: "Services", inc_id: str | None, user: str, text: str) -> None:
    inc = await svc.incidents.get(inc_id) if inc_id else None
    if not text or inc is None or not inc.channel_id:
        return
    try:
        await svc.slack.ephemeral(inc.channel_id, user, text)
    except SlackFailure as f:  # the command is done and audited; only the echo was lost
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
    return meta if INCIDENT_ID.match(meta) else None


async def _check(svc: "Services", req: Request, check: Check | None) -> ModalInputError | None:
    """The modal's own check, for someone the policy lets run the command. Anyone else's
    submission goes straight to the executor, which refuses it with the policy's reason."""
    if check is None:
        return None
    inc = await svc.incidents.get(req.incident_id) if req.incident_id else None
    route = registry.ROUTES[req.command.name]
    if (route.needs_incident and inc is None) or await authz.authorize(svc, req, route, inc) is not None:
        return None
    return await check(svc, req.command, req.incident_id)


async def _run(svc: "Services", req: Request) -> None:
    with structlog.contextvars.bound_contextvars(request_id=req.id, incident=req.incident_id):
        out = await dispatch.execute(svc, req)
        await _tell(svc, req.incident_id, req.actor, out.message)


def install(app: AsyncApp, svc: "Services") -> None:
    lane: Lane = svc.extras["after_ack"]

    @app.view(re.compile(".+"))
    async def on_view(ack: AsyncAck, body: dict[str, Any]) -> None:
        view = body.get("view") or {}
        user = (body.get("user") or {}).get("id", "unknown")
        callback = str(view.get("callback_id", ""))[:100]
        decoder = MODALS.get(callback)
        if decoder is None:
            await ack()  # nothing to keep open: Firebreak does not know this form
            await invalid.record(svc, "modal.unknown", actor=user, incident=_incident_of(view),
                                 detail={"callback_id": callback})
            return
        inc_id = _incident_of(view)
        try:
            cmd, inc_id = decoder(view)
            req = Request(command=cmd, actor=user, source=Source.modal, incident_id=inc_id)
            problem = await _check(svc, req, CHECKS.get(callback))
            if problem is not None:
                raise problem
        except ModalInputError as e:
            await ack(response_action="errors", errors={e.block_id: e.message})
            await invalid.record(svc, "modal.refused", actor=user, incident=inc_id,
                                 detail={"callback_id": callback, "reason": e.message})
            return
        except (ValidationError, ValueError):
            message = "This form no longer matches an incident Firebreak knows; close it and start again."
            await _refuse(ack, view, message)
            await invalid.record(svc, "modal.invalid", actor=user, incident=inc_id,
                                 detail={"callback_id": callback, "reason": message})
            return
        except Exception:  # noqa: BLE001 - the check could not read state: say so on the form, keep the text
            log.exception("modal_check_failed", callback_id=callback)
            await _refuse(ack, view, "Firebreak can't reach its store; nothing changed. Try again in a minute.")
            return
        await ack()
        lane.submit(lambda: _run(svc, req))


slack_app.LISTENERS.append(install)
