"""The audit log by seq (issue 26): `export --incident` prints an incident's entries only when
each is the chain's own (its hash, its place in the chain), whatever the index in Redis says;
`firebreak migrate` moves a log an older release wrote as a list, which then verifies and
exports as before; a replica of the older release still appending during the rollout loses
nothing. The CLI runs as an operator runs it: a child process on REDIS_URL."""

from __future__ import annotations

import json

import redis.asyncio as aioredis

from bot.audit import AuditLog, entry_hash
from bot.audit.chain import GENESIS_HASH, canonical
from bot.schema import VERSION_KEY
from bot.store import Keys, connect
from tests.support.audit_chain import entry_at, every_hundredth, extend_chain, make_entry, put, stored
from tests.support.core import jsonl, run_cli


def cli(url: str, *args: str):
    return run_cli("audit", *args, env={"REDIS_URL": url})


def migrate(url: str, *args: str):
    return run_cli("migrate", *args, env={"REDIS_URL": url})


def interleaved(seq: int) -> str | None:
    """Three incidents taking turns, with entries of none between them."""
    return None if seq % 7 == 0 else f"INC-{1 + seq % 3}"


async def test_export_of_one_incident_is_exactly_its_entries_in_order_among_others(redis_url):
    r = connect(redis_url)
    await extend_chain(r, 3000, interleaved)
    everything = jsonl(cli(redis_url, "export").stdout)
    assert [e["seq"] for e in everything] == list(range(1, 3001))
    for inc in ("INC-1", "INC-2", "INC-3"):
        out = cli(redis_url, "export", "--incident", inc)
        assert out.returncode == 0 and out.stderr == "", out.stderr
        assert jsonl(out.stdout) == [e for e in everything if e["incident"] == inc]
    assert await r.exists(Keys.AUDIT_LOG) == 0  # the entries are in the hash by seq, not a list
    assert await r.hlen(Keys.AUDIT_ENTRIES) == 3000
    await r.aclose()


async def _index(r: aioredis.Redis, inc: str) -> list[int]:
    return [int(s) for s in await r.lrange(Keys.audit_incident(inc), 0, -1)]


async def _refused(url: str, inc: str, why: str, printed: list[int]) -> None:
    out = cli(url, "export", "--incident", inc)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert why in out.stderr and "the log was altered" in out.stderr, out.stderr
    assert [e["seq"] for e in jsonl(out.stdout)] == printed  # only what was checked is printed


async def test_an_index_pointing_at_another_incidents_entry_is_refused(redis_url):
    r = connect(redis_url)
    await extend_chain(r, 1000, every_hundredth())
    # Someone points INC-1's index at seq 351, an entry of another incident, between 300 and 400.
    await r.linsert(Keys.audit_incident("INC-1"), "AFTER", "300", "351")
    assert (await entry_at(r, 351))["incident"] != "INC-1"
    await _refused(redis_url, "INC-1", "seq 351 is not the one the incident index recorded", [100, 200, 300])
    assert cli(redis_url, "verify").returncode == 0  # the chain itself is whole: only the index lies
    await r.aclose()


async def test_a_forged_entry_is_refused_whether_or_not_its_hash_was_recomputed(redis_url):
    r = connect(redis_url)
    await extend_chain(r, 1000, every_hundredth())
    genuine = await entry_at(r, 400)
    forged = {**genuine, "actor": "UMALLORY"}
    await put(r, 400, forged)  # the content changed, the hash left as it was
    await _refused(redis_url, "INC-1", "seq 400 does not match its hash", [100, 200, 300])

    forged["hash"] = entry_hash(forged)  # a careful forger recomputes it: the chain no longer links to it
    await put(r, 400, forged)
    await _refused(redis_url, "INC-1", "seq 400 is not the one the chain links to", [100, 200, 300])
    assert "BROKEN at seq 401" in cli(redis_url, "verify").stderr

    await put(r, 400, genuine)
    last = await entry_at(r, 1000)  # the newest entry: the head is what links to it
    await put(r, 1000, {**last, "actor": "UMALLORY", "hash": entry_hash({**last, "actor": "UMALLORY"})})
    await _refused(redis_url, "INC-1", "seq 1000 is not the one the chain links to", list(range(100, 1000, 100)))
    await r.aclose()


async def test_an_entry_planted_past_the_head_or_garbage_in_the_index_is_refused(redis_url):
    r = connect(redis_url)
    await extend_chain(r, 500, every_hundredth())
    head = await entry_at(r, 500)
    # A well-formed, self-consistent entry of INC-1 at seq 501, linked to the head's hash, but the
    # appender never wrote it (the head still says 500).
    await put(r, 501, make_entry(501, head["hash"], "INC-1"))
    await r.rpush(Keys.audit_incident("INC-1"), 501)
    await _refused(redis_url, "INC-1", "seq 501 is not the one the chain links to", [100, 200, 300, 400, 500])
    assert "BROKEN at seq 501" in cli(redis_url, "verify").stderr

    await r.hdel(Keys.AUDIT_ENTRIES, 501)
    await r.lset(Keys.audit_incident("INC-1"), -1, "5O1")
    await _refused(redis_url, "INC-1", "index by '5O1', not a seq", [100, 200, 300, 400, 500])
    await r.aclose()


async def test_an_index_listing_an_entry_twice_prints_it_once(redis_url):
    r = connect(redis_url)
    await extend_chain(r, 500, every_hundredth())
    await r.linsert(Keys.audit_incident("INC-1"), "AFTER", "200", "200")
    await r.linsert(Keys.audit_incident("INC-1"), "AFTER", "300", "100")
    out = cli(redis_url, "export", "--incident", "INC-1")
    assert out.returncode == 0 and [e["seq"] for e in jsonl(out.stdout)] == [100, 200, 300, 400, 500]
    await r.aclose()


