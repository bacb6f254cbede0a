"""Block Kit for comms: the reminder with its buttons, and the update modal."""
from __future__ import annotations

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    InputBlock,
    MarkdownTextObject,
    PlainTextInputElement,
    SectionBlock,
)
from slack_sdk.models.views import View

UPDATE_MODAL = "cadence.update"  # callback_id of the modal
UPDATE_BLOCK, UPDATE_INPUT = "update", "text"


def reminder_blocks(text: str, inc_id: str, due: str, snooze_minutes: float) -> list[Block]:
    return [
        SectionBlock(text=MarkdownTextObject(text=text)),
        ActionsBlock(
            block_id=f"cadence:{inc_id}",
            elements=[
                ButtonElement(text="Post update", action_id="cadence.post_update", value=inc_id, style="primary"),
                ButtonElement(text=f"Snooze {snooze_minutes:g} min", action_id="cadence.snooze",
                              value=f"{inc_id}/{due}"),
            ],
        ),
    ]


def update_modal(inc_id: str, title: str, last_text: str | None) -> View:
    return View(
        type="modal",
        callback_id=UPDATE_MODAL,
        private_metadata=inc_id,
        title=f"Update {inc_id}"[:24],
        submit="Post update",
        close="Cancel",
        blocks=[
            SectionBlock(text=MarkdownTextObject(
                text=f"*{title[:200]}*\nPublic updates name a product and a region, never a cell or a node.")),
            InputBlock(
                block_id=UPDATE_BLOCK,
                label="Status update",
                element=PlainTextInputElement(action_id=UPDATE_INPUT, multiline=True, max_length=3000,
                                              initial_value=(last_text or None) and last_text[:3000]),
            ),
        ],
    )
