"""Malformed input at every endpoint the app serves: a 4xx with one log line, never a 5xx or a
traceback, and nothing changed (no Redis key, no Slack call, no audit entry).

/slack/events answers 401 for anything Slack did not sign within five minutes (missing,
repeated or garbled headers included), 400 for a signed body that is not a shape Firebreak
handles, 415 for a content type Slack does not send and 413 past 1 MiB; aiohttp's router
answers 404 and 405 for the rest. Slack retries event deliveries that get anything but a 2xx,
so a well-formed event Firebreak does not listen to gets a 200 and is dropped.
"""

from __future__ import annotations

import asyncio
import collections
import io
import json
import logging
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlencode

import aiohttp
import pytest
import structlog
from yarl import URL

from bot.store import Keys
from fbworld.slack import block_actions_body, event_body, signature, slash_command_body, view_submission_body
from tests.support.harness import SECRET, audit_entries

FORM, JSON = "application/x-www-form-urlencoded", "application/json"


def _sig(body: bytes, ts: str, secret: str = SECRET) -> str:
    """Slack's v0 signature over whatever timestamp text is sent (even one that is not a number)."""
    return signature(body, secret, ts)


def _now() -> str:
    return str(int(time.time()))


@dataclass
class Case:
    id: str
    body: bytes
    status: int
    reason: str | None  # the log line's reason (None: aiohttp's own answer, or a 200)
    content_type: str | None = FORM
    # None: signed now with the app's secret; else makes the exact headers to send (may repeat a
    # name) when the request is sent, so a timestamp in them is as fresh as the test.
    headers: Callable[[], list[tuple[str, str]]] | None = None
    method: str = "POST"
    path: str = "/slack/events"
    extra: list[tuple[str, str]] = field(default_factory=list)


def _signed_with(body: bytes, ts: str, sig: str | None = None) -> list[tuple[str, str]]:
    return [("X-Slack-Request-Timestamp", ts), ("X-Slack-Signature", sig or _sig(body, ts))]


def _none() -> list[tuple[str, str]]:
    return []


def _payload(obj: object) -> bytes:
    return urlencode({"payload": json.dumps(obj)}).encode()


def _decode_payload(body: bytes) -> str:
    return parse_qs(body.decode())["payload"][0]


def _action(**over: object) -> dict:
    base = json.loads(_decode_payload(block_actions_body("cadence.snooze", "INC-1", "UIC", "C1")))
    base.update(over)
    return base


def _view(**over: object) -> dict:
    base = json.loads(_decode_payload(view_submission_body("cadence.update", "UIC", {}, private_metadata="INC-1")))
    base.update(over)
    return base


def _view_with(**view_over: object) -> dict:
    v = _view()
    v["view"] = {**v["view"], **view_over}
    return v


def _event(event: object, **over: object) -> bytes:
    body = json.loads(event_body({"type": "message", "text": "hi", "user": "U1", "channel": "C1"}, "Ev1"))
    body["event"] = event
    body.update(over)
    return json.dumps(body).encode()


_COMMAND = slash_command_body("status", user_id="UIC")
_DEEP = b"[" * 100_000 + b"]" * 100_000

