"""JSON logs: one object per line, every request's lines with its request and incident ids,
the standard-library loggers in the same shape, and no secret anywhere (bot/logs.py)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from bot import logs
from bot.slack.lane import Lane
from tests.support.harness import SECRET, TOKEN
from tests.support.levers import OPS

SLACK = "xoxb-1234567890-abcdefghijklmnop"
AWS = "AKIAABCDEFGHIJKLMNOP"


@pytest.fixture
def json_logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """The app's logs as `firebreak serve` configures them (JSON), into a buffer; put back after."""
    monkeypatch.delenv("LOG_FORMAT", raising=False)
    saved = structlog.get_config()
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    filters = {h: list(h.filters) for h in handlers}
    stream = io.StringIO()
    logs.configure("INFO", json=True, stream=stream)
    yield stream
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    for h, fs in filters.items():
        h.filters = fs
    root.setLevel(level)
    structlog.configure(**saved)


def lines(stream: io.StringIO) -> list[dict]:
    """Every line, parsed: a line that is not one JSON object fails here."""
    out = []
    for raw in stream.getvalue().splitlines():
        obj = json.loads(raw)
        assert isinstance(obj, dict) and {"event", "level", "timestamp"} <= set(obj), raw
        out.append(obj)
    return out


async def test_every_line_is_json_and_request_lines_carry_request_and_incident_ids(app, json_logs):
    inc = await app.declare(roles={"ops": OPS})
    await app.run("status", channel=inc.channel_id)
    await app.drain()
    got = lines(json_logs)
    done = [e for e in got if e["event"] == "request_done"]
    assert [e["command"] for e in done] == ["declare", "role", "status"]
    for e in done:
        assert len(e["request_id"]) == 12 and e["incident_id"] == inc.id, e
        assert "incident" not in e  # one name for it
    # The audit log's entries name the same requests.
    audited = {e.get("request_id") async for e in app.services.audit.entries(inc.id)}
    assert {e["request_id"] for e in done} <= audited
    # aiohttp's access log (a standard-library logger) comes out as JSON too.
    access = [e for e in got if e.get("logger") == "aiohttp.access"]
    assert access and all("POST /slack/events" in e["event"] for e in access)
    text = json_logs.getvalue()
    assert TOKEN not in text and SECRET not in text


async def test_the_lane_logs_a_failed_request_with_its_ids(json_logs):
    lane = Lane(workers=1)

    async def boom() -> None:
        raise RuntimeError(f"lost {SLACK}")

    with structlog.contextvars.bound_contextvars(peer="10.0.0.1"):  # the submitter's own context
        lane.submit(boom, request_id="r-1", incident="INC-7")
    await lane.close()
    [e] = [e for e in lines(json_logs) if e["event"] == "after_ack_failed"]
    assert (e["request_id"], e["incident_id"], e["peer"]) == ("r-1", "INC-7", "10.0.0.1")
    assert "RuntimeError" in e["exception"] and SLACK not in e["exception"] and "[redacted" in e["exception"]


async def test_secrets_are_scrubbed_from_every_kind_of_value(json_logs):
    log = logs.get("t")

    class Opaque:
        def __str__(self) -> str:
            return f"client(token={SLACK})"

    log.info(
        "values",
        error=ValueError(f"key {AWS}"),
        obj=Opaque(),
        path=Path(f"/tmp/{SLACK}"),
        nested={"list": [f"Bearer {'a' * 30}"], "auth": {"token": SLACK}},
        token="plain-secret-value",
        count=3,
        ok=True,
    )
    try:
        raise RuntimeError(f"boom {SLACK}")
    except RuntimeError:
        log.exception("failed")
    logging.getLogger("slack_sdk.web").warning("sent %s", {"token": SLACK})
    try:
        raise ValueError(AWS)
    except ValueError:
        logging.getLogger("aiohttp.server").exception("handler crashed")
    got = lines(json_logs)
    text = json_logs.getvalue()
    assert SLACK not in text and AWS not in text and "a" * 30 not in text and "plain-secret-value" not in text
    [values] = [e for e in got if e["event"] == "values"]
    assert (values["count"], values["ok"], values["token"]) == (3, True, "[redacted]")
    assert values["error"] == "key [redacted AWS access key]"
    assert "[redacted Slack token]" in values["obj"] and "[redacted" in values["path"]
    [lib] = [e for e in got if e.get("logger") == "slack_sdk.web"]
    assert lib["level"] == "warning" and lib["event"].startswith("sent {'token': '[redacted")
    [crash] = [e for e in got if e.get("logger") == "aiohttp.server"]
    assert crash["level"] == "error" and "Traceback" in crash["event"] and "[redacted AWS access key]" in crash["event"]


def test_log_format_overrides_the_default():
    assert logs.json_default(True, {}) is True
    assert logs.json_default(False, {}) is False
    assert logs.json_default(True, {"LOG_FORMAT": "console"}) is False
    assert logs.json_default(False, {"LOG_FORMAT": " JSON "}) is True
    assert logs.json_default(True, {"LOG_FORMAT": "yaml"}) is True  # unknown: the default
