"""Signed checkpoints of the audit chain (docs/security-model.md, "Audit log"): a forger with Redis access who rewrites
the chain end to end passes the plain hash check but not `audit verify --pubkey`.

The app signs with a key made by `firebreak audit keygen`; the forger edits Redis directly,
recomputing every hash, as the plain chain cannot notice. The CLI runs as an operator runs it."""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from bot.audit import AuditLog
from bot.audit.chain import GENESIS_HASH, entry_hash
from bot.audit.sign import EVERY_SECONDS, Checkpointer, check, load_private_key
from bot.clock import SystemClock
from bot.store import Keys, connect
from fbworld.slack import FakeSlack, SlackSender
from tests.support import workspace
from tests.support.audit_chain import replace_all, stored
from tests.support.core import jsonl, run_cli
from tests.support.harness import RunningApp, start_app
from tests.support.serve import SERVE_SECRET, Serve


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    out = run_cli("audit", "keygen", str(tmp_path))
    assert out.returncode == 0, out.stderr
    return tmp_path / "audit-key.pem", tmp_path / "audit-key.pub.pem"


@pytest.fixture
async def signed(slack: FakeSlack, redis_url: str, clock, keys) -> RunningApp:
    running = await start_app(slack, redis_url, clock, firebreak_audit_key=keys[0])
    yield running
    await running.stop()


def cli(url: str, *args: str):
    return run_cli("audit", *args, env={"REDIS_URL": url})


async def _write_300(app: RunningApp) -> list[dict]:
    """300 entries through the real append, the signer checked after each as its loop would."""
    made = []
    for i in range(300):
        await app.services.audit.append("command.update", actor="U1", detail={"i": i})
        assert app.checkpoints is not None
        if (c := await app.checkpoints.maybe()) is not None:
            made.append(c)
    made.append(await app.checkpoints.final())  # as at shutdown: the head, whatever its seq
    return made


async def _entries(r: aioredis.Redis) -> list[dict]:
    return await stored(r)


async def _rewrite(r: aioredis.Redis, entries: list[dict], start: int) -> None:
    """The forger: renumber, relink and rehash every entry from position ``start`` (1-based)
    on, then replace the log and the head, so the plain chain is whole again."""
    prev = entries[start - 2]["hash"] if start > 1 else GENESIS_HASH
    for pos, e in enumerate(entries[start - 1 :], start):
        e["seq"], e["prev_hash"] = pos, prev
        e["hash"] = prev = entry_hash(e)
    await replace_all(r, entries)


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in rows))
    return path


async def test_a_rewrite_from_entry_5_passes_the_plain_check_but_not_the_signed_one(signed, redis_url, keys, tmp_path):
    made = await _write_300(signed)
    # The first entry is due at once (none signed yet), then one every 100, and the head at the end.
    assert [c["seq"] for c in made] == [1, 101, 201, 300]
    published = _jsonl(tmp_path / "ckpts.jsonl", made)
    # The same checkpoints gathered from two sources (the log and the channel), newest first.
    twice = _jsonl(tmp_path / "twice.jsonl", made[::-1] + made)
    pub = str(keys[1])
    for given in (published, twice):
        ok = cli(redis_url, "verify", "--pubkey", pub, "--checkpoints", str(given))
        assert ok.returncode == 0 and "signed up to seq 300" in ok.stdout, ok.stderr

    r = signed.services.redis
    entries = await _entries(r)
    entries[4]["actor"] = "UMALLORY"
    await _rewrite(r, entries, 5)
    # The hash chain alone is fooled, and so plain verify no longer says OK where the bot signs.
    plain = cli(redis_url, "verify")
    assert plain.returncode == 3 and plain.stderr.startswith("audit chain NOT PROVEN (300 entries"), plain.stderr
    for args in (["--checkpoints", str(published)], ["--checkpoints", str(twice)], []):  # or Redis's copies
        out = cli(redis_url, "verify", "--pubkey", pub, *args)
        assert out.returncode == 1, out.stdout
        assert out.stderr.startswith("audit chain BROKEN at seq 5 "), out.stderr