UNSIGNED = [
    Case("no-signature-headers", _COMMAND, 401, "signature_headers_missing_or_repeated", headers=_none),
    Case(
        "wrong-secret",
        _COMMAND,
        401,
        "signature_mismatch",
        headers=lambda: _signed_with(_COMMAND, _now(), _sig(_COMMAND, _now(), "not-the-secret")),
    ),
    *[
        Case(f"unsigned-{name}", body, 401, "signature_headers_missing_or_repeated", content_type=ctype, headers=_none)
        for name, body, ctype in [
            ("json-list", b"[]", JSON),
            ("json-number", b"1", JSON),
            ("json-string", b'"s"', JSON),
            ("payload-list", b"payload=[]", FORM),
            ("payload-null", b"payload=null", FORM),
            ("payload-number", b"payload=123", FORM),
            ("empty", b"", FORM),
        ]
    ],
    *[
        Case(
            f"timestamp-{name}",
            _COMMAND,
            401,
            "timestamp_not_an_integer",
            headers=lambda ts=ts: _signed_with(_COMMAND, ts()),
        )
        for name, ts in [
            ("letters", lambda: "abc"),
            ("empty", lambda: ""),
            ("float", lambda: "1.7e9"),
            ("4000-digits", lambda: "9" * 4000),
            ("negative", lambda: "-1"),
            ("plus", lambda: "+" + _now()),
            ("underscores", lambda: _now()[:4] + "_" + _now()[4:]),  # int() takes these
            ("inner-space", lambda: _now()[:5] + " " + _now()[5:]),
            ("hex", lambda: hex(int(_now()))),
            ("arabic-digits", lambda: "\u0661\u0667" + "\u0660" * 8),
        ]
    ],
    Case(
        "timestamp-stale",
        _COMMAND,
        401,
        "timestamp_out_of_window",
        headers=lambda: _signed_with(_COMMAND, str(int(time.time()) - 310)),
    ),
    Case(
        "timestamp-future",
        _COMMAND,
        401,
        "timestamp_out_of_window",
        headers=lambda: _signed_with(_COMMAND, str(int(time.time()) + 310)),
    ),
    Case(
        "timestamp-repeated",
        _COMMAND,
        401,
        "signature_headers_missing_or_repeated",
        headers=lambda: [("X-Slack-Request-Timestamp", "1"), *_signed_with(_COMMAND, _now())],
    ),
    Case(
        "signature-repeated",
        _COMMAND,
        401,
        "signature_headers_missing_or_repeated",
        headers=lambda: [*_signed_with(_COMMAND, _now()), ("X-Slack-Signature", "v0=" + "0" * 64)],
    ),
    *[
        Case(
            f"signature-{name}",
            _COMMAND,
            401,
            "signature_malformed",
            headers=lambda sig=sig: _signed_with(_COMMAND, _now(), sig(_now())),
        )
        for name, sig in [
            ("empty", lambda ts: " "),
            ("v1", lambda ts: "v1=" + _sig(_COMMAND, ts)[3:]),
            ("short", lambda ts: _sig(_COMMAND, ts)[:-1]),
            ("uppercase", lambda ts: _sig(_COMMAND, ts).upper()),
            ("not-ascii", lambda ts: "v0=" + "é" * 64),
        ]
    ],
    Case(
        "signed-for-another-body",
        _COMMAND,
        401,
        "signature_mismatch",
        headers=lambda: _signed_with(b"text=help", _now()),
    ),
]

