"""Pasted-secret detection for incident channels. Pure: returns kinds, never the match.

The engine (RE2, linear time, windowed past MAX_SCAN) is bot/redact.py's; this names it for the
comms side, which also passes the policy's patterns.
"""

from __future__ import annotations

from bot.policy.comms import SecretPattern
from bot.redact import find, kinds_text

__all__ = ["kinds_text", "scan"]


def scan(text: str, extra: list[SecretPattern] | tuple[SecretPattern, ...] = ()) -> list[str]:
    """The kinds of secret found in ``text`` (each once, in pattern order)."""
    return find(text, ((p.kind, p.pattern) for p in extra))
