"""The emulated Slack signs its requests to the app with slack_sdk, and the app's check accepts them."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from slack_sdk.signature import SignatureVerifier

from fbworld.slack import sign, signature, slash_command_body

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


def test_headers_are_the_ones_slack_sdk_verifies():
    body = slash_command_body("status")
    headers = sign(body, SECRET)
    verifier = SignatureVerifier(SECRET)
    assert verifier.is_valid_request(body, headers)
    assert not SignatureVerifier("another-secret").is_valid_request(body, headers)
    assert not verifier.is_valid_request(body + b"&x=1", headers)


@pytest.mark.parametrize("body", [b"", b"text=caf%C3%A9", 'payload={"t": "é"}'.encode(), b"\x00\x7f"])
def test_the_raw_byte_path_agrees_with_slack_sdk_on_every_body_both_can_sign(body):
    ts = "1700000000"
    by_sdk = SignatureVerifier(SECRET).generate_signature(timestamp=ts, body=body)
    raw = "v0=" + hmac.new(SECRET.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
    assert signature(body, SECRET, ts) == by_sdk == raw


def test_a_body_that_is_not_utf8_is_still_signed_over_its_bytes():
    ts, body = "1700000000", b"\xff\xfe"
    expected = "v0=" + hmac.new(SECRET.encode(), b"v0:1700000000:\xff\xfe", hashlib.sha256).hexdigest()
    assert signature(body, SECRET, ts) == expected
    with pytest.raises(UnicodeDecodeError):  # why the emulator cannot leave this one to slack_sdk
        SignatureVerifier(SECRET).generate_signature(timestamp=ts, body=body)