BAD_SHAPE = [
    *[
        Case(f"signed-{name}", body, 400, reason, content_type=ctype)
        for name, body, ctype, reason in [
            ("json-list", b"[]", JSON, "body_not_an_object"),
            ("json-number", b"1", JSON, "body_not_an_object"),
            ("json-string", b'"s"', JSON, "body_not_an_object"),
            ("json-null", b"null", JSON, "body_not_an_object"),
            ("json-empty-object", b"{}", JSON, "event_type_not_handled"),
            ("json-broken", b'{"type": "event_callback"', JSON, "not_json"),
            ("json-deeply-nested", _DEEP, JSON, "not_json"),
            ("json-huge-integer", b'{"type": ' + b"1" * 5000 + b"}", JSON, "not_json"),
            ("json-not-utf8", b'{"type": "\xff"}', JSON, "not_utf8"),
            ("form-not-utf8", b"\xff\xfe", FORM, "not_utf8"),
            ("empty-form", b"", FORM, "empty_body"),
            ("empty-json", b"", JSON, "empty_body"),
            ("form-list", b"[]", FORM, "form_malformed"),
            ("form-number", b"1", FORM, "form_malformed"),
            ("form-string", b'"s"', FORM, "form_malformed"),
            ("form-repeated-field", b"command=%2Fincident&user_id=U1&user_id=U2", FORM, "form_field_repeated"),
            ("form-too-many-fields", b"&".join(b"f%d=1" % i for i in range(200)), FORM, "form_malformed"),
            ("payload-list", b"payload=[]", FORM, "payload_not_an_object"),
            ("payload-null", b"payload=null", FORM, "payload_not_an_object"),
            ("payload-number", b"payload=123", FORM, "payload_not_an_object"),
            ("payload-not-json", b"payload=not-json", FORM, "not_json"),
            ("payload-truncated", b"payload=%7B%22type%22", FORM, "not_json"),
            ("payload-deeply-nested", b"payload=" + b"%5B" * 50_000, FORM, "not_json"),
            ("json-event-as-form", event_body({"type": "message"}, "Ev1"), FORM, "form_malformed"),
            ("command-as-json", _COMMAND, JSON, "not_json"),
            ("command-without-user", b"command=%2Fincident&text=status", FORM, "user_missing"),
            ("command-someone-elses", slash_command_body("x", command="/deploy"), FORM, "not_a_firebreak_command"),
            ("command-with-event-field", _COMMAND + b"&event=x", FORM, "event_wrong_type"),
            ("command-with-actions-field", _COMMAND + b"&type=block_actions&actions=x", FORM, "actions_wrong_type"),
        ]
    ],
    *[
        Case(f"payload-{name}", _payload(obj), 400, reason)
        for name, obj, reason in [
            ("no-type", {"user": {"id": "U1"}}, "payload_type_not_handled"),
            ("type-is-a-list", {"type": ["block_actions"]}, "payload_type_not_handled"),
            ("shortcut", {"type": "shortcut", "callback_id": "x"}, "payload_type_not_handled"),
            ("message-action", {"type": "message_action", "callback_id": "x"}, "payload_type_not_handled"),
            ("view-closed", _view(type="view_closed"), "payload_type_not_handled"),
            ("block-suggestion", {"type": "block_suggestion", "action_id": "x"}, "payload_type_not_handled"),
            ("dialog", {"type": "dialog_submission", "callback_id": "x"}, "payload_type_not_handled"),
            ("actions-empty", _action(actions=[]), "actions_missing"),
            ("actions-null-item", _action(actions=[None]), "action_malformed"),
            ("actions-string-item", _action(actions=["x"]), "action_malformed"),
            ("actions-null", _action(actions=None), "actions_wrong_type"),
            ("actions-absent", {k: v for k, v in _action().items() if k != "actions"}, "actions_missing"),
            ("actions-not-a-list", _action(actions={"action_id": "x"}), "actions_wrong_type"),
            ("action-id-number", _action(actions=[{"action_id": 5, "value": "x"}]), "action_malformed"),
            ("action-id-empty", _action(actions=[{"action_id": "", "value": "x"}]), "action_malformed"),
            (
                "action-value-object",
                _action(actions=[{"action_id": "a", "value": {}}]),
                "action.value_missing_or_not_text",
            ),
            ("action-user-missing", _action(user=None), "user_missing"),
            ("action-user-string", _action(user="U1"), "user_missing"),
            ("action-user-id-number", _action(user={"id": 5}), "user_missing"),
            ("action-user-number", _action(user=5), "user_wrong_type"),
            ("action-channel-string", _action(channel="C1"), "channel_wrong_type"),
            ("action-container-string", _action(container="x"), "container_wrong_type"),
            (
                "action-message-ts-number",
                _action(container={"message_ts": 1}),
                "container.message_ts_missing_or_not_text",
            ),
            ("action-with-command", _action(command="/incident"), "command_field_outside_a_command"),
            ("action-event-string", _action(event="x"), "event_wrong_type"),
            ("action-authorizations-string", _action(authorizations="abc"), "authorizations_wrong_type"),
            ("action-authorizations-null-item", _action(authorizations=[None]), "authorizations_wrong_type"),
            ("action-response-url-number", _action(response_url=5), "response_url_wrong_type"),
            ("view-null", _view(view=None), "view_wrong_type"),
            ("view-string", _view(view="x"), "view_wrong_type"),
            ("view-empty", _view(view={}), "view.callback_id_missing"),
            ("view-callback-number", _view_with(callback_id=5), "view.callback_id_missing"),
            ("view-metadata-number", _view_with(private_metadata=5), "view.private_metadata_missing_or_not_text"),
            ("view-state-string", _view_with(state="x"), "view.state_wrong_type"),
            ("view-values-string", _view_with(state={"values": "x"}), "view.state.values_wrong_type"),
            ("view-values-block-string", _view_with(state={"values": {"b": "x"}}), "view.state.values_wrong_type"),
            (
                "view-values-action-null",
                _view_with(state={"values": {"b": {"a": None}}}),
                "view.state.values_wrong_type",
            ),
            ("view-blocks-string", _view_with(blocks="x"), "view.blocks_wrong_type"),
            ("view-blocks-null-item", _view_with(blocks=[None]), "view.blocks_wrong_type"),
            ("view-user-missing", _view(user=None), "user_missing"),
            (
                "view-type-missing",
                _view(view={k: v for k, v in _view()["view"].items() if k != "type"}),
                "view.type_not_modal",
            ),
            ("view-workflow-step", _view_with(type="workflow_step"), "view.type_not_modal"),
            ("view-response-urls-null-item", _view(response_urls=[None]), "response_urls_wrong_type"),
        ]
    ],
    *[
        Case(f"events-{name}", body, 400, reason, content_type=JSON)
        for name, body, reason in [
            ("event-string", _event("x"), "event_wrong_type"),
            ("event-null", _event(None), "event_wrong_type"),
            ("event-list", _event([]), "event_wrong_type"),
            ("event-without-type", _event({}), "event_missing"),
            ("event-type-number", _event({"type": 5}), "event_missing"),
            ("event-id-number", _event({"type": "message"}, event_id=5), "event_id_missing_or_not_text"),
            ("message-user-object", _event({"type": "message", "user": {"id": "U1"}}), "event.user_wrong_type"),
            ("message-user-number", _event({"type": "message", "user": 5}), "event.user_wrong_type"),
            ("message-inner-string", _event({"type": "message", "message": "x"}), "event.message_wrong_type"),
            (
                "message-inner-user-number",
                _event({"type": "message", "message": {"user": 5}}),
                "event.message.user_wrong_type",
            ),
            ("message-subtype-list", _event({"type": "message", "subtype": []}), "event.subtype_missing_or_not_text"),
            ("message-channel-number", _event({"type": "message", "channel": 5}), "event.channel_wrong_type"),
            ("authorizations-string", _event({"type": "message"}, authorizations="abc"), "authorizations_wrong_type"),
            ("with-command", _event({"type": "message"}, command="/incident"), "command_field_outside_a_command"),
            ("unknown-type", json.dumps({"type": "block_actions"}).encode(), "event_type_not_handled"),
            ("type-object", json.dumps({"type": {"a": 1}}).encode(), "event_type_not_handled"),
            ("challenge-missing", json.dumps({"type": "url_verification"}).encode(), "challenge_missing_or_not_text"),
            (
                "challenge-number",
                json.dumps({"type": "url_verification", "challenge": 5}).encode(),
                "challenge_missing_or_not_text",
            ),
        ]
    ],
    *[
        Case(f"content-type-{name}", _COMMAND, 415, "content_type_not_slack", content_type=ctype)
        for name, ctype in [
            ("text", "text/plain"),
            ("xml", "application/xml"),
            ("multipart", "multipart/form-data; boundary=x"),
            ("missing", None),
        ]
    ],
    Case("too-large-signed", b"text=" + b"a" * (1024**2 + 1), 413, "body_too_large"),
    Case("too-large-unsigned", b"text=" + b"a" * (1024**2 + 1), 413, "body_too_large", headers=_none),
]

