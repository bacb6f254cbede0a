"""Approval buttons: value is the request id; the incident is the channel's."""
from __future__ import annotations

import re

from bot.approvals.commands import Approve, Deny
from bot.core.request import Command
from bot.slack.buttons import button

_REQ = re.compile(r"^REQ-[1-9][0-9]*$")
_BG = re.compile(r"^BG-[1-9][0-9]*$")


def _id(value: str, pattern: re.Pattern[str]) -> str:
    if not pattern.match(value):
        raise ValueError(value)
    return value


@button("lever.approve")
def _lever_approve(value: str) -> tuple[Command, str | None]:
    return Approve(request=_id(value, _REQ)), None


@button("lever.deny")
def _lever_deny(value: str) -> tuple[Command, str | None]:
    return Deny(request=_id(value, _REQ)), None


@button("breakglass.approve")
def _bg_approve(value: str) -> tuple[Command, str | None]:
    return Approve(request=_id(value, _BG)), None


@button("breakglass.deny")
def _bg_deny(value: str) -> tuple[Command, str | None]:
    return Deny(request=_id(value, _BG)), None
