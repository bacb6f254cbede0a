"""What comms shows: the reminder with its buttons, and the update form (plain view models)."""

from __future__ import annotations

from bot.chat import Button, Buttons, Card, Form, Press, Section, TextField, quote
from bot.comms.commands import Snooze, UpdateForm
from bot.incidents.commands import Update


def reminder_card(text: str, inc_id: str, due: str, snooze_minutes: float) -> Card:
    return Card.of(
        Section(text),
        Buttons(
            f"cadence:{inc_id}",
            (
                Button("Post update", Press(UpdateForm(), inc_id), style="primary"),
                Button(f"Snooze {snooze_minutes:g} min", Press(Snooze(due=due), inc_id)),
            ),
        ),
    )


def update_form(inc_id: str, title: str, last_text: str | None) -> Form:
    """Prefilled with the last update, so the next one edits it rather than starting blank."""
    return Form(
        command=Update,
        incident=inc_id,
        title=f"Update {inc_id}"[:24],
        submit="Post update",
        close="Cancel",
        intro=f"*{quote(title[:200])}*\nPublic updates name a product and a region, never a cell or a node.",
        fields=(TextField("text", "Status update", multiline=True, max_length=3000, initial=last_text),),
    )