ROUTER = [
    Case("events-get", b"", 405, None, method="GET"),
    Case("events-put", _COMMAND, 405, None, method="PUT"),
    Case("events-delete", b"", 405, None, method="DELETE"),
    Case("events-trailing-slash", _COMMAND, 404, None, path="/slack/events/"),
    Case("events-other-case", _COMMAND, 404, None, path="/Slack/Events"),
    Case("unknown-path", b"", 404, None, method="GET", path="/admin"),
    Case("unknown-deep-path", b"", 404, None, method="GET", path="/slack/events/../../etc/passwd"),
    Case("healthz-post", _COMMAND, 405, None, path="/healthz"),
    Case("readyz-post", _COMMAND, 405, None, path="/readyz"),
    Case("metrics-post", _COMMAND, 405, None, path="/metrics"),
    Case("metrics-delete", b"", 405, None, method="DELETE", path="/metrics"),
]

OK_ANYWAY = [
    # Well-formed GETs with junk attached still just answer.
    Case(
        "healthz-junk", b"junk", 200, None, method="GET", path="/healthz?x=%ff&x=1", extra=[("X-Slack-Signature", "x")]
    ),
    Case("readyz-junk", b"", 200, None, method="GET", path="/readyz?" + "a=1&" * 500),
    Case("metrics-junk", b"\xff", 200, None, method="GET", path="/metrics?format=%3Cscript%3E"),
    # Events Firebreak does not listen to: 200, or Slack retries them.
    Case("event-not-listened-to", _event({"type": "reaction_added", "user": {"weird": True}}), 200, None, JSON),
    Case(
        "app-rate-limited", json.dumps({"type": "app_rate_limited", "minute_rate_limited": 1}).encode(), 200, None, JSON
    ),
]


