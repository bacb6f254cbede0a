"""POST /alertmanager over real HTTP: who gets in, what bad input gets, and that the answer
comes before any incident or Slack post (those run in the scheduler's delivery job)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.signals.store import store as signals_store
from tests.support.harness import audit_entries, start_app
from tests.support.signals import CELL_A, TOKEN, incidents, payload, pending_jobs, post, settle, summaries, wire
from tests.support.signals import policy_dir as make_policy_dir

FIVE_MB = 5 * 1024 * 1024


async def _nothing_recorded(app) -> None:
    assert await pending_jobs(app) == 0
    assert await app.tick() == 0
    assert await incidents(app) == []
    assert await audit_entries(app) == []
    assert app.slack.calls_to("chat.postMessage") == []


@pytest.mark.parametrize(
    "headers",
    [
        {},  # no Authorization
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
        {"Authorization": "Bearer "},
    ],
)
async def test_a_missing_or_wrong_token_is_401_and_nothing_is_recorded(app, headers):
    status, body = await post(app, payload([wire("XidStorm")]), token=None, headers=headers)
    assert (status, body["ok"]) == (401, False)
    await _nothing_recorded(app)


async def test_the_scheme_is_case_insensitive(app):
    status, _ = await post(app, payload([wire("XidStorm")]), token=None, headers={"Authorization": f"bearer {TOKEN}"})
    assert status == 200


async def test_with_no_token_configured_every_request_is_401(slack, redis_url, clock, tmp_path):
    app = await start_app(slack, redis_url, clock, firebreak_policy_dir=make_policy_dir(tmp_path))
    try:
        status, body = await post(app, payload([wire("XidStorm")]), token="")
        assert status == 401 and "ALERTMANAGER_TOKEN is not set" in body["error"]
        status, _ = await post(app, payload([wire("XidStorm")]), token="anything")
        assert status == 401
        await _nothing_recorded(app)
    finally:
        await app.stop()


@pytest.mark.parametrize(
    "body, says",
    [
        (b"{not json", "malformed_json"),
        (b"\xff\xfe\x00garbage", "malformed_json"),
        (b"[" * 100_000 + b"]" * 100_000, "malformed_json"),  # nested past the parser's depth
        (b"[]", "not_an_object"),
        (json.dumps(payload([wire("XidStorm")], version="3")).encode(), 'version "3"'),
        (json.dumps(payload([wire("XidStorm")], version=4)).encode(), "version 4;"),
        (json.dumps({"alerts": []}).encode(), "version null"),
        (json.dumps({**payload([]), "alerts": "lots"}).encode(), "bad_payload: alerts"),
        (json.dumps(payload([{**wire("X"), "labels": ["a"]}])).encode(), "bad_payload: alerts.0.labels"),
        (
            json.dumps(payload([{**wire("X"), "labels": {"cell": 3}}])).encode(),
            "alerts.0.labels: must be an object of strings",
        ),
        (json.dumps(payload([{**wire("X"), "status": "pending"}])).encode(), "bad_payload: alerts.0.status"),
    ],
)
async def test_bad_input_is_a_clear_400_and_nothing_is_recorded(app, body, says):
    status, got = await post(app, body)
    assert status == 400, got
    assert says in got["error"], got
    await _nothing_recorded(app)


async def test_a_body_over_5_mb_is_413(app):
    big = payload([wire("XidStorm", summary="x" * (FIVE_MB + 10))])
    status, got = await post(app, big)
    assert status == 413 and "body_too_large" in got["error"]
    await _nothing_recorded(app)


async def test_a_chunked_body_over_5_mb_is_413_too(app):
    async def chunks():
        yield b'{"version": "4", "alerts": [], "pad": "'
        for _ in range(6):
            yield b"x" * (1024 * 1024)
        yield b'"}'

    status, got = await post(app, chunks())  # no Content-Length: counted while reading
    assert status == 413 and "body_too_large" in got["error"]
    await _nothing_recorded(app)


async def test_a_large_storm_under_5_mb_is_taken(app):
    """Bigger than Slack's 1 MiB limit on /slack/events: Alertmanager's limit is its own."""
    alerts = [wire("DCGMXid", node=f"gpu-a3-{i:04d}", summary="y" * 1000, fingerprint=f"{i:016x}") for i in range(2000)]
    body = json.dumps(payload(alerts)).encode()
    assert 2 * 1024 * 1024 < len(body) < FIVE_MB
    status, got = await post(app, body)
    assert (status, got["alerts"], got["handled"]) == (200, 2000, 2000)
    [inc] = await settle(app, lambda: incidents(app))
    [summary] = await settle(app, lambda: _summaries(app, inc.channel_id))
    assert "2000 alerts firing in `us-east-1`: `DCGMXid` ×2000. 2000 nodes:" in summary
    assert len(await signals_store(app.services).alert_records(inc.id)) == 2000


async def _summaries(app, channel):
    return summaries(app, channel)


async def test_the_answer_comes_before_the_incident(app):
    status, got = await post(app, payload([wire("XidStorm")]))
    assert status == 200 and got["ok"] and got["delivery"]
    # Recorded as a job in Redis; nothing opened or posted yet.
    assert await pending_jobs(app) == 1
    assert await incidents(app) == [] and app.slack.calls_to("chat.postMessage") == []
    [inc] = await settle(app, lambda: incidents(app))
    assert inc.cells == [CELL_A]


async def test_alerts_without_a_cell_are_grouped_under_unknown_cell_and_the_summary_says_so(app):
    alerts = [wire("NodeDown", cell=None, node="gpu-x-1"), wire("NodeDown", cell="Bad Cell!", node="gpu-x-2")]
    status, _ = await post(app, payload(alerts))
    assert status == 200
    [inc] = await settle(app, lambda: incidents(app))
    assert inc.cells == ["unknown-cell"] and inc.title == "NodeDown (no cell label)"
    [summary] = await settle(app, lambda: _summaries(app, inc.channel_id))
    assert "2 alerts firing in `unknown-cell`" in summary
    assert "2 alerts of this delivery had no usable `cell` label, so they are grouped under `unknown-cell`" in summary
    records = await signals_store(app.services).alert_records(inc.id)
    assert sorted(r.labels.get("cell", "") for r in records.values()) == ["", "Bad Cell!"]  # kept as sent


async def test_alert_text_is_escaped_never_a_mass_ping_or_formatting(app):
    evil = "<!channel> *bold* _it_ `code` <https://evil.example|click>"
    alerts = [
        wire("<!here>", node="<!everyone>", summary=evil, fingerprint="a" * 16),
        wire("Xid`79", node="gpu-1 <@U123|bob>", fingerprint="b" * 16),
    ]
    status, _ = await post(app, payload(alerts, summary=evil))
    assert status == 200
    [inc] = await settle(app, lambda: incidents(app))
    await settle(app, lambda: _summaries(app, inc.channel_id))
    posted = [c.args.get("text", "") for c in app.slack.calls_to("chat.postMessage")]
    posted += [json.dumps(c.args.get("blocks", "")) for c in app.slack.calls_to("chat.postMessage")]
    assert posted
    for t in posted:
        assert "<!channel>" not in t and "<!here>" not in t and "<!everyone>" not in t
        assert "<https://evil" not in t
    summary = summaries(app, inc.channel_id)[0]
    assert "`&lt;!here&gt;` ×1" in summary and "`Xid'79` ×1" in summary  # a code span it cannot close
    assert "`&lt;!everyone&gt;`" in summary
    # The title keeps what was sent (it is quoted wherever it is shown); the channel name has no markup.
    assert inc.title == evil and "channel" not in inc.channel_name.split("-", 3)[-1][:1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=10), kids, max_size=4),
        max_leaves=20,
    ),
    alerts=st.lists(
        st.dictionaries(
            st.sampled_from(["status", "labels", "annotations", "startsAt", "fingerprint", "generatorURL"]),
            st.none() | st.text(max_size=5) | st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
        ),
        max_size=3,
    ),
)
async def test_no_input_is_ever_a_5xx(app, body, alerts):
    for b in (body, {"version": "4", "alerts": alerts}):
        status, _ = await post(app, json.dumps(b).encode())
        assert status in (200, 400), (status, b)