async def test_a_log_cut_back_to_150_of_300_fails_against_the_checkpoints(signed, redis_url, keys, tmp_path):
    published = _jsonl(tmp_path / "ckpts.jsonl", await _write_300(signed))
    r = signed.services.redis
    entries = (await _entries(r))[:150]
    await _rewrite(r, entries, 151)  # nothing to rehash: only the tail and the head go
    await r.delete(Keys.AUDIT_CHECKPOINTS)  # the forger deletes the Redis copies too
    assert cli(redis_url, "verify").stdout.strip() == "audit chain OK (150 entries)"  # no hint left in Redis
    out = cli(redis_url, "verify", "--pubkey", str(keys[1]), "--checkpoints", str(published))
    assert out.returncode == 1 and out.stderr.startswith("audit chain BROKEN at seq 151 "), out.stderr
    # Without the published ones nothing is left to check against, and it says so: not OK.
    out = cli(redis_url, "verify", "--pubkey", str(keys[1]))
    assert out.returncode == 3 and "no checkpoint from outside Redis" in out.stderr, out.stderr


async def test_two_entries_swapped_and_rechained_fail_where_the_order_changed(signed, redis_url, keys, tmp_path):
    published = _jsonl(tmp_path / "ckpts.jsonl", await _write_300(signed))
    r = signed.services.redis
    entries = await _entries(r)
    entries[9], entries[10] = entries[10], entries[9]  # seq 10 and 11 change places
    await _rewrite(r, entries, 10)
    assert cli(redis_url, "verify").returncode == 3  # whole as a hash chain, but not proven
    out = cli(redis_url, "verify", "--pubkey", str(keys[1]), "--checkpoints", str(published))
    assert out.returncode == 1 and out.stderr.startswith("audit chain BROKEN at seq 10 "), out.stderr


async def test_a_checkpoint_with_a_bad_signature_fails_and_is_named(signed, redis_url, keys, tmp_path):
    made = await _write_300(signed)
    forged = dict(made[2], hash="f" * 64)  # the seq 201 checkpoint, pointed at another head
    out = cli(
        redis_url, "verify", "--pubkey", str(keys[1]), "--checkpoints", str(_jsonl(tmp_path / "a", [made[0], forged]))
    )
    assert out.returncode == 1 and "checkpoint at seq 201 has a bad signature" in out.stderr, out.stderr
    # Signed, but by another key (a forger's own): just as bad.
    other = Checkpointer(signed.services.redis, signed.clock, ed25519.Ed25519PrivateKey.generate())
    await signed.services.audit.append("command.update", actor="U1", detail={})
    theirs = await other.maybe(force=True)
    assert theirs is not None and theirs["seq"] == 301
    out = cli(redis_url, "verify", "--pubkey", str(keys[1]), "--checkpoints", str(_jsonl(tmp_path / "b", [theirs])))
    assert out.returncode == 1 and "checkpoint at seq 301 has a bad signature" in out.stderr, out.stderr
    # The other key's checkpoint landed among the Redis copies too: verify against them names it.
    out = cli(redis_url, "verify", "--pubkey", str(keys[1]))
    assert out.returncode == 1 and "checkpoint at seq 301 has a bad signature" in out.stderr, out.stderr
    # Something that is not a checkpoint among the Redis copies: named, not a traceback.
    r = signed.services.redis
    await r.delete(Keys.AUDIT_CHECKPOINTS)
    await r.rpush(Keys.AUDIT_CHECKPOINTS, *[json.dumps(c) for c in made], "{garbage")
    out = cli(redis_url, "verify", "--pubkey", str(keys[1]))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "a copy in Redis that is not a checkpoint) has a bad signature" in out.stderr, out.stderr


async def test_a_checkpoint_is_due_after_60_seconds_and_one_replica_signs_each_seq(signed, keys):
    audit, clock = signed.services.audit, signed.clock
    mine = signed.checkpoints
    assert mine is not None
    replica = Checkpointer(signed.services.redis, clock, load_private_key(keys[0]))  # another replica, same key
    for i in range(5):
        await audit.append("command.update", actor="U1", detail={"i": i})
    first = await mine.maybe()  # the first entries since none was signed: due at once (60 s since epoch 0)
    assert first is not None and first["seq"] == 5
    await audit.append("command.update", actor="U1", detail={})
    assert await mine.maybe() is None and await replica.maybe() is None  # 1 entry, 0 s: not due
    clock.advance(EVERY_SECONDS - 1)
    assert await mine.maybe() is None
    clock.advance(1)
    got = [await replica.maybe(), await mine.maybe()]  # both see it due: the claim lets one sign
    assert [c["seq"] if c else None for c in got] == [6, None]
    assert [c["seq"] for c in jsonl("\n".join(await signed.services.redis.lrange(Keys.AUDIT_CHECKPOINTS, 0, -1)))] == [
        5,
        6,
    ]
    clock.advance(EVERY_SECONDS * 2)
    assert await mine.maybe() is None  # the chain did not move: nothing new to sign

    # Whoever writes Redis plants a copy far ahead (signed by their own key, or not at all), to
    # make the signers think the chain is covered: they ignore it and sign on.
    forger = Checkpointer(signed.services.redis, clock, ed25519.Ed25519PrivateKey.generate())
    planted = await forger.maybe(force=True)  # seq 6 is claimed already, whatever the key
    assert planted is None
    r = signed.services.redis
    await r.rpush(Keys.AUDIT_CHECKPOINTS, json.dumps({"seq": 10**9, "hash": "0" * 64, "ts": "x", "sig": "AAAA"}))
    await audit.append("command.update", actor="U1", detail={})
    clock.advance(EVERY_SECONDS)
    again = await replica.maybe()
    assert again is not None and again["seq"] == 7 and again["from"] == 6