def _bearer(token: str) -> Callable[[], list[tuple[str, str]]]:
    return lambda: [("Authorization", f"Bearer {token}")]


# POST /alertmanager (the app here has no ALERTMANAGER_TOKEN: every one is a 401 before the body is
# read; tests/signals/test_webhook.py has the 400s and 413s with a token set).
ALERTMANAGER = [
    Case("am-no-token", b'{"version": "4", "alerts": []}', 401, None, JSON, headers=lambda: [], path="/alertmanager"),
    Case("am-any-token", b'{"version": "4", "alerts": []}', 401, None, JSON, _bearer(""), path="/alertmanager"),
    Case("am-not-json", b"\xff{", 401, None, JSON, _bearer("x"), path="/alertmanager"),
    Case("am-get", b"", 405, None, None, headers=lambda: [], method="GET", path="/alertmanager"),
]

CASES = UNSIGNED + BAD_SHAPE + ROUTER + OK_ANYWAY + ALERTMANAGER
ROUTES = {
    ("POST", "/slack/events"),
    ("POST", "/alertmanager"),
    ("GET", "/healthz"),
    ("HEAD", "/healthz"),
    ("GET", "/readyz"),
    ("HEAD", "/readyz"),
    ("GET", "/metrics"),
    ("HEAD", "/metrics"),
}


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> Iterator[io.StringIO]:
    """The app's structured log lines as JSON, one per line (bot.logs' processors, our own stream);
    the standard-library loggers (aiohttp, Bolt) are in caplog."""
    caplog.set_level(logging.WARNING)
    saved = structlog.get_config()
    stream = io.StringIO()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    yield stream
    structlog.configure(**saved)


async def _send(app, case: Case) -> tuple[int, str]:
    headers = [("Content-Type", case.content_type)] if case.content_type else []
    if case.headers is None:
        ts = _now()
        headers += _signed_with(case.body, ts)
    else:
        headers += case.headers()
    headers += case.extra
    skip = () if case.content_type else ("Content-Type",)
    url = URL(app.url + case.path, encoded=True)
    async with (
        aiohttp.ClientSession(skip_auto_headers=skip) as s,
        s.request(case.method, url, data=case.body or None, headers=headers) as resp,
    ):
        return resp.status, await resp.text()


def test_every_served_route_is_covered(app):
    served = {(r.method, r.resource.canonical) for r in app.runner.app.router.routes()}  # type: ignore[union-attr]
    assert served == ROUTES, "a new endpoint: add its hostile cases here"
    covered = {("GET" if c.method == "GET" else c.method, c.path.split("?")[0]) for c in CASES}
    assert {(m, p) for m, p in ROUTES if m != "HEAD"} <= covered


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_hostile_request_is_refused_with_one_line_and_changes_nothing(app, logged, caplog, case):
    keys_before = sorted(await app.services.redis.keys("*"))
    status, text = await _send(app, case)
    assert status == case.status, (status, text)
    assert "Traceback" not in text and "File " not in text
    await app.drain()
    lines = [json.loads(line) for line in logged.getvalue().splitlines() if line.strip()]
    refused = [line for line in lines if line["event"] == "slack_request_refused"]
    if case.reason is not None:
        assert [(r["status"], r["reason"]) for r in refused] == [(case.status, case.reason)], lines
        assert json.loads(text) == {"ok": False, "error": case.reason}
    else:
        assert refused == []
    assert not [line for line in lines if "exception" in line or line["level"] in ("error", "critical")], lines
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], caplog.text
    assert sorted(await app.services.redis.keys("*")) == keys_before == []
    assert app.slack.calls == [] and app.slack.responses == []


