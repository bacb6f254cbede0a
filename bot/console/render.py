"""Slack messages as terminal text: mrkdwn mentions resolved, blocks flattened, buttons numbered."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.chat import unescape

_USER = re.compile(r"<@([A-Z0-9_]+)(?:\|[^>]*)?>")
_CHAN = re.compile(r"<#([A-Z0-9_]+)(?:\|[^>]*)?>")
_EMOJI = {
    ":red_circle:": "🔴",
    ":large_orange_circle:": "🟠",
    ":large_yellow_circle:": "🟡",
    ":white_circle:": "⚪",
    ":large_green_circle:": "🟢",
    ":rotating_light:": "🚨",
    ":mega:": "📣",
    ":handshake:": "🤝",
    ":busts_in_silhouette:": "👥",
    ":white_check_mark:": "✅",
    ":warning:": "⚠️",
    ":lock:": "🔒",
}


@dataclass(frozen=True)
class Button:
    number: int
    action_id: str
    value: str
    label: str
    channel: str | None
    message_ts: str | None


class Renderer:
    def __init__(
        self,
        user_name: Callable[[str], str],
        channel_name: Callable[[str], str],
        learn: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.user_name = user_name
        self.channel_name = channel_name
        self.learn = learn
        self.buttons: dict[int, Button] = {}
        # Numbers are never reused: an edited message gets new ones and its old ones stop working.
        self._numbers = itertools.count(1)
        self._of_message: dict[tuple[str | None, str | None], list[int]] = {}
        self.replaced: set[int] = set()

    def text(self, s: str) -> str:
        self.learn(s)
        s = _USER.sub(lambda m: "@" + self.user_name(m.group(1)), s)
        s = _CHAN.sub(lambda m: "#" + self.channel_name(m.group(1)), s)
        for code, glyph in _EMOJI.items():
            s = s.replace(code, glyph)
        # Last, as a Slack client does: Firebreak escapes quoted text (bot.chat.quote), shown as typed.
        return unescape(s)

    def blocks(self, blocks: list[dict[str, Any]], channel: str | None, ts: str | None) -> list[str]:
        out: list[str] = []
        if ts is not None:
            for n in self._of_message.pop((channel, ts), []):
                self.buttons.pop(n, None)
                self.replaced.add(n)
        for b in blocks:
            kind = b.get("type")
            if kind == "header":
                out.append(f"━━ {self.text(_plain(b.get('text')))} ━━")
            elif kind == "section":
                if b.get("text"):
                    out.extend(self.text(_plain(b["text"])).splitlines())
                fields = [self.text(_plain(f)).replace("\n", ": ", 1) for f in b.get("fields") or []]
                if fields:
                    out.append(" | ".join(fields))
            elif kind == "context":
                out.append("· " + " ".join(self.text(_plain(e)) for e in b.get("elements") or [] if "text" in e))
            elif kind == "divider":
                out.append("─" * 40)
            elif kind == "actions":
                out.append("  ".join(self._button(e, channel, ts) for e in b.get("elements") or []))
            elif kind in ("input", "rich_text", "image"):
                out.append(f"[{kind}: {self.text(_plain(b.get('label') or b.get('alt_text') or ''))}]")
        return out

    def _button(self, el: dict[str, Any], channel: str | None, ts: str | None) -> str:
        if el.get("type") != "button":
            return f"[{el.get('type')}]"
        n = next(self._numbers)
        if ts is not None:
            self._of_message.setdefault((channel, ts), []).append(n)
        label = _plain(el.get("text"))
        self.buttons[n] = Button(n, str(el.get("action_id", "")), str(el.get("value", "")), label, channel, ts)
        return f"[{n}] {label}"


def _plain(obj: Any) -> str:
    if isinstance(obj, dict):
        return str(obj.get("text", ""))
    return "" if obj is None else str(obj)
