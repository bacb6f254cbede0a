"""Buttons: action_id -> the typed command a press becomes.

A decoder gets the button's value and returns (command, incident id). Bad
values raise ValueError and are refused without touching state.
"""
from __future__ import annotations

from typing import Callable

from bot.core.request import Command

Decoder = Callable[[str], tuple[Command, str | None]]
BUTTONS: dict[str, Decoder] = {}


def button(action_id: str) -> Callable[[Decoder], Decoder]:
    def deco(fn: Decoder) -> Decoder:
        BUTTONS[action_id] = fn
        return fn

    return deco


@button("handoff.accept")
def _handoff_accept(value: str) -> tuple[Command, str | None]:
    from bot.incidents.commands import Accept

    inc, _, hid = value.partition("/")
    return Accept(handoff=hid), inc
