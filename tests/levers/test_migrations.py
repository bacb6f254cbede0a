"""Migration 1 (levers/migrations.py) against a real Redis: a store the previous release left
(lever requests without the index by latest move, no schema version) is listed by `migrate
--dry-run` without a change, migrated by `migrate`, and read back as `changed` reads it."""

from __future__ import annotations

from bot import schema
from bot.runtime import MIGRATIONS
from bot.store import connect
from levers.store import MOVED_KEY, lever_store
from tests.support.core import cli
from tests.support.harness import T0, audit_entries
from tests.support.levers import OPS, say

HOLD = "lever kueue-hold research-h100 --cell us-east-3"


async def _as_the_previous_release_left_it(redis_url: str) -> None:
    """The previous schema (0): lever requests without the index by latest move, no version key."""
    r = connect(redis_url)  # the product's client: on a Cluster too (the two keys are in two slots)
    try:
        await r.delete(MOVED_KEY)
        await r.delete(schema.VERSION_KEY)
    finally:
        await r.aclose()


async def test_a_store_from_the_previous_schema_is_migrated_and_read_back(app, cells, clock, redis_url):
    inc = await app.declare(roles={"ops": OPS})
    assert "applied and verified" in await say(app, HOLD, OPS, inc.channel_id)
    clock.advance(3600)
    assert "undone" in await say(app, "undo REQ-1", OPS, inc.channel_id)
    undone_at = T0 + 3600
    await _as_the_previous_release_left_it(redis_url)
    store = lever_store(app.services)
    assert await store.moved_since(T0 - 1) == []  # what `changed` would miss without the migration

    rc, dry, err = await cli(redis_url, "migrate", "--dry-run")
    assert rc == 0, err
    rc, done, err = await cli(redis_url, "migrate")
    assert rc == 0, err
    rc, again, err = await cli(redis_url, "migrate")
    assert rc == 0, err
    assert dry.splitlines() == [
        f"schema version in Redis: 0; this Firebreak: {len(MIGRATIONS)}",
        "1. lever requests: index by latest move (what `changed` reads): "
        "1 lever request(s) to add to the index by latest move",
        f"2. {MIGRATIONS[1].name}: nothing to change (version only)",  # the audit log is already by seq
    ]
    assert done.strip() == f"schema version {len(MIGRATIONS)}: ran {MIGRATIONS[0].name}, {MIGRATIONS[1].name}"
    assert again.strip() == f"schema version {len(MIGRATIONS)}: nothing to migrate"

    [rec] = await store.moved_since(undone_at)  # scored by its latest move, the undo
    assert (rec.id, rec.state) == ("REQ-1", "undone")
    assert await store.moved_since(undone_at + 1) == []
    assert await schema.version(app.services.redis) == len(MIGRATIONS)
    # Audited once (the dry run and the second `migrate` changed nothing), and the chain holds.
    [entry] = [e for e in await audit_entries(app) if e["action"] == "schema.migrated" and e["detail"]["version"] == 1]
    assert (entry["actor"], entry["incident"]) == ("system", None)
    assert entry["detail"] == {"version": 1, "migration": MIGRATIONS[0].name, "changed": 1}
    rc, out, err = await cli(redis_url, "audit", "verify")
    assert rc == 0 and out.startswith("audit chain OK"), out + err


async def test_the_dry_run_changes_nothing(app, cells, redis_url):
    inc = await app.declare(roles={"ops": OPS})
    assert "applied and verified" in await say(app, HOLD, OPS, inc.channel_id)
    await _as_the_previous_release_left_it(redis_url)
    r = connect(redis_url)
    try:
        lines = await schema.dry_run(r, MIGRATIONS)
        assert lines[1].endswith("1 lever request(s) to add to the index by latest move")
        assert await r.exists(MOVED_KEY, schema.VERSION_KEY) == 0
    finally:
        await r.aclose()
