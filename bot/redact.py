"""Finding and scrubbing secrets: one linear-time engine for everything Firebreak checks.

Every secret check runs here: a person's command text (refused, bot/core/grammar.py and the
Command base in bot/core/request.py), pasted channel messages (flagged, bot/comms/watch.py),
Alertmanager's labels and annotations (redacted, bot/signals/jobs.py), the audit log's entries
and the logs (scrubbed, bot/audit/chain.py, bot/logs.py).

The patterns run on RE2 (``google-re2``), which never backtracks: a search is linear in the text
whatever the pattern, so no message, however crafted, stalls the event loop. (Python's ``re``
took 2.9 s on 40 KB of ``a-a-a-…`` against the "password in a URL" pattern; bench/scan_bench.py.)
A policy pattern RE2 cannot run (a backreference, a lookaround) is refused when the policy loads.

``find`` scans at most MAX_SCAN characters in one search: longer text is scanned in windows of
MAX_SCAN that overlap by OVERLAP, so one call's work (and RE2's DFA memory) stays bounded and a
secret shorter than OVERLAP is never split between two windows. ``scrub_text`` redacts the whole
text (RE2 is linear, and a log line must not keep a secret past some cut).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import re2

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

# One search covers at most this many characters (40 KB, Slack's longest message).
MAX_SCAN = 40_000
# Windows of a longer text overlap by this much: every secret the patterns describe is far shorter.
OVERLAP = 4_096

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused policy pattern is reported by the loader, not on stderr


def compile_pattern(pattern: str) -> Any:
    """``pattern`` compiled for RE2, or ValueError saying why RE2 cannot run it."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        why = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(
            f"pattern {pattern!r} cannot run on RE2, the linear-time engine ({why}); "
            "backreferences and lookarounds are not supported: rewrite it without them"
        ) from None


_COMPILED: list[tuple[str, Any]] = [(kind, compile_pattern(p)) for kind, p in BUILTIN_PATTERNS]
_PATTERNS: set[str] = set(p for _, p in BUILTIN_PATTERNS)


def _alternation(patterns: Iterable[str]) -> Any | None:
    """Every pattern as one RE2 alternation, or None if RE2 cannot run them together (two policy
    patterns naming the same group): one search instead of one per pattern says that a text is
    clean, which almost every text is (a command's text is scanned on the ack path). Each
    pattern keeps its own inline flags: RE2 scopes ``(?i)`` to the group it is in."""
    try:
        return re2.compile("|".join(f"(?:{p})" for p in patterns), _OPTIONS)
    except re2.error:
        return None  # then every pattern is searched alone, as the kinds are


_ANY: list[Any | None] = [_alternation(p for _, p in BUILTIN_PATTERNS)]


def _clean(text: str) -> bool:
    """True if no pattern matches anywhere in ``text`` (False: search each to name the kinds)."""
    rx = _ANY[0]
    return rx is not None and rx.search(text) is None


def add_patterns(pairs: Iterable[tuple[str, str]]) -> None:
    """Policy's extra secret patterns (comms.yaml), added once at start.

    Patterns only ever add checks and redaction, so sharing them process-wide is safe.
    """
    added = False
    for kind, pattern in pairs:
        if pattern not in _PATTERNS:
            _COMPILED.append((kind, compile_pattern(pattern)))
            _PATTERNS.add(pattern)
            added = True
    if added:
        _ANY[0] = _alternation(rx.pattern for _, rx in _COMPILED)


def _windows(text: str) -> Iterable[str]:
    if len(text) <= MAX_SCAN:
        yield text
        return
    step = MAX_SCAN - OVERLAP
    for start in range(0, len(text) - OVERLAP, step):
        yield text[start : start + MAX_SCAN]


def find(text: str, extra: Iterable[tuple[str, str]] = ()) -> list[str]:
    """The kinds of secret in ``text`` (each once, in pattern order): the built-in patterns, the
    ones added at start, and ``extra`` (kind, pattern) pairs. Never the match itself."""
    if not text:
        return []
    add_patterns(extra)
    found: dict[str, None] = {}
    for window in _windows(text):
        if _clean(window):
            continue
        for kind, rx in _COMPILED:
            if kind not in found and rx.search(window):
                found[kind] = None
    order = [kind for kind, _ in _COMPILED]
    return sorted(found, key=order.index)


def kinds_text(kinds: list[str]) -> str:
    """ "a Slack token", "a JWT and an AWS access key": the kinds as a phrase."""
    return kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " and " + kinds[-1]


def scrub_text(text: str) -> str:
    if _clean(text):
        return text
    for kind, rx in _COMPILED:
        if rx.search(text):
            label = f"[redacted {kind}]"
            text = rx.sub(lambda _m, label=label: label, text)  # a function: a kind is never a template
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
