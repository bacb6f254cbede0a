"""Button wire format: a press (a typed command) <-> Slack's action_id and value.

The one table of action ids. The ids and values are what messages already
posted carry, so they never change shape; a new button adds a row here.
A bad value raises ValueError and is refused without touching state.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError

from bot.approvals.commands import Approve, Deny
from bot.chat.views import Press
from bot.comms.commands import Snooze, UpdateForm
from bot.core.request import Command
from bot.ids import GRANT_ID, INCIDENT_ID, REQUEST_ID
from bot.incidents.commands import Accept


@dataclass(frozen=True)
class Action:
    action_id: str
    command: type[Command]
    encode: Callable[[Press], str]  # -> the button's value
    decode: Callable[[str], Press]
    when: Callable[[BaseModel], bool] = lambda _cmd: True  # several ids for one command type


def _inc(value: str) -> str:
    if not INCIDENT_ID.fullmatch(value):
        raise ValueError("not an incident id")
    return value


def _id(value: str, shape: re.Pattern[str]) -> str:
    if not shape.fullmatch(value):
        raise ValueError(value[:40])
    return value


def _ballot(value: BaseModel, shape: re.Pattern[str]) -> bool:
    return bool(shape.fullmatch(str(getattr(value, "request", ""))))


def _accept(value: str) -> Press:
    inc, _, hid = value.partition("/")
    return Press(Accept(handoff=hid), inc)


def _snooze(value: str) -> Press:
    inc, _, due = value.partition("/")
    return Press(Snooze(due=due), _inc(inc))


def _req(p: Press) -> str:
    if not isinstance(p.command, Approve | Deny):
        raise TypeError(type(p.command).__name__)
    return p.command.request


def _handoff(p: Press) -> str:
    if not isinstance(p.command, Accept):
        raise TypeError(type(p.command).__name__)
    return f"{p.incident}/{p.command.handoff}"


def _due(p: Press) -> str:
    if not isinstance(p.command, Snooze):
        raise TypeError(type(p.command).__name__)
    return f"{p.incident}/{p.command.due}"


ACTIONS: tuple[Action, ...] = (
    Action("handoff.accept", Accept, _handoff, _accept),
    Action("cadence.post_update", UpdateForm, lambda p: str(p.incident), lambda v: Press(UpdateForm(), _inc(v))),
    Action("cadence.snooze", Snooze, _due, _snooze),
    # Approval buttons carry the request id; the incident is the channel's.
    Action(
        "lever.approve",
        Approve,
        _req,
        lambda v: Press(Approve(request=_id(v, REQUEST_ID))),
        lambda c: _ballot(c, REQUEST_ID),
    ),
    Action(
        "lever.deny", Deny, _req, lambda v: Press(Deny(request=_id(v, REQUEST_ID))), lambda c: _ballot(c, REQUEST_ID)
    ),
    Action(
        "breakglass.approve",
        Approve,
        _req,
        lambda v: Press(Approve(request=_id(v, GRANT_ID))),
        lambda c: _ballot(c, GRANT_ID),
    ),
    Action(
        "breakglass.deny", Deny, _req, lambda v: Press(Deny(request=_id(v, GRANT_ID))), lambda c: _ballot(c, GRANT_ID)
    ),
)
_BY_ID = {a.action_id: a for a in ACTIONS}


def encode(press: Press) -> tuple[str, str]:
    """(action_id, value) for a button that runs ``press``."""
    for a in ACTIONS:
        if isinstance(press.command, a.command) and a.when(press.command):
            return a.action_id, a.encode(press)
    raise LookupError(f"no Slack action for {type(press.command).__name__}: add a row to bot/slack/actions.py")


def decode(action_id: str, value: str) -> tuple[Command, str | None] | None:
    """The command (and incident) a button's action_id and value stand for; None for an unknown id.
    Raises ValueError for a value Firebreak did not make."""
    a = _BY_ID.get(action_id)
    if a is None:
        return None
    try:
        press = a.decode(value)
    except ValidationError:
        raise ValueError(value[:40]) from None
    if not isinstance(press.command, Command):  # every row above makes a Command
        raise TypeError(f"{action_id} decoded to {type(press.command).__name__}")
    return press.command, press.incident
