"""Audit history that grows: `audit export --incident` reads the per-incident index,
`audit verify` streams the chain page by page, `audit reindex` indexes a log written
before the index existed. The CLI runs as an operator runs it: a child process on REDIS_URL."""

from __future__ import annotations

import asyncio
import itertools
import tracemalloc

import redis.asyncio as aioredis

from bot.audit import AuditLog, entry_hash
from bot.audit.chain import verify_entries
from bot.store import Keys, connect
from tests.support.audit_chain import entry_at, every_hundredth, extend_chain, make_entry, put
from tests.support.core import jsonl, run_cli


def cli(url: str, *args: str):
    return run_cli("audit", *args, env={"REDIS_URL": url})


async def _seqs(r: aioredis.Redis, inc: str) -> list[int]:
    return [int(s) for s in await r.lrange(Keys.audit_incident(inc), 0, -1)]


async def test_export_of_one_incident_reads_its_index_with_two_writers_interleaved(redis_url, clock):
    """Two replicas (two AuditLogs on two connections) append 200 entries each, interleaved:
    the compare-and-set retries between them, and every entry lands in its incident's index."""
    conns = [connect(redis_url), connect(redis_url)]
    writers = [AuditLog(conns[0], clock), AuditLog(conns[1], clock)]

    async def write(w: int) -> None:
        for i in range(200):
            inc = "INC-1" if (i + w) % 3 == 0 else ("INC-2" if w == 0 else None)
            await writers[w].append("command.update", actor=f"U{w}", incident=inc, detail={"writer": w, "i": i})
            await asyncio.sleep(0.001)  # like requests arriving: lets the other writer in between

    await asyncio.gather(write(0), write(1))
    r = connect(redis_url)
    everything = jsonl(cli(redis_url, "export").stdout)
    assert [e["seq"] for e in everything] == list(range(1, 401))
    writer_of = [e["detail"]["writer"] for e in everything]
    assert sum(a != b for a, b in itertools.pairwise(writer_of)) > 2  # they did interleave

    out = cli(redis_url, "export", "--incident", "INC-1")
    assert out.returncode == 0 and out.stderr == ""  # a log written with the index needs no scan
    rows = jsonl(out.stdout)
    expected = [e for e in everything if e["incident"] == "INC-1"]
    assert rows == expected and len(rows) == 67 + 66
    assert await _seqs(r, "INC-1") == [e["seq"] for e in expected]
    for w in (0, 1):  # each writer's entries in the order it wrote them
        mine = [e["detail"]["i"] for e in rows if e["detail"]["writer"] == w]
        assert mine == sorted(mine) and len(mine) == 67 - w
    assert [e["seq"] for e in jsonl(cli(redis_url, "export", "--incident", "INC-2").stdout)] == [
        e["seq"] for e in everything if e["incident"] == "INC-2"
    ]
    assert await r.exists(Keys.audit_incident("None")) == 0  # entries without an incident are not indexed
    assert cli(redis_url, "export", "--incident", "INC-404").stdout == ""
    assert cli(redis_url, "verify").stdout.strip() == "audit chain OK (400 entries)"
    for c in [*conns, r]:
        await c.aclose()


async def test_a_log_from_before_the_index_is_scanned_and_says_so_until_reindexed(redis_url, clock):
    r = connect(redis_url)
    await extend_chain(r, 2500, every_hundredth(), indexed=False)  # as the previous version left it
    out = cli(redis_url, "export", "--incident", "INC-1")
    assert out.returncode == 0 and [e["seq"] for e in jsonl(out.stdout)] == list(range(100, 2501, 100))
    assert "entries 1-2500 predate the incident index" in out.stderr and "audit reindex" in out.stderr

    log = AuditLog(r, clock)  # the new version appends: its entries are indexed, the old ones are not yet
    for i in range(3):
        await log.append("command.update", actor="U1", incident="INC-1", detail={"i": i})
    await log.append("command.status", actor="U1", incident="INC-9", detail={})
    assert await r.get(Keys.AUDIT_INDEXED_AFTER) == "2500"
    out = cli(redis_url, "export", "--incident", "INC-1")
    want = [*range(100, 2501, 100), 2501, 2502, 2503]
    assert [e["seq"] for e in jsonl(out.stdout)] == want and "entries 1-2500 predate" in out.stderr

    out = cli(redis_url, "reindex")
    assert out.returncode == 0 and out.stdout.strip() == "audit index: indexed 2500 older entries", out.stderr
    assert await r.get(Keys.AUDIT_INDEXED_AFTER) == "0" and await _seqs(r, "INC-1") == want
    out = cli(redis_url, "export", "--incident", "INC-1")
    assert [e["seq"] for e in jsonl(out.stdout)] == want and out.stderr == ""
    assert await _seqs(r, "INC-7") == [5, 505, 1005, 1505, 2005]  # every incident, not just the exported one
    assert cli(redis_url, "reindex").stdout.strip() == "audit index: already covers every entry"
    assert await _seqs(r, "INC-1") == want  # a second run indexes nothing twice
    assert cli(redis_url, "verify").stdout.strip() == "audit chain OK (2504 entries)"
    await r.aclose()