async def test_serve_publishes_checkpoints_to_the_log_and_the_audit_channel_and_signs_at_sigterm(
    slack, redis_url, keys, tmp_path
):
    workspace.seed(slack)
    channel = slack.add_channel("firebreak-audit")
    serve = Serve(redis_url, slack)
    serve.env.update({"FIREBREAK_AUDIT_KEY": str(keys[0]), "FIREBREAK_AUDIT_CHANNEL": channel})
    await serve.start()
    try:
        sender = SlackSender(serve.url, SERVE_SECRET)
        status, _, _ = await sender.command(
            "declare Ingress flapping --sev 3", user="U_IC", channel="C_GENERAL", response_url=slack.response_url("d")
        )
        assert status == 200
        await slack.wait_for_response("d", timeout=10)
        assert serve.proc is not None
        serve.proc.send_signal(signal.SIGTERM)
        # Taken during the linger, and audited after every periodic checkpoint: only the one
        # signed at shutdown can cover it.
        status, _, _ = await sender.command("help", user="U_IC", channel="C_GENERAL")
        assert status == 200
        assert await serve.proc.wait() == 0
    finally:
        await serve.stop()
    events = serve.events()
    assert not [e for e in events if e["event"] == "audit_unsigned"]
    logged = [e for e in events if e["event"] == "audit_checkpoint"]
    head = await (r := connect(redis_url)).get(Keys.AUDIT_HEAD)
    last = [e async for e in AuditLog(r, SystemClock()).entries()][-1]
    await r.aclose()
    assert last["action"] == "command.help"
    assert logged and (logged[-1]["seq"], logged[-1]["hash"]) == (last["seq"], last["hash"])
    assert head == f"{last['seq']} {last['hash']}"
    names = [e["event"] for e in events]
    assert names.index("shutdown_signal") < len(names) - 1 - names[::-1].index("audit_checkpoint")
    posted = [m["text"] for m in slack.messages(channel)]
    assert len(posted) == len(logged) and all(t.startswith("audit checkpoint seq ") for t in posted)
    in_channel = json.loads(posted[-1].split("```")[1])
    public = serialization.load_pem_public_key(keys[1].read_bytes())
    assert isinstance(public, ed25519.Ed25519PublicKey)
    check(public, in_channel)  # what the channel shows verifies on its own
    assert {k: logged[-1][k] for k in in_channel} == in_channel
    # The log lines as a log pipeline keeps them are a checkpoints file as they are.
    out = cli(redis_url, "verify", "--pubkey", str(keys[1]), "--checkpoints", str(_jsonl(tmp_path / "log", logged)))
    assert out.returncode == 0 and "checkpoints from the checkpoints file" in out.stdout, out.stderr


async def test_without_a_key_the_bot_says_once_and_in_readyz_that_the_audit_is_only_hash_chained(slack, redis_url):
    import aiohttp

    workspace.seed(slack)
    serve = await Serve(redis_url, slack).start()
    try:
        async with aiohttp.ClientSession() as s, s.get(serve.url + "/readyz") as resp:
            body = await resp.json()
        assert resp.status == 200 and body["audit"].startswith("hash-chained only: FIREBREAK_AUDIT_KEY is unset")
    finally:
        await serve.stop()
    warned = [e for e in serve.events() if e["event"] == "audit_unsigned"]
    assert len(warned) == 1 and warned[0]["level"] == "warning"
    assert not [e for e in serve.events() if e["event"] == "audit_checkpoint"]


# Bad input: one line, exit 2, nothing changed -------------------------------------------------


