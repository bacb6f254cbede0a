"""verify's fast path (ChainChecker.feed_page over page slices, _parse_page) names the same first
bad seq as the reference check (verify_entries over parsed entries) on every kind of damage.

Pure, but for the last tests (AuditLog.verify's page loop on Redis). The chain is the real entry
shape (tests/support/audit_chain.py); each case damages its stored bytes the way someone with
Redis write access could.
"""

from __future__ import annotations

import json
import random

import pytest

from bot.audit import AuditLog
from bot.audit.chain import GENESIS_HASH, ChainChecker, _parse, _parse_page, canonical, entry_hash, verify_entries
from bot.clock import SystemClock
from bot.store import Keys, connect
from tests.support.audit_chain import entry_at, every_hundredth, extend_chain, make_entry, put

N, SLICE = 300, 7  # a slice size that does not divide the chain: the boundaries move


def chain() -> list[bytes | None]:
    rows: list[bytes | None] = []
    prev = GENESIS_HASH
    for seq in range(1, N + 1):
        e = make_entry(seq, prev, every_hundredth()(seq))
        rows.append(canonical(e))
        prev = e["hash"]
    return rows


def fast(rows: list[bytes | None]) -> int | None:
    checker, entries = ChainChecker(), _parse_page(rows)
    for start in range(0, len(rows), SLICE):
        if (bad := checker.feed_page(entries, rows, start, min(start + SLICE, len(rows)))) is not None:
            return bad
    return None


def reference(rows: list[bytes | None]) -> int | None:
    checker = ChainChecker()
    for raw in rows:
        e = _parse(raw) if raw is not None else {"seq": None, "missing": True}
        if (bad := checker.feed(e)) is not None:  # no raw bytes: the reference way only
            return bad
    return None


def rehash(e: dict) -> bytes:
    e["hash"] = entry_hash(e)
    return canonical(e)


def _edit(rows: list[bytes | None], i: int, *, rehashed: bool) -> None:
    raw = rows[i]
    assert raw is not None
    e = json.loads(raw)
    e["actor"] = "UATTACKER"
    rows[i] = rehash(e) if rehashed else canonical(e)


def _rewrite_from(rows: list[bytes | None], i: int) -> None:
    """Edit entry i and recompute every hash after it: only a signed checkpoint shows it."""
    first = rows[i - 1]
    prev = json.loads(first)["hash"] if i and first is not None else GENESIS_HASH
    for j in range(i, len(rows)):
        raw = rows[j]
        assert raw is not None
        e = json.loads(raw)
        if j == i:
            e["actor"] = "UATTACKER"
        e["prev_hash"] = prev
        rows[j] = rehash(e)
        prev = json.loads(rows[j] or b"{}")["hash"]


DAMAGE = {
    "none": lambda r, i: None,
    "field edited, hash kept": lambda r, i: _edit(r, i, rehashed=False),
    "field edited, hash recomputed": lambda r, i: _edit(r, i, rehashed=True),
    "whole tail rewritten": _rewrite_from,
    "entry missing": lambda r, i: r.__setitem__(i, None),
    "two entries swapped": lambda r, i: r.__setitem__(slice(i, i + 2), [r[i + 1], r[i]]),
    "entry duplicated": lambda r, i: r.__setitem__(i + 1, r[i]),
    "not JSON": lambda r, i: r.__setitem__(i, b'{"seq": 5, "hash": '),
    "a JSON list": lambda r, i: r.__setitem__(i, b"[1, 2, 3]"),
    "spaces after colons (same meaning, not canonical)": lambda r, i: r.__setitem__(
        i, json.dumps(json.loads(r[i] or b"{}"), sort_keys=True).encode()
    ),
    "keys unsorted (same meaning)": lambda r, i: r.__setitem__(
        i, json.dumps(dict(reversed(list(json.loads(r[i] or b"{}").items()))), separators=(",", ":")).encode()
    ),
    "seq as a float": lambda r, i: r.__setitem__(
        i, (r[i] or b"").replace(b'"seq":%d' % (i + 1), b'"seq":%d.0' % (i + 1))
    ),
    "seq as true": lambda r, i: r.__setitem__(i, (r[i] or b"").replace(b'"seq":1,', b'"seq":true,')),
    "hash of the wrong length": lambda r, i: r.__setitem__(i, (r[i] or b"").replace(b'"hash":"', b'"hash":"ab', 1)),
    "a duplicate key appended": lambda r, i: r.__setitem__(i, (r[i] or b"")[:-1] + b',"actor":"UX"}'),
    "hash member removed": lambda r, i: r.__setitem__(
        i, canonical({k: v for k, v in json.loads(r[i] or b"{}").items() if k != "hash"})
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("at", [0, 1, 6, 7, 8, 150, N - 2])
def test_the_fast_path_names_the_reference_verdict(damage: str, at: int) -> None:
    rows = chain()
    DAMAGE[damage](rows, at)
    assert fast(rows) == reference(rows) == verify_entries(e for e in map(_parse_or_missing, rows))


def _parse_or_missing(raw: bytes | None) -> dict:
    return _parse(raw) if raw is not None else {"seq": None, "missing": True}


def test_random_damage_in_many_places_agrees_with_the_reference() -> None:
    rnd = random.Random(26)
    kinds = [k for k in DAMAGE if k != "none"]
    for _ in range(200):
        rows = chain()
        for _ in range(rnd.randint(1, 3)):
            DAMAGE[rnd.choice(kinds)](rows, rnd.randrange(0, N - 2))
        assert fast(rows) == reference(rows)


def test_a_whole_chain_passes_and_the_checker_ends_at_its_head() -> None:
    rows = chain()
    checker, entries = ChainChecker(), _parse_page(rows)
    assert checker.feed_page(entries, rows, 0, N) is None
    last = json.loads(rows[-1] or b"{}")
    assert checker.finish((N, last["hash"])) is None and checker.last == N


# Through AuditLog.verify on Redis, the page loop itself (cases a review of the fast path found).


async def test_a_break_claiming_a_later_seq_waits_for_what_the_scan_finds_first(redis_url):
    r = connect(redis_url)
    await extend_chain(r, 10, every_hundredth())
    e3 = await entry_at(r, 3)
    await put(r, 3, {**e3, "seq": 99})  # says it is entry 99: the chain breaks at 3, naming 99…
    await put(r, 12, b"{}")  # …and a stray field past the head, which the scan reaches first
    log = AuditLog(r, SystemClock())
    assert await log.verify() == 11
    assert await log.verify(batch=3) == 11
    await r.hdel(Keys.AUDIT_ENTRIES, 12)
    assert await log.verify() == 99  # the entry's own claim, as the reference check names it
    await r.aclose()


async def test_a_hash_that_is_a_lone_surrogate_is_a_break_not_a_crash(redis_url):
    r = connect(redis_url)
    await extend_chain(r, 10, every_hundredth())
    e3 = await entry_at(r, 3)
    # json reads "\ud800" (orjson refuses it), and no appender could have written it.
    await put(r, 3, json.dumps({**e3, "hash": "\ud800"}, sort_keys=True, separators=(",", ":")).encode())
    assert await AuditLog(r, SystemClock()).verify() == 3
    await r.aclose()
