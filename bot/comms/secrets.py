"""Pasted-secret detection for incident channels. Pure: returns kinds, never the match."""

from __future__ import annotations

import re
from functools import lru_cache

from bot.policy.comms import SecretPattern
from bot.redact import BUILTIN_PATTERNS


@lru_cache(maxsize=8)
def _compiled(extra: tuple[SecretPattern, ...]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    pairs = [*BUILTIN_PATTERNS, *((p.kind, p.pattern) for p in extra)]
    return tuple((kind, re.compile(p)) for kind, p in pairs)


def scan(text: str, extra: list[SecretPattern] | tuple[SecretPattern, ...] = ()) -> list[str]:
    """The kinds of secret found in ``text`` (each once, in pattern order)."""
    if not text:
        return []
    return list(dict.fromkeys(kind for kind, rx in _compiled(tuple(extra)) if rx.search(text)))


def kinds_text(kinds: list[str]) -> str:
    return kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " and " + kinds[-1]
