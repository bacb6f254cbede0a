"""The console's ways to do what a person does in Slack beyond commands and buttons:
fill and submit an open modal, and post a plain message in a channel (`say`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.comms.secrets import scan
from bot.console import signed

if TYPE_CHECKING:
    from bot.console.session import Console


def type_text(c: Console, text: str) -> bool:
    if c.modal is None:
        return c._fail("No form is open. Forms open from buttons, e.g. `press N` on Post update.")
    c.draft = text
    c.out(f"  (form text set, {len(text)} characters; `submit` to send it, `cancel` to close the form)")
    return True


async def submit(c: Console) -> bool:
    if c.modal is None:
        return c._fail("No form is open to submit.")
    modal, c.modal = c.modal, None
    ok = await c.send(signed.submission_body(modal, c.draft, c.user, c.people.name(c.user)), ephemeral=True)
    if c.form_errors:
        c.modal = modal  # Slack keeps the form open with the error under the field; so does the console
        c.out("  (edit with `type <text>`, then `submit`; or `cancel`)")
    else:
        c.draft = ""
    return ok


def cancel(c: Console) -> bool:
    if c.modal is None:
        return c._fail("No form is open.")
    c.modal, c.draft = None, ""
    c.out("  (form closed; nothing was sent)")
    return True


async def say(c: Console, text: str) -> bool:
    assert c.emulator and c.sender
    if not text:
        return c._fail("Usage: `say <message>` posts a plain message in the current channel.")
    ts = c.emulator.user_message(c.channel, c.user, c.people.mentions(text))
    c.out(f"#{c._channel_name(c.channel)}  @{c.people.name(c.user)}: {text}")
    body = signed.message_body(c.channel, c.user, c.people.mentions(text), ts)
    if not (scan(text, c.svc.policy.comms.secret_patterns) and await c.svc.incidents.by_channel(c.channel)):
        # Only a flagged message in an incident channel makes Firebreak act: nothing to wait for.
        status, _ = await c.sender.post(body, "application/json")
        return status == 200 or c._fail(f"The app answered HTTP {status}.")
    return await c.send(body, "application/json", reply=False)