async def _old_release_append(r: aioredis.Redis, incident: str | None) -> dict:
    """What the append script of the previous release did: RPUSH onto the list, move the head."""
    head = await r.get(Keys.AUDIT_HEAD)
    seq, prev = (0, GENESIS_HASH) if head is None else (int(head.split()[0]), head.split()[1])
    e = make_entry(seq + 1, prev, incident)
    async with r.pipeline(transaction=True) as p:
        p.rpush(Keys.AUDIT_LOG, canonical(e))
        p.set(Keys.AUDIT_HEAD, f"{seq + 1} {e['hash']}")
        if incident is not None:
            p.rpush(Keys.audit_incident(incident), seq + 1)
        await p.execute()
    return e


async def test_migrate_moves_an_old_list_log_which_then_verifies_and_exports(redis_url, clock):
    r = connect(redis_url)
    await extend_chain(r, 2500, every_hundredth(), legacy=True)  # as the previous release left it
    old = [json.loads(raw) for raw in await r.lrange(Keys.AUDIT_LOG, 0, -1)]
    await r.set(VERSION_KEY, 1)  # the previous release's schema

    refused = cli(redis_url, "verify")
    assert refused.returncode == 2 and "2500 audit entries" in refused.stderr and "firebreak migrate" in refused.stderr
    assert cli(redis_url, "export", "--incident", "INC-1").returncode == 2

    plan = migrate(redis_url, "--dry-run")
    assert plan.returncode == 0 and "2. audit log: entries by seq" in plan.stdout, plan.stdout + plan.stderr
    assert "2500 audit entries to move" in plan.stdout
    done = migrate(redis_url)
    assert done.returncode == 0 and "ran audit log: entries by seq" in done.stdout, done.stdout + done.stderr
    assert await r.exists(Keys.AUDIT_LOG) == 0 and await r.get(VERSION_KEY) == "2"

    moved = await stored(r)
    assert moved[:2500] == old  # every entry at its seq, byte for byte the same JSON
    # The migration's own entry, chained on after the moved ones.
    assert [(e["seq"], e["action"], e["detail"]["version"]) for e in moved[2500:]] == [(2501, "schema.migrated", 2)]
    assert cli(redis_url, "verify").stdout.strip() == "audit chain OK (2501 entries)"
    out = cli(redis_url, "export", "--incident", "INC-1")
    assert out.returncode == 0 and out.stderr == ""
    assert jsonl(out.stdout) == [e for e in old if e["incident"] == "INC-1"]

    log = AuditLog(r, clock)
    await log.append("command.update", actor="U1", incident="INC-1", detail={"after": "migration"})
    assert cli(redis_url, "verify").stdout.strip() == "audit chain OK (2502 entries)"
    assert [e["seq"] for e in jsonl(cli(redis_url, "export", "--incident", "INC-1").stdout)][-2:] == [2500, 2502]
    assert migrate(redis_url).stdout.strip() == "schema version 2: nothing to migrate"
    await r.aclose()


async def test_a_log_tampered_with_before_the_migration_is_still_caught_where_it_was(redis_url):
    r = connect(redis_url)
    await extend_chain(r, 3000, every_hundredth(), legacy=True)
    await r.set(VERSION_KEY, 1)
    await r.lrem(Keys.AUDIT_LOG, 1, await r.lindex(Keys.AUDIT_LOG, 1499))  # seq 1500 deleted from the list
    assert migrate(redis_url).returncode == 0
    assert (
        await r.exists(Keys.AUDIT_LOG) == 0 and await r.hlen(Keys.AUDIT_ENTRIES) == 2999 + 1
    )  # and the migration's entry
    # Positions are kept, not the entries' own seqs: the entry after the gap sits at 1500.
    assert (await entry_at(r, 1500))["seq"] == 1501
    assert "BROKEN at seq 1501" in cli(redis_url, "verify").stderr
    await r.aclose()


async def test_a_replica_of_the_older_release_appending_during_the_rollout_loses_nothing(redis_url, clock):
    r = connect(redis_url)
    await extend_chain(r, 1200, every_hundredth(), legacy=True)  # schema version 0: both migrations run
    log = AuditLog(r, clock)
    # An entry that comes while the old list is still long (before the migration moved it, such as
    # the audit of migration 1) joins the list as before; then the migration moves them all.
    await log.append("command.status", actor="U1", incident="INC-1", detail={})
    assert await r.llen(Keys.AUDIT_LOG) == 1201
    done = migrate(redis_url)
    assert done.returncode == 0 and done.stdout.count("ran ") == 1 and "lever requests" in done.stdout, done.stdout
    assert [(e["seq"], e["detail"]["version"]) for e in (await stored(r))[1201:]] == [(1202, 1), (1203, 2)]
    # An older replica, not yet replaced, keeps pushing onto the list; the new release's next entry
    # moves those to their seqs first.
    old = [await _old_release_append(r, "INC-1"), await _old_release_append(r, None)]
    await log.append("command.update", actor="U2", incident="INC-1", detail={})
    assert await r.exists(Keys.AUDIT_LOG) == 0
    everything = await stored(r)
    assert [e["seq"] for e in everything] == list(range(1, len(everything) + 1))
    assert everything[-3:-1] == old
    assert cli(redis_url, "verify").stdout.strip() == f"audit chain OK ({len(everything)} entries)"
    rows = jsonl(cli(redis_url, "export", "--incident", "INC-1").stdout)
    assert rows == [e for e in everything if e["incident"] == "INC-1"]
    await r.aclose()
