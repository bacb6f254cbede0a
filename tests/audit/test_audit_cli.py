"""`firebreak audit verify|export` as an operator runs them: a child process on REDIS_URL."""

from __future__ import annotations

import json

from bot.audit import entry_hash
from bot.store import Keys
from tests.support.audit_chain import entry_at, put
from tests.support.core import IC, TITLE, jsonl, run_cli


async def _two_incidents(app) -> None:
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    await app.run("sev 2 fleet stalled", user=IC, channel=ch)
    await app.declare("Chat TTFT regression", sev=2, user=IC, cells=())


async def test_verify_passes_on_a_clean_chain_and_names_the_edited_entry(app, redis_url):
    await _two_incidents(app)
    ok = run_cli("audit", "verify", env={"REDIS_URL": redis_url})
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "audit chain OK (3 entries)"

    r = app.services.redis
    entry = await entry_at(r, 2)
    assert entry["seq"] == 2
    entry["detail"]["args"]["sev"] = 4  # someone rewrites history
    await put(r, 2, json.dumps(entry))
    bad = run_cli("audit", "verify", env={"REDIS_URL": redis_url})
    assert bad.returncode != 0
    assert "seq 2" in bad.stderr and "BROKEN" in bad.stderr


async def test_verify_catches_a_rehashed_edit_and_a_deleted_entry(app, redis_url):
    await _two_incidents(app)
    r = app.services.redis
    entry = await entry_at(r, 1)
    entry["actor"] = "UMALLORY"
    entry["hash"] = entry_hash(entry)  # a careful forger recomputes the hash: the next link breaks
    await put(r, 1, json.dumps(entry))
    out = run_cli("audit", "verify", env={"REDIS_URL": redis_url})
    assert out.returncode != 0 and "seq 2" in out.stderr

    await r.hdel(Keys.AUDIT_ENTRIES, 1)  # dropping the forged entry leaves a gap at the start
    out = run_cli("audit", "verify", env={"REDIS_URL": redis_url})
    assert out.returncode != 0 and "BROKEN at seq 1" in out.stderr


async def test_export_prints_json_lines_for_one_incident(app, redis_url):
    await _two_incidents(app)
    out = run_cli("audit", "export", "--incident", "INC-1", env={"REDIS_URL": redis_url})
    assert out.returncode == 0, out.stderr
    rows = jsonl(out.stdout)
    assert [(r["seq"], r["action"]) for r in rows] == [(1, "command.declare"), (2, "command.sev")]
    for r in rows:
        assert {"seq", "ts", "incident", "actor", "action", "detail", "prev_hash", "hash"} <= set(r)
        assert r["incident"] == "INC-1" and r["actor"] == IC
        assert r["ts"] == "2026-11-30T03:10:00Z"
        assert r["hash"] == entry_hash(r)
    assert rows[0]["prev_hash"] == "0" * 64 and rows[1]["prev_hash"] == rows[0]["hash"]
    assert rows[1]["detail"]["sev_from"] == 3 and rows[1]["detail"]["sev_to"] == 2
    everything = jsonl(run_cli("audit", "export", env={"REDIS_URL": redis_url}).stdout)
    assert [r["seq"] for r in everything] == [1, 2, 3] and everything[2]["incident"] == "INC-2"


async def test_verify_catches_a_rehashed_last_entry_and_a_cut_tail(app, redis_url):
    """Links alone cannot show these: the chain head the appender wrote can."""
    await _two_incidents(app)
    r = app.services.redis
    last = await entry_at(r, 3)
    assert last["seq"] == 3
    last["actor"] = "UMALLORY"
    last["hash"] = entry_hash(last)
    await put(r, 3, json.dumps(last))
    out = run_cli("audit", "verify", env={"REDIS_URL": redis_url})
    assert out.returncode != 0 and "seq 3" in out.stderr

    await r.hdel(Keys.AUDIT_ENTRIES, 3)  # now drop it altogether
    out = run_cli("audit", "verify", env={"REDIS_URL": redis_url})
    assert out.returncode != 0 and "seq 3" in out.stderr


async def test_entries_written_while_serving_a_request_carry_its_id(app):
    import structlog

    with structlog.contextvars.bound_contextvars(request_id="req-abc123"):
        await app.services.audit.append("lever.done", actor="U1", detail={})
    await app.services.audit.append("system.note", actor="system", detail={})
    last_two = [e async for e in app.services.audit.entries()][-2:]
    assert [e["request_id"] for e in last_two] == ["req-abc123", None]


def test_audit_cli_without_redis_says_so_instead_of_reading_an_empty_store():
    out = run_cli("audit", "verify")
    assert out.returncode == 2 and "REDIS_URL is not set" in out.stderr and "OK" not in out.stdout


def test_audit_cli_with_redis_down_is_one_line():
    out = run_cli("audit", "export", env={"REDIS_URL": "redis://127.0.0.1:1/0"})
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith("firebreak: can't read the audit log from REDIS_URL")
