"""How audit entries read on the postmortem's timeline, declared by the capability that writes them.

A capability registers, in its ``register(reg)``, a line for each audit action it writes:
``reg.timeline("lever.done", LeverEntry, render)`` (or ``reg.timeline(MyCommand, ...)`` for the
executor's ``command.<name>`` entry of a command it registered). The entry's detail is read into
the declared model (typed; keys it does not name are ignored) and the pure ``render(detail, by)``
returns the line, or None when the entry is no event (a read, Firebreak's bookkeeping). The
postmortem looks lines up here and knows no capability's action; an action nobody declared reads
as a neutral line with its name.

Every command entry follows the executor's convention (bot/core/dispatch.py): a refusal or an
error is no event, an interrupted request says so; only a command that went through is rendered.

The text helpers (``md``, ``code``, ``who``) make every renderer's text safe Markdown: Slack's
markup made inert, mentions shown as `@U123`, one line (nothing typed can start a `## ` heading
or a table row), backslashes escaped; names and expressions go in code spans (``code``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from bot import logs
from bot.chat import name_people, quote, visible
from bot.ids import SYSTEM_ACTOR

log = logs.get(__name__)

COMMAND = "command."  # the executor's entry for a request is `command.<name>` (bot/core/dispatch.py)
TEXT_CHARS = 300  # a person's text on the timeline, at most (the channel has it whole)


def command_action(name: str) -> str:
    return f"{COMMAND}{name}"


# Text ---------------------------------------------------------------------------------------


def md(text: str | None, limit: int | None = None) -> str:
    """A person's or an alert's text, safe in Markdown prose (and in table cells, escaped there)."""
    t = name_people(quote(text or ""), lambda user: f"@{user}")
    t = " ".join(t.split())
    if limit is not None and len(t) > limit:
        t = t[: limit - 1].rstrip() + "…"
    return t.replace("\\", "\\\\")


def code(text: str) -> str:
    """Text for a code span (an alertname, an expression): one line, no backtick to end it early.
    Not quoted: a code span shows entities literally, and renders no markup or HTML anyway."""
    return " ".join(visible(text).split()).replace("`", "'")


def who(user: str | None) -> str:
    if not user:
        return "nobody"
    return "Firebreak" if user == SYSTEM_ACTOR else f"@{code(user)}"


# Declarations ---------------------------------------------------------------------------------


class Detail(BaseModel):
    """Base of a timeline line's typed detail (and of the parts it holds, such as a command's
    ``args``): the keys a renderer reads, nothing it doesn't. A key written as null reads as the
    field's default (a command's optional argument is dumped as null)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_defaults(cls, data: Any) -> Any:
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data


class CommandDetail(Detail):
    """What the executor writes for every request; a command's line adds its ``args`` and the
    handler's own audit keys."""

    source: str = ""
    result: str = "ok"


D = TypeVar("D", bound=Detail)
# (the entry's typed detail, the actor as the timeline shows them) -> the line, or None: no event.
Render = Callable[[D, str], "str | None"]


@dataclass(frozen=True)
class Line(Generic[D]):
    action: str
    detail: type[D]
    render: Callable[[D, str], str | None]

    def text(self, detail: dict[str, Any], by: str) -> str | None:
        try:
            typed = self.detail.model_validate(detail)
        except ValidationError as exc:
            # An entry written before its shape changed: it still gets its neutral line.
            log.warning("timeline_detail_unreadable", action=self.action, error=str(exc.errors()[0]["msg"]))
            return neutral(self.action, by)
        return self.render(typed, by)


def neutral(action: str, by: str) -> str:
    """The line for an action no capability declared: its name and who."""
    return f"`{code(action.removeprefix(COMMAND))}` by {by}"


def line(lines: Mapping[str, Line[Any]], entry: Mapping[str, Any]) -> str | None:
    """One audit entry as a timeline line (None: not an event worth a line)."""
    action = str(entry.get("action", ""))
    detail = entry.get("detail") or {}
    by = who(str(entry.get("actor", "")))
    if action.startswith(COMMAND):
        result = detail.get("result", "ok")
        if result == "interrupted":
            return f"`{code(action.removeprefix(COMMAND))}` by {by} was interrupted part-way (see the audit log)"
        if result != "ok":
            return None  # a refusal or an error: nothing happened
    declared = lines.get(action)
    return declared.text(detail, by) if declared is not None else neutral(action, by)
