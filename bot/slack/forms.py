"""Form wire format: each form's callback_id and where its fields sit in the modal.

The one table of modal ids. Like action ids, they are what open forms already
carry, so they never change shape.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.request import Command
from bot.incidents.commands import Update


@dataclass(frozen=True)
class SlackForm:
    callback_id: str
    fields: dict[str, tuple[str, str]]  # command field -> (block_id, action_id)

    def field(self, name: str) -> tuple[str, str]:
        return self.fields.get(name, (name, name))


FORMS: dict[type[Command], SlackForm] = {
    Update: SlackForm("cadence.update", {"text": ("update", "text")}),
}
_BY_CALLBACK = {f.callback_id: (cmd, f) for cmd, f in FORMS.items()}


def wire(command: type[Command]) -> SlackForm:
    try:
        return FORMS[command]
    except KeyError:
        raise LookupError(f"no Slack form for {command.__name__}: add a row to bot/slack/forms.py") from None


def by_callback(callback_id: str) -> tuple[type[Command], SlackForm] | None:
    return _BY_CALLBACK.get(callback_id)