async def test_reindex_while_replicas_append_indexes_every_entry_once_in_order(redis_url, clock):
    r = connect(redis_url)
    await extend_chain(r, 3000, every_hundredth(), indexed=False)
    conns = [connect(redis_url), connect(redis_url)]
    writer = AuditLog(conns[0], clock)
    stop = asyncio.Event()

    async def append_meanwhile() -> None:
        while not stop.is_set():
            await writer.append("command.update", actor="U1", incident="INC-1", detail={})

    task = asyncio.create_task(append_meanwhile())
    try:
        await asyncio.sleep(0.05)
        # Small pages, two reindexers at once (two operators): each page is taken by one of them.
        await asyncio.gather(AuditLog(r, clock).reindex(batch=97), AuditLog(conns[1], clock).reindex(batch=89))
    finally:
        stop.set()
        await task
    everything = [e async for e in AuditLog(r, clock).entries()]
    assert len(everything) > 3000
    assert await _seqs(r, "INC-1") == [e["seq"] for e in everything if e["incident"] == "INC-1"]
    assert await _seqs(r, "INC-7") == [e["seq"] for e in everything if e["incident"] == "INC-7"]
    for c in [*conns, r]:
        await c.aclose()


async def test_export_refuses_to_vouch_for_a_log_that_no_longer_matches_its_index(redis_url, clock):
    r = connect(redis_url)
    await extend_chain(r, 1000, every_hundredth())
    await r.hdel(Keys.AUDIT_ENTRIES, 500)  # someone deletes seq 500
    out = cli(redis_url, "export", "--incident", "INC-1")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "seq 500 is not the one the incident index recorded" in out.stderr and "audit verify" in out.stderr
    assert [e["seq"] for e in jsonl(out.stdout)] == [100, 200, 300, 400]  # what it printed is genuine
    assert "BROKEN at seq 500" in cli(redis_url, "verify").stderr
    await r.aclose()


async def _forge(r: aioredis.Redis, seq: int, rehash: bool) -> None:
    e = await entry_at(r, seq)
    e["actor"] = "UMALLORY"
    if rehash:
        e["hash"] = entry_hash(e)
    await put(r, seq, e)


async def test_streaming_verify_catches_tampering_at_and_across_page_boundaries(redis_url):
    """`verify` reads 2,000 entries a page: 1,000 and 1,001 are mid-page, 2,000 and 2,001 at its edge."""
    r = connect(redis_url)
    incident_of = every_hundredth()

    async def fresh(n: int = 2000) -> None:
        await r.flushall()
        await extend_chain(r, n, incident_of)

    async def verdict() -> str:
        out = cli(redis_url, "verify")
        return out.stdout.strip() or out.stderr.strip()

    await fresh()
    assert await verdict() == "audit chain OK (2000 entries)"
    await _forge(r, 1001, rehash=False)  # edited, first entry of the second page
    assert await verdict() == "audit chain BROKEN at seq 1001"
    await fresh()
    await _forge(r, 1000, rehash=True)  # re-hashed, last of the first page: the next link breaks
    assert await verdict() == "audit chain BROKEN at seq 1001"
    await fresh()
    await r.hdel(Keys.AUDIT_ENTRIES, 1500)  # removed from the middle
    assert await verdict() == "audit chain BROKEN at seq 1500"
    await fresh(2001)
    await r.hdel(Keys.AUDIT_ENTRIES, 2001)  # tail cut back to exactly one full page
    assert await verdict() == "audit chain BROKEN at seq 2001"
    await fresh()
    await _forge(r, 2000, rehash=True)  # re-hashed last entry: only the head shows it
    assert await verdict() == "audit chain BROKEN at seq 2000"
    await fresh()
    last = await entry_at(r, 2000)
    await put(r, 2001, make_entry(2001, last["hash"], None))  # linked, head untouched
    assert await verdict() == "audit chain BROKEN at seq 2001"
    await r.aclose()


async def test_verify_while_replicas_append_is_not_a_false_alarm(redis_url, clock):
    """The head is read with each page in one transaction, so entries that land during a
    verify are checked against the head that covers them, not reported as forged."""
    r = connect(redis_url)
    await extend_chain(r, 3000, every_hundredth())
    conns = [connect(redis_url) for _ in range(2)]
    writers = [AuditLog(c, clock) for c in conns]
    stop = asyncio.Event()

    async def append_meanwhile(w: AuditLog) -> int:
        n = 0
        while not stop.is_set():
            await w.append("command.update", actor="U1", incident="INC-1", detail={"n": n})
            n += 1
        return n

    tasks = [asyncio.create_task(append_meanwhile(w)) for w in writers]
    try:
        outs = [await asyncio.to_thread(cli, redis_url, "verify") for _ in range(3)]
    finally:
        stop.set()
        appended = sum(await asyncio.gather(*tasks))
    assert appended > 0
    for out in outs:
        assert out.returncode == 0 and out.stdout.startswith("audit chain OK ("), out.stderr
    assert cli(redis_url, "verify").stdout.strip() == f"audit chain OK ({3000 + appended} entries)"
    for c in [*conns, r]:
        await c.aclose()


async def test_verify_memory_does_not_grow_with_the_chain(redis_url, clock):
    """A correctness property of streaming, not a speed test: tracemalloc's peak while
    verifying 20,000 entries stays under 8 MB and no higher than at 5,000. Loading the
    chain into a list (the previous verify) peaks at ~45 MB for 20,000 entries (~11 MB
    for 5,000); streaming pages of 1,000 peaks at ~1.7 MB for both."""
    r = connect(redis_url)
    log = AuditLog(r, clock)
    peaks = []
    for n in (5_000, 20_000):
        await extend_chain(r, n, every_hundredth())
        tracemalloc.start()
        try:
            assert await log.verify() is None
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    small, large = peaks
    assert large < 8_000_000, peaks
    assert large < small + 1_000_000, peaks
    # The same chain through a load-all check does exceed the ceiling (so the ceiling means something).
    tracemalloc.start()
    try:
        assert verify_entries([e async for e in log.entries()]) is None
        assert tracemalloc.get_traced_memory()[1] > 8_000_000
    finally:
        tracemalloc.stop()
    await r.aclose()
