"""Tokenising and parsing `/incident` text into typed commands.

Phones send smart quotes and apostrophes; only double quotes group words, so
"Chat's latency" stays one word and an unbalanced quote is just a character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bot.chat.text import quote
from bot.redact import kinds_text

_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‟": '"', "＂": '"', "—": "--", "–": "--"})
_TOKEN = re.compile(r'"([^"]*)"|(\S+)')
_PLACEHOLDER = re.compile(r"<[^<>]+>")
_OPTIONAL = re.compile(r"\[[^\]]*\]")


class UsageError(Exception):
    """Bad input: the message says what was wrong and what to type instead."""

    def __init__(self, message: str, usage: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage

    def render(self) -> str:
        return f"{self.message}\nUsage: `{self.usage}`" if self.usage else self.message


class SecretText(UsageError):
    """The text holds a secret: refused in one line (no usage: nothing to retype but the link)."""

    def __init__(self, message: str, kinds: list[str]) -> None:
        super().__init__(message)
        self.kinds = kinds


def _a(phrase: str) -> str:
    return f"an {phrase}" if phrase[:1] in "AEIOUaeiou" else f"a {phrase}"


def secret_refusal(label: str, kinds: list[str]) -> str:
    """The one line a secret gets: what was found (the kind, never the text) and what to paste instead."""
    return (
        f"That {label} contains {_a(kinds_text(kinds))}; nothing was stored. Paste a link to the secret "
        "manager entry instead, and rotate that credential now."
    )


# Control characters (C0, DEL, C1) and Unicode's line and paragraph separators: in a name or a target
# they make what the checks read differ from what an API or a terminal does with it.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_NAMES = {"\n": "newline", "\r": "carriage return", "\t": "tab", "\x00": "NUL", "\x1b": "escape"}
# Prose (a reason, a cause, an update) may span lines; nothing else may.
_PROSE_OK = frozenset("\n\r\t")


def control_problem(label: str, value: str, prose: bool = False) -> str | None:
    """Why ``value`` cannot be taken because of a control character, naming it and its position
    (counting from 1), or None."""
    for m in _CONTROL.finditer(value):
        ch = m.group(0)
        if prose and ch in _PROSE_OK:
            continue
        name = _CONTROL_NAMES.get(ch, f"U+{ord(ch):04X}")
        return f"The {label} has a control character ({name}) at position {m.start() + 1}; type it on one line."
    return None


def normalise(text: str) -> str:
    return text.translate(_QUOTES).replace("\u00a0", " ").strip()


def tokens(text: str) -> list[str]:
    return [m.group(1) if m.group(1) is not None else m.group(2) for m in _TOKEN.finditer(text)]


@dataclass
class Spec:
    """The shape of one subcommand's arguments.

    positional: names of leading single-word arguments.
    rest: name of the field that takes the remaining words (free text).
    flags: flag name -> "one" | "many" | "bool".
    pairs: accept key=value words (collected into ``params``).
    """

    usage: str
    positional: tuple[str, ...] = ()
    rest: str | None = None
    rest_raw: bool = False
    flags: dict[str, str] = field(default_factory=dict)
    pairs: bool = False

    def label(self, field_name: str) -> str:
        """How the person types ``field_name``: `--users-burn`, or the usage's own `<REQ-n>`."""
        flag = field_name.replace("_", "-")
        if flag in self.flags:
            return f"--{flag}"
        # The usage's placeholders, in order, name the positionals and then the free text.
        holders = _PLACEHOLDER.findall(_OPTIONAL.sub("", self.usage))
        names = [*self.positional, *([self.rest] if self.rest else [])]
        if field_name in names and names.index(field_name) < len(holders):
            return str(holders[names.index(field_name)])
        return f"<{field_name}>"

    def parse(self, text: str) -> dict[str, Any]:
        if self.rest_raw and not self.flags and not self.positional:
            # Free text kept byte for byte (status updates, reasons).
            return {self.rest: text.strip()} if self.rest else {}
        words = tokens(text)
        out: dict[str, Any] = {}
        free: list[str] = []
        params: dict[str, str] = {}
        pos = list(self.positional)
        i = 0
        while i < len(words):
            w = words[i]
            if w.startswith("--") and len(w) > 2:
                name, _, inline = w[2:].partition("=")
                kind = self.flags.get(name)
                if kind is None:
                    known = ", ".join(f"--{f}" for f in self.flags) or "none"
                    raise UsageError(f"Unknown option `--{quote(name[:40])}` (options: {known}).", self.usage)
                if kind == "bool":
                    out[name.replace("-", "_")] = True
                else:
                    if inline:
                        val = inline
                    else:
                        i += 1
                        if i >= len(words):
                            raise UsageError(f"`--{name}` needs a value.", self.usage)
                        val = words[i]
                    key = name.replace("-", "_")
                    if kind == "many":
                        out.setdefault(key, []).append(val)
                    elif key in out:
                        raise UsageError(f"`--{name}` given twice.", self.usage)
                    else:
                        out[key] = val
            elif pos:
                out[pos.pop(0)] = w
            elif self.pairs and "=" in w and not w.startswith("="):
                k, _, v = w.partition("=")
                params[k] = v
            elif self.rest:
                free.append(w)
            else:
                raise UsageError(f"Unexpected `{quote(w[:40])}`.", self.usage)
            i += 1
        if pos:
            raise UsageError(f"Missing {self.label(pos[0])}.", self.usage)
        if self.rest and free:
            out[self.rest] = " ".join(free)
        if self.pairs:
            out["params"] = params
        return out