async def test_no_5xx_when_hostile_requests_come_all_at_once(app, logged, caplog):
    """The whole list concurrently: no request's refusal depends on another's."""
    results = await asyncio.gather(*(_send(app, c) for c in CASES))
    assert [(c.id, s) for c, (s, _) in zip(CASES, results, strict=True)] == [(c.id, c.status) for c in CASES]
    await app.drain()
    assert await app.services.redis.dbsize() == 0 and await audit_entries(app) == []
    assert "Traceback" not in logged.getvalue() and "Traceback" not in caplog.text


async def test_signed_but_meaningless_requests_are_answered_and_only_audited(app, logged, caplog):
    """Well-formed requests for things Firebreak does not know are answered and record only the
    audit entry kept for bad input; no incident, no traceback. Bolt routes buttons and forms by
    their ids, so an id no listener has gets Bolt's own 404 (and one log line)."""
    reply = app.slack.response_url("r")
    sent = [
        (slash_command_body("frobnicate the gpus", user_id="UIC", response_url=reply), FORM, 200),
        (block_actions_body("nobody.knows", "x", "UIC", "C1", response_url=reply), FORM, 404),
        (block_actions_body("cadence.snooze", "not-an-incident", "UIC", "C1", response_url=reply), FORM, 200),
        (view_submission_body("nobody.knows", "UIC", {}, private_metadata="INC-1"), FORM, 404),
        (block_actions_body("\n", "x", "UIC", "C1", response_url=reply), FORM, 404),
        (view_submission_body("\n", "UIC", {}, private_metadata="INC-1"), FORM, 404),
        (view_submission_body("cadence.update", "UIC", {}, private_metadata="INC-1; DROP"), FORM, 200),
        (event_body({"type": "message", "subtype": "channel_join", "user": "U1", "channel": "C1"}, "EvJ"), JSON, 200),
        (
            event_body(
                {"type": "message", "channel": "C1", "message": {"text": "x"}, "subtype": "message_changed"}, "EvC"
            ),
            JSON,
            200,
        ),
    ]
    for body, ctype, expected in sent:
        status, text, _ = await app.sender.post(body, ctype)
        assert status == expected, (status, text)
        assert "Traceback" not in text
    await app.drain()
    assert sorted(e["action"] for e in await audit_entries(app)) == [
        "button.invalid",
        "button.unknown",
        "button.unknown",
        "command.invalid",
        "modal.invalid",
        "modal.unknown",
        "modal.unknown",
    ]
    assert await app.services.redis.exists(Keys.INCIDENT_SEQ) == 0
    assert app.slack.calls_to("conversations.create") == []
    assert "Traceback" not in logged.getvalue() and "Traceback" not in caplog.text
    assert '"level": "error"' not in logged.getvalue()
    unhandled = [json.loads(x) for x in logged.getvalue().splitlines() if '"slack_request_unhandled"' in x]
    assert len(unhandled) == 4


async def test_slacks_unsigned_ssl_check_probe_gets_a_200_and_touches_nothing(app, logged):
    probe = Case("ssl_check", urlencode({"ssl_check": "1", "token": "t"}).encode(), 200, None, headers=_none)
    assert (await _send(app, probe))[0] == 200
    # The probe is only the bare form: with a command in it, the body is a request and must be signed.
    smuggled = urlencode({"ssl_check": "1", "command": "/incident", "text": "declare X", "user_id": "U1"})
    assert (await _send(app, Case("smuggled", smuggled.encode(), 401, "missing_signature", headers=_none)))[0] == 401
    assert await app.services.redis.keys("*") == [] and app.slack.calls == []
    lines = [json.loads(line) for line in logged.getvalue().splitlines() if line.strip()]
    assert [line["event"] for line in lines] == ["slack_ssl_check", "slack_request_refused"]


