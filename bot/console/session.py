"""The console's read-eval-print loop: typed lines become signed Slack requests.

A line is finished when its one audit entry exists (every request writes
exactly one) and its reply, if any, has arrived, so a script runs line by
line in order without guessing at sleeps.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.console import audit_view, forms, signed
from bot.console.people import Directory
from bot.console.render import Renderer
from bot.core.services import Services
from fbworld.drills import seconds
from fbworld.fleet import DemoFleet
from fbworld.slack import Event, SlackEmulator

if TYPE_CHECKING:
    from bot.console.drill import DrillSession

HELP = """\
Type what you would type in Slack, plus a few console commands:
  /incident <command> …   run a Firebreak command as the current user in the current channel
                          (mention people as @alice; `/incident help` lists the commands)
  press N                 press button [N] from a message above
  say <text>              post a plain message in the current channel (as Slack would deliver it)
  type <text> / submit    fill the open form (any plain line works too), then send it; `cancel` closes it
  as @alice | user U2     act as someone else
  channel [name|N]        show the channels, or switch to one (declare switches you automatically)
  audit                   print the audit log and check its hash chain
  wait <seconds>          let time pass (a script's way to let a drill's timeline move)
  wait +1m30s | wait end  with a drill: until its clock reaches +1m30s (or every step ran)
  drill | drill end       with a drill: where it is; end it now and print its report
  help                    this text
  quit                    leave (state lives in memory unless REDIS_URL is set)"""

MAX_WAIT_S = 3600.0  # `wait`: an hour at most (a drill at real time is minutes long)
WAIT_S = 30.0  # a line that has not finished by then is reported, not waited on forever
REPLY_GRACE_S = 2.0  # after the audit entry, how long a reply may still be in flight


@dataclass
class Pending:
    actor: str
    replies: list[str] = field(default_factory=list)
    ephemeral: bool = False  # a form's answer comes as an ephemeral message, not a response_url reply
    reply: bool = True  # False: the audit entry alone finishes the line (a flagged `say`)
    created: list[str] = field(default_factory=list)


class Console:
    def __init__(
        self, svc: Services, out: Callable[[str], None], directory: Directory, user: str, fleet: DemoFleet | None = None
    ) -> None:
        self.svc = svc
        self.fleet = fleet  # the demo fleet, when the console brought one
        self.out = out
        self.people = directory
        self.user = directory.resolve(user) or "UYOU"
        self.emulator: SlackEmulator | None = None
        self.sender: signed.Sender | None = None
        self.channel = ""
        self.render = Renderer(directory.name, self._channel_name, directory.learn)
        self.modal: dict[str, Any] | None = None  # the open form, if any
        self.draft = ""
        self.form_errors = False
        self._keys = itertools.count(1)
        self._pending: dict[str, Pending] = {}
        self.app_url = ""  # the app's own HTTP server (the drill posts its alerts there)
        self.drill: DrillSession | None = None  # the game-day drill running, if any

    def attach(self, emulator: SlackEmulator, sender: signed.Sender) -> None:
        self.emulator, self.sender = emulator, sender
        self.channel = emulator.add_channel("general")

    # what the app shows ------------------------------------------------------
    def _channel_name(self, cid: str) -> str:
        ch = self.emulator.state.channels.get(cid) if self.emulator else None
        return ch.name if ch else cid

    def show(self, ev: Event) -> None:
        """Print one thing the app did in the workspace (called by the emulator)."""
        where = f"#{self._channel_name(ev.channel)}" if ev.channel else ""
        if ev.kind == "channel":
            for p in self._pending.values():
                p.created.append(ev.channel or "")
            self.out(f"{where}  (channel created)")
            return
        if ev.kind == "pin":
            self.out(f"{where}  📌 pinned: {self.render.text(ev.text)[:80]}")
            return
        if ev.kind == "view" and ev.view is not None:
            self.modal, self.draft = ev.view, ""
            self._print_block("modal opened: " + ev.text + " ", ev)
            self.out("      (type the text, then `submit`; `cancel` closes the form)")
            return
        if ev.kind == "ephemeral":
            for p in self._pending.values():
                if p.ephemeral and p.actor == ev.user:
                    p.replies.append(ev.text)
        if ev.kind == "reply":
            pending = self._pending.get(ev.user or "")
            if pending is not None:
                pending.replies.append(ev.text)
            who = self.people.name(pending.actor) if pending else "you"
            self._print_block(f"  ↳ only @{who} sees: ", ev)
            return
        head = {
            "post": f"{where}  firebreak:",
            "update": f"{where}  firebreak (edited):",
            "ephemeral": f"{where}  only @{self.people.name(ev.user or '')} sees:",
            "view": "modal opened:",
        }[ev.kind]
        self._print_block(head + " ", ev)

    def _print_block(self, head: str, ev: Event) -> None:
        body = self.render.blocks(ev.blocks, ev.channel, ev.ts) if ev.blocks else []
        if not body:
            body = self.render.text(ev.text).splitlines() or [""]
        self.out(head + body[0])
        for line in body[1:]:
            self.out("      " + line)

    # lines -------------------------------------------------------------------
    @property
    def prompt(self) -> str:
        return f"@{self.people.name(self.user)} #{self._channel_name(self.channel)}> "

    async def line(self, raw: str) -> bool:
        """Run one line; False when it failed (usage error, refusal, unknown)."""
        text = raw.strip()
        if not text or text.startswith("#"):
            return True
        word, _, rest = text.partition(" ")
        word = word.lower()
        if word == "/incident":
            return await self._slash(rest)
        if word.startswith("/"):
            return self._fail("Only /incident is installed here. Try `/incident help`.")
        if word == "press":
            return await self._press(rest.strip())
        if word in ("as", "user"):
            return self._as(rest.strip())
        if word == "channel":
            return self._switch(rest.strip())
        if word == "audit":
            return await self._audit()
        if word == "wait":
            return await self._wait(rest.strip())
        if word == "drill":
            return await self._drill(rest.strip())
        if word in ("say", "type", "submit", "cancel"):
            return await _forms(self, word, rest.strip())
        if word == "help":
            self.out(HELP)
            return True
        if self.modal is not None:
            return forms.type_text(self, text)
        return self._fail(
            f"Unknown console command `{word[:30]}`. Type `help`, `say <text>` for a message, "
            "or start with `/incident`."
        )

    def _fail(self, message: str) -> bool:
        self.out(message)
        return False

    async def _slash(self, rest: str) -> bool:
        assert self.emulator and self.sender
        self.people.learn(rest)
        key = f"k{next(self._keys)}"
        body = signed.command_body(
            self.people.mentions(rest),
            self.user,
            self.people.name(self.user),
            self.channel,
            self._channel_name(self.channel),
            self.emulator.response_url(key),
        )
        return await self.send(body, key=key)

    async def _press(self, arg: str) -> bool:
        assert self.emulator and self.sender
        btn = self.render.buttons.get(int(arg)) if arg.isdigit() else None
        if btn is None and arg.isdigit() and int(arg) in self.render.replaced:
            return self._fail(
                f"Button [{arg}] was replaced when its message was edited: press a number from "
                "the latest version of that message."
            )
        if btn is None:
            return self._fail(f"No button [{arg}]. Buttons are numbered in the messages above: `press 1`.")
        self.out(f"  (pressing [{btn.number}] {btn.label} as @{self.people.name(self.user)})")
        if btn.channel:
            self.emulator.join(btn.channel, self.user)
        key = f"k{next(self._keys)}"
        body = signed.action_body(
            btn.action_id,
            btn.value,
            self.user,
            self.people.name(self.user),
            btn.channel,
            btn.message_ts,
            self.emulator.response_url(key),
        )
        return await self.send(body, key=key)

    async def send(
        self,
        body: bytes,
        content_type: str = "application/x-www-form-urlencoded",
        *,
        key: str | None = None,
        ephemeral: bool = False,
        reply: bool = True,
    ) -> bool:
        """Post a signed request and wait until the app has answered it (its audit entry and reply)."""
        assert self.sender and self.emulator
        if self.channel:  # a person types only in a channel they are in, as Slack has it
            self.emulator.join(self.channel, self.user)
        key = key or f"k{next(self._keys)}"
        start = await self.svc.audit.count()
        pending = self._pending[key] = Pending(self.user, ephemeral=ephemeral, reply=reply)
        self.form_errors = False
        try:
            status, ack = await self.sender.post(body, content_type)
            if status != 200:
                return self._fail(f"The app answered HTTP {status}.")
            errors = _form_errors(ack)
            if errors:
                self.form_errors = True
                return self._fail("  ↳ the form says: " + self.render.text(" ".join(errors)))
            ack_text = _ack_text(ack)
            if ack_text:
                self.out("  ↳ " + self.render.text(ack_text).replace("\n", "\n    "))
            entry = await self._settle(pending, start)
        finally:
            self._pending.pop(key, None)
        if pending.created:
            self.channel = pending.created[-1]
            self.out(f"  (you are now in #{self._channel_name(self.channel)})")
        if entry is None:
            return False if pending.replies else self._fail("  (no answer from the app in time; see the log above)")
        return (
            entry["action"].startswith(("command.", "button."))
            and entry["action"] not in ("command.invalid", "button.invalid")
            and entry.get("detail", {}).get("result") == "ok"
        )

    async def _settle(self, pending: Pending, start: int) -> dict[str, Any] | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_S
        entry: dict[str, Any] | None = None
        done_at: float | None = None
        while loop.time() < deadline:
            if entry is None:
                entry = await self._entry_by(pending.actor, start)
                if entry is not None:
                    if entry["action"] == "command.invalid" or pending.replies or not pending.reply:
                        return entry
                    done_at = loop.time() + REPLY_GRACE_S
                elif pending.replies:
                    # A reply with no audit entry: a button nobody handles. Give the audit a moment.
                    done_at = done_at or loop.time() + 0.5
                    if loop.time() > done_at:
                        return None
            elif pending.replies or (done_at is not None and loop.time() > done_at):
                return entry
            await asyncio.sleep(0.02)
        return entry

    async def _entry_by(self, actor: str, start: int) -> dict[str, Any] | None:
        for e in await self.svc.audit.since(start):
            if e.get("actor") == actor and str(e.get("action", "")).startswith(("command.", "button.")):
                return e
        return None

    def _as(self, who: str) -> bool:
        uid = self.people.resolve(who) if who else None
        if uid is None:
            return self._fail("Usage: `as @alice` or `user U2`.")
        self.user = uid
        self.out(f"  (you are now @{self.people.name(uid)}, {uid})")
        return True

    def _switch(self, arg: str) -> bool:
        assert self.emulator
        chans = list(self.emulator.state.channels.values())
        if not arg:
            for i, ch in enumerate(chans, 1):
                mark = "*" if ch.id == self.channel else " "
                self.out(f" {mark}{i}. #{ch.name} ({ch.id})")
            return True
        hit = (
            chans[int(arg) - 1]
            if arg.isdigit() and 0 < int(arg) <= len(chans)
            else self.emulator.state.find_by_name(arg)
        )
        if hit is None:
            return self._fail(f"No channel `{arg[:40]}`. Type `channel` to list them.")
        self.channel = hit.id
        self.out(f"  (you are now in #{hit.name})")
        return True

    async def _audit(self) -> bool:
        return await audit_view.show(self.svc, self.out, self.people)

    async def _wait(self, arg: str) -> bool:
        usage = "Usage: `wait <seconds>`, or with a drill `wait +1m30s` (its clock) or `wait end`."
        if arg.startswith("+") or arg == "end":
            if self.drill is None:
                return self._fail("No drill is running: `wait +…` and `wait end` follow a drill's clock.")
            try:
                offset = None if arg == "end" else seconds(arg[1:])
            except ValueError:
                return self._fail(usage)
            stopped = await self.drill.wait_until(offset)
            return True if stopped is None else self._fail(stopped)
        try:
            secs = float(arg)
        except ValueError:
            return self._fail(usage)
        if not 0 <= secs <= MAX_WAIT_S:
            return self._fail(f"`wait` takes 0 to {MAX_WAIT_S:g} seconds.")
        await asyncio.sleep(secs)
        return True

    async def _drill(self, arg: str) -> bool:
        if self.drill is None:
            return self._fail("No drill is running. Start one with `firebreak console --drill NAME`.")
        if arg == "end":
            await self.drill.end("ended by `drill end`")
            return True
        if arg:
            return self._fail("Usage: `drill` (where it is) or `drill end`.")
        self.drill.status()
        return True


async def _forms(console: Console, word: str, rest: str) -> bool:
    if word == "say":
        return await forms.say(console, rest)
    if word == "type":
        return forms.type_text(console, rest)
    return await forms.submit(console) if word == "submit" else forms.cancel(console)


def _form_errors(raw: str) -> list[str]:
    try:
        body = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        return []
    errors = body.get("errors") if isinstance(body, dict) and body.get("response_action") == "errors" else None
    return [str(v) for v in errors.values()] if isinstance(errors, dict) else []


def _ack_text(raw: str) -> str:
    if not raw.strip():
        return ""
    try:
        body = json.loads(raw)
    except json.JSONDecodeError:
        return raw.strip()
    return str(body.get("text", "")) if isinstance(body, dict) else ""
