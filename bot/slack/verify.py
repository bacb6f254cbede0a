"""The shape of Slack's signature headers, checked before Bolt verifies the signature.

Bolt's request verification (slack_sdk's SignatureVerifier) is the one signature
check: HMAC-SHA256 of ``v0:{timestamp}:{body}`` under the signing secret
(https://api.slack.com/authentication/verifying-requests-from-slack). It calls
``int()`` on the timestamp header, so a timestamp of ``abc`` or ``1.7e9`` raised
there (a 500), ``1_700_000_000`` and Arabic-Indic digits passed ``int()``, and a repeated
header was read as its first value. Here the headers are only parsed: each once,
the timestamp ASCII digits within Slack's five minutes, the signature ``v0=`` and
64 hex digits. A request that passes has headers Bolt's verifier reads without
raising; whether Slack signed it is Bolt's answer.
"""

from __future__ import annotations

import re

from multidict import CIMultiDictProxy

TIMESTAMP = "X-Slack-Request-Timestamp"
SIGNATURE = "X-Slack-Signature"
WINDOW_S = 300  # as Bolt's verifier: a timestamp more than five minutes from now is refused

# Seconds since the epoch, ASCII digits only (str.isdigit would let "١٢" through), and short:
# int() of a 4,000-digit header is slow, and no real timestamp needs more than 11 digits.
_TIMESTAMP = re.compile(r"[0-9]{1,11}")
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")


def _one(headers: CIMultiDictProxy[str], name: str) -> str | None:
    """The header's one value, or None when it is missing or repeated (Slack sends each once)."""
    values = headers.getall(name, [])
    return values[0] if len(values) == 1 else None


def refusal(headers: CIMultiDictProxy[str], now: float) -> str | None:
    """None when the signature headers are well formed and fresh; else why not, as a short log code."""
    timestamp, signature = _one(headers, TIMESTAMP), _one(headers, SIGNATURE)
    if timestamp is None or signature is None:
        return "signature_headers_missing_or_repeated"
    if not _TIMESTAMP.fullmatch(timestamp):
        return "timestamp_not_an_integer"
    if abs(now - int(timestamp)) > WINDOW_S:
        return "timestamp_out_of_window"
    if not _SIGNATURE.fullmatch(signature):
        return "signature_malformed"
    return None
