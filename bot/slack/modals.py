"""Modal submissions: callback_id -> the typed command a submission becomes.

Like buttons.py: a decoder gets the submitted view and returns (command,
incident id); bad input raises ModalInputError, shown on the field, and the
modal stays open. A check registered with the modal may refuse a submission
the same way after a quick look at state (e.g. the public-granularity check),
so the person keeps what they typed. The outcome is sent to the submitter as an ephemeral
message in the incident channel (a modal has no response_url).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from pydantic import ValidationError
from slack_bolt.async_app import AsyncAck, AsyncApp

from bot import logs
from bot.core import dispatch
from bot.core.request import Command, Request, Source
from bot.slack import app as slack_app
from bot.slack.gateway import SlackFailure

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


def install(app: AsyncApp, svc: "Services") -> None:
    @app.view(re.compile(".+"))
    async def on_view(ack: AsyncAck, body: dict[str, Any]) -> None:
        view = body.get("view") or {}
        user = (body.get("user") or {}).get("id", "unknown")
        decoder = MODALS.get(str(view.get("callback_id", "")))
        if decoder is None:
            await ack()
            return
        try:
            cmd, inc_id = decoder(view)
            check = CHECKS.get(str(view.get("callback_id", "")))
            problem = await check(svc, cmd, inc_id) if check else None
            if problem is not None:
                raise problem
        except ModalInputError as e:
            await ack(response_action="errors", errors={e.block_id: e.message})
            await svc.audit.append("modal.refused", actor=user, incident=None,
                                   detail={"callback_id": view.get("callback_id"), "reason": e.message})
            return
        except (ValidationError, ValueError):
            await ack(response_action="errors", errors={})
            return
        await ack()
        out = await dispatch.execute(svc, Request(command=cmd, actor=user, source=Source.modal, incident_id=inc_id))
        await _tell(svc, inc_id, user, out.message)


slack_app.LISTENERS.append(install)
