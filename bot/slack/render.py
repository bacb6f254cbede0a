"""View models (bot/chat/views) -> Block Kit, with slack_sdk.models (validated on send)."""

from __future__ import annotations

from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    HeaderBlock,
    InputBlock,
    MarkdownTextObject,
    PlainTextInputElement,
    SectionBlock,
)
from slack_sdk.models.views import View

from bot.chat.views import Button, Buttons, Card, Context, Fields, Form, Header, Part, Section
from bot.core.request import Command
from bot.slack import actions, forms

# Slack's own limits: longer text is refused by the API, so it is cut here with an ellipsis.
_SECTION, _FIELD, _HEADER = 3000, 2000, 150


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _md(text: str, limit: int) -> MarkdownTextObject:
    return MarkdownTextObject(text=_cut(text, limit))


def _button(b: Button) -> ButtonElement:
    action_id, value = actions.encode(b.press)
    confirm = (
        ConfirmObject(title=b.confirm.title, text=b.confirm.text, confirm=b.confirm.confirm, deny=b.confirm.deny)
        if b.confirm
        else None
    )
    return ButtonElement(text=b.label, action_id=action_id, value=value, style=b.style, confirm=confirm)


def _block(p: Part) -> Block:
    if isinstance(p, Header):
        return HeaderBlock(text=_cut(p.text, _HEADER))
    if isinstance(p, Section):
        return SectionBlock(text=_md(p.text, _SECTION))
    if isinstance(p, Fields):
        return SectionBlock(fields=[_md(t, _FIELD) for t in p.items])
    if isinstance(p, Context):
        return ContextBlock(elements=[_md(t, _FIELD) for t in p.items])
    if isinstance(p, Buttons):
        return ActionsBlock(block_id=p.key, elements=[_button(b) for b in p.buttons])
    raise TypeError(f"no Block Kit for {type(p).__name__}")


def blocks(card: Card | None) -> list[dict[str, Any]] | None:
    # to_dict() runs slack_sdk's validators: a malformed block fails here, not at Slack.
    return [_block(p).to_dict() for p in card.parts] if card else None


def view(form: Form) -> dict[str, Any]:
    command = form.command
    if not issubclass(command, Command):
        raise TypeError(f"a form must stand for a Command, not {command.__name__}")
    wire = forms.wire(command)
    parts: list[Block] = [SectionBlock(text=_md(form.intro, _SECTION))] if form.intro else []
    for f in form.fields:
        block_id, action_id = wire.field(f.name)
        initial = f.initial[: f.max_length or _SECTION] if f.initial else None
        parts.append(
            InputBlock(
                block_id=block_id,
                label=f.label,
                element=PlainTextInputElement(
                    action_id=action_id, multiline=f.multiline, max_length=f.max_length, initial_value=initial
                ),
            )
        )
    return View(
        type="modal",
        callback_id=wire.callback_id,
        private_metadata=form.incident,
        title=_cut(form.title, 24),
        submit=form.submit,
        close=form.close,
        blocks=parts,
    ).to_dict()
