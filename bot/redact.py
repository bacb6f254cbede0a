"""Scrubbing of secrets from anything we store or log.

The comms side (secret flagging in incident channels) reuses these patterns
and adds the ones from policy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# (kind, pattern). Kinds are what a warning names; the match itself never leaves here.
BUILTIN_PATTERNS: tuple[tuple[str, str], ...] = (
    ("Slack token", r"\bxox[abposr]-[0-9A-Za-z-]{10,}"),
    ("Slack app token", r"\bxapp-\d-[0-9A-Za-z-]{10,}"),
    ("bearer token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{16,}=*"),
    ("private key", r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----"),
    ("AWS access key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("GCP service-account key", r"\"private_key_id\"\s*:\s*\"[0-9a-f]{40}\""),
    ("GitHub token", r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),
    ("JWT", r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
)

_COMPILED = [(kind, re.compile(p)) for kind, p in BUILTIN_PATTERNS]


def add_patterns(pairs: Iterable[tuple[str, str]]) -> None:
    """Policy's extra secret patterns (comms.yaml), added once at start.

    Patterns only ever add redaction, so sharing them process-wide is safe.
    """
    known = {rx.pattern for _, rx in _COMPILED}
    for kind, pattern in pairs:
        if pattern not in known:
            _COMPILED.append((kind, re.compile(pattern)))
            known.add(pattern)


def scrub_text(text: str) -> str:
    for kind, rx in _COMPILED:
        text = rx.sub(f"[redacted {kind}]", text)
    return text


def scrub(value: Any) -> Any:
    """Deep-scrub strings inside JSON-like data."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    return value