def _one_line(out, *words: str) -> None:
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    for w in words:
        assert w in out.stderr, out.stderr


def _rsa(tmp_path: Path) -> tuple[Path, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    priv, pub = tmp_path / "rsa.pem", tmp_path / "rsa.pub.pem"
    priv.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    pub.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return priv, pub


def test_keygen_writes_a_0600_private_key_and_never_overwrites_one(keys, tmp_path):
    priv, pub = keys
    assert pub.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    assert stat.S_IMODE(os.stat(priv).st_mode) == 0o600
    assert isinstance(load_private_key(priv), ed25519.Ed25519PrivateKey)
    before = priv.read_bytes()
    _one_line(run_cli("audit", "keygen", str(tmp_path)), "already exists")
    assert priv.read_bytes() == before
    _one_line(run_cli("audit", "keygen", str(tmp_path / "nope")), "is not a directory")


def test_serve_with_a_missing_or_wrong_key_file_stops_with_one_line(tmp_path, keys):
    env = {"SLACK_BOT_TOKEN": "xoxb-x", "SLACK_SIGNING_SECRET": "s", "REDIS_URL": "redis://127.0.0.1:1/0"}
    out = run_cli("serve", "--port", "0", env={**env, "FIREBREAK_AUDIT_KEY": str(tmp_path / "missing.pem")})
    _one_line(out, "FIREBREAK_AUDIT_KEY", "can't read", "missing.pem")
    out = run_cli("serve", "--port", "0", env={**env, "FIREBREAK_AUDIT_KEY": str(_rsa(tmp_path)[0])})
    _one_line(out, "FIREBREAK_AUDIT_KEY", "not an Ed25519 private key")
    out = run_cli("serve", "--port", "0", env={**env, "FIREBREAK_AUDIT_KEY": str(keys[1])})  # the public half
    _one_line(out, "FIREBREAK_AUDIT_KEY", "not an unencrypted PEM private key")


async def test_verify_with_bad_key_or_checkpoint_files_is_one_line_and_changes_nothing(
    signed, redis_url, keys, tmp_path
):
    made = await _write_300(signed)
    r = signed.services.redis
    before = await r.hgetall(Keys.AUDIT_ENTRIES), await r.lrange(Keys.AUDIT_CHECKPOINTS, 0, -1)
    good = str(_jsonl(tmp_path / "good", made))
    _one_line(cli(redis_url, "verify", "--pubkey", str(tmp_path / "none.pem")), "can't read the public key")
    _one_line(cli(redis_url, "verify", "--pubkey", str(_rsa(tmp_path)[1])), "not an Ed25519 public key")
    _one_line(cli(redis_url, "verify", "--pubkey", str(keys[0])), "not a PEM public key")  # the private half
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(made[0]) + "\n{not json\n")
    _one_line(
        cli(redis_url, "verify", "--pubkey", str(keys[1]), "--checkpoints", str(bad)), "line 2 is not a checkpoint"
    )
    bad.write_text(json.dumps({"seq": "100", "hash": "x"}) + "\n")
    _one_line(
        cli(redis_url, "verify", "--pubkey", str(keys[1]), "--checkpoints", str(bad)), "line 1 is not a checkpoint"
    )
    _one_line(cli(redis_url, "verify", "--checkpoints", good), "--checkpoints needs --pubkey")
    assert (await r.hgetall(Keys.AUDIT_ENTRIES), await r.lrange(Keys.AUDIT_CHECKPOINTS, 0, -1)) == before


async def test_a_signed_break_is_named_before_a_later_copy_that_claims_an_earlier_seq(
    signed, redis_url, keys, tmp_path
):
    published = _jsonl(tmp_path / "ckpts.jsonl", await _write_300(signed))
    r = signed.services.redis
    entries = await _entries(r)
    entries[149]["actor"] = "UMALLORY"
    await _rewrite(r, entries, 150)  # rechained from 150: only the checkpoints see it, at 150
    await r.hset(Keys.AUDIT_ENTRIES, 160, (await r.hget(Keys.AUDIT_ENTRIES, 1)) or b"")  # entry 1 again, at 160
    out = cli(redis_url, "verify", "--pubkey", str(keys[1]), "--checkpoints", str(published))
    # Not "at seq 1", the seq the copy claims (entry 1 itself is genuine): the scan met 150 first.
    assert out.returncode == 1 and out.stderr.startswith("audit chain BROKEN at seq 150 "), out.stderr
