"""Slack's request signature, checked on the raw bytes before anything reads the body.

Slack signs ``v0:{timestamp}:{body}`` with HMAC-SHA256 under the app's signing
secret (https://api.slack.com/authentication/verifying-requests-from-slack).
slack_sdk's SignatureVerifier calls ``int()`` on the timestamp header and
decodes the body as UTF-8, so a timestamp of ``abc`` or ``1.7e9`` or a body
that is not UTF-8 raised instead of being refused. Here every header is
checked for its shape first and the signature is computed over the bytes as
received, so any request either passes or gets a reason, never an exception.
"""

from __future__ import annotations

import hashlib
import hmac
import re

from multidict import CIMultiDictProxy

TIMESTAMP = "X-Slack-Request-Timestamp"
SIGNATURE = "X-Slack-Signature"
WINDOW_S = 300  # Slack's own advice: refuse a timestamp more than five minutes from now

# Seconds since the epoch, ASCII digits only (str.isdigit would let "١٢" through), and short:
# int() of a 4,000-digit header is slow, and no real timestamp needs more than 11 digits.
_TIMESTAMP = re.compile(r"[0-9]{1,11}")
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")


def _one(headers: CIMultiDictProxy[str], name: str) -> str | None:
    """The header's one value, or None when it is missing or repeated (Slack sends each once)."""
    values = headers.getall(name, [])
    return values[0] if len(values) == 1 else None


def refusal(secret: str, body: bytes, headers: CIMultiDictProxy[str], now: float) -> str | None:
    """None when Slack signed ``body`` within the window; else why not, as a short log code."""
    timestamp, signature = _one(headers, TIMESTAMP), _one(headers, SIGNATURE)
    if timestamp is None or signature is None:
        return "signature_headers_missing_or_repeated"
    if not _TIMESTAMP.fullmatch(timestamp):
        return "timestamp_not_an_integer"
    if abs(now - int(timestamp)) > WINDOW_S:
        return "timestamp_out_of_window"
    if not _SIGNATURE.fullmatch(signature):
        return "signature_malformed"
    base = b"v0:" + timestamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), signature.encode()):
        return "signature_mismatch"
    return None