async def test_url_verification_answers_the_challenge_without_the_store(app):
    status, text, _ = await app.sender.post(
        json.dumps({"token": "t", "challenge": "c-123", "type": "url_verification"}).encode(), JSON
    )
    assert (status, json.loads(text)) == (200, {"challenge": "c-123"})
    assert await app.services.redis.dbsize() == 0


_ODD = [None, [], [None], {}, "", "x", "\n", 0, -1, 1.5, True, ["x"], {"id": 5}, {"type": 5}, [{}], "\u202e"]


def _mutate(rng: random.Random, obj: object, depth: int = 0) -> object:
    """``obj`` with one value somewhere in it replaced by an odd one (or a key dropped or added)."""
    if isinstance(obj, dict) and obj and depth < 6:
        key = rng.choice(sorted(obj))
        roll = rng.random()
        if roll < 0.15:
            return {k: v for k, v in obj.items() if k != key}
        if roll < 0.25:
            return {
                **obj,
                rng.choice(["event", "view", "user", "channel", "team", "message", "command"]): rng.choice(_ODD),
            }
        if roll < 0.6 or not isinstance(obj[key], (dict, list)):
            return {**obj, key: rng.choice(_ODD)}
        return {**obj, key: _mutate(rng, obj[key], depth + 1)}
    if isinstance(obj, list) and obj and depth < 6:
        i = rng.randrange(len(obj))
        return [*obj[:i], _mutate(rng, obj[i], depth + 1) if rng.random() < 0.5 else rng.choice(_ODD), *obj[i + 1 :]]
    return rng.choice(_ODD)


def _fuzzed(rng: random.Random, reply: str) -> tuple[bytes, str]:
    message = {"type": "message", "text": "x", "user": "U1", "channel": "C1", "ts": "1.2"}
    edited = {"type": "message", "subtype": "message_changed", "channel": "C1", "message": {"user": "U1", "text": "y"}}
    kind = rng.choice(["command", "action", "view", "event", "edit"])
    if kind == "command":
        fields = {k: v[0] for k, v in parse_qs(_COMMAND.decode()).items()} | {"response_url": reply}
        for _ in range(rng.randint(1, 3)):
            key = rng.choice([*sorted(fields), "event", "view", "type", "actions", "payload", "ssl_check"])
            if rng.random() < 0.3:
                fields.pop(key, None)
            else:
                fields[key] = rng.choice(["", "x", "\n", "[]", "{}", "null", "/incident", "block_actions"])
        return urlencode(fields).encode(), FORM
    base = {
        "action": _action(response_url=reply),
        "view": _view(),
        "event": json.loads(_event(message)),
        "edit": json.loads(_event(edited)),
    }
    obj: object = base[kind]
    for _ in range(rng.randint(1, 3)):
        obj = _mutate(rng, obj)
    if kind in ("event", "edit"):
        return json.dumps(obj).encode(), JSON
    return _payload(obj), FORM


async def test_fuzzed_signed_bodies_never_get_a_5xx_or_a_traceback(app, logged, caplog):
    """Well-formed bodies with one to three values swapped for odd ones, signed: each is answered
    (200 when it is still a shape Firebreak handles, else 400), never with a 5xx."""
    rng = random.Random(9)
    statuses: collections.Counter[int] = collections.Counter()
    for _ in range(400):
        body, ctype = _fuzzed(rng, app.slack.response_url("fuzz"))
        status, text, _ = await app.sender.post(body, ctype)
        assert status in (200, 400), (status, text, body.decode())
        statuses[status] += 1
    await app.drain()
    assert statuses[200] and statuses[400]  # both kinds were exercised
    assert "Traceback" not in logged.getvalue() and "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], caplog.text
    assert '"level": "error"' not in logged.getvalue()
