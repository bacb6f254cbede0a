"""How `verify --pubkey` reads signed checkpoints (bot/audit/sign.py Expected): the fingerprints of
every checkpoint folded into one array and checked a page at a time. Pure: no Redis, the real
signer and verifier, pages of odd sizes so windows straddle them."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bot.audit import sign

N = 250
KEY = Ed25519PrivateKey.generate()


def hashes(n: int = N) -> list[str]:
    return [""] + [hashlib.sha256(str(i).encode()).hexdigest() for i in range(1, n + 1)]


def checkpoint(h: list[str], start: int, seq: int, key: Ed25519PrivateKey = KEY) -> dict:
    fps = "".join(h[i][: sign.FP_LEN] for i in range(start + 1, seq + 1))
    body = {"seq": seq, "hash": h[seq], "ts": "2026-12-04T00:00:00Z", "key_id": "k", "from": start, "fps": fps}
    return sign.sign(key, body)


def every_100(h: list[str]) -> list[dict]:
    return [checkpoint(h, lo, min(lo + 100, N)) for lo in range(0, N, 100)]


def first_bad(expected: sign.Expected, entries: list[dict], page: int) -> int | None:
    """As AuditLog.verify asks it: page by page, the first answer wins."""
    for lo in range(1, len(entries) + 1, page):
        if (bad := expected.first_bad(lo, entries[lo - 1 : lo - 1 + page])) is not None:
            return bad
    return None


def expected_of(checkpoints: list[dict]) -> sign.Expected:
    out = sign.Expected(KEY.public_key())
    for c in checkpoints:
        out.add(c)
    return out


@pytest.mark.parametrize("page", [1, 7, 64, 2000])
def test_a_whole_chain_passes_and_a_changed_entry_is_named_at_its_seq(page):
    h = hashes()
    entries = [{"hash": d} for d in h[1:]]
    # The same checkpoints twice, in any order (gathered from the log and the channel): no conflict.
    expected = expected_of(every_100(h)[::-1] + every_100(h))
    assert (expected.count, expected.newest) == (6, N)
    assert first_bad(expected, entries, page) is None
    entries[56] = {"hash": "0" * 64}  # seq 57
    assert first_bad(expected, entries, page) == 57
    entries[56] = {"hash": h[57]}
    entries[99] = {"hash": h[100][:8] + "0" * 56}  # its fingerprint agrees, the checkpoint's head does not
    assert first_bad(expected, entries, page) == 100


def test_seqs_no_checkpoint_fingerprints_are_left_to_the_chain():
    h = hashes()
    # The checkpoint covering 101..200 was lost: its entries are not compared, the others are.
    expected = expected_of([c for c in every_100(h) if c["seq"] != 200])
    entries = [{"hash": d} for d in h[1:]]
    entries[149] = {"hash": "0" * 64}
    assert first_bad(expected, entries, 64) is None
    entries[209] = {"hash": "0" * 64}
    assert first_bad(expected, entries, 64) == 210


def test_an_entry_without_a_hash_before_the_newest_checkpoint_is_named():
    h = hashes()
    expected = expected_of([checkpoint(h, 200, 250)])  # fingerprints only 201..250
    entries: list[dict] = [{"hash": d} for d in h[1:]]
    entries[19] = {"seq": None, "corrupt": b"{"}
    assert first_bad(expected, entries, 64) == 20


def test_two_signed_checkpoints_that_disagree_make_that_seq_fail_whatever_it_holds():
    h = hashes()
    other = list(h)
    other[42] = hashlib.sha256(b"another history").hexdigest()
    expected = expected_of([checkpoint(h, 0, 100), checkpoint(other, 40, 50)])
    entries = [{"hash": d} for d in h[1:]]
    assert first_bad(expected, entries, 64) == 42
    entries[41] = {"hash": other[42]}
    assert first_bad(expected, entries, 64) == 42


def test_a_checkpoint_another_key_signed_is_named_from_a_file_and_from_the_copies(tmp_path: Path):
    h = hashes()
    theirs = checkpoint(h, 100, 200, Ed25519PrivateKey.generate())
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(json.dumps(c) for c in [every_100(h)[0], theirs]) + "\n\n")
    expected = sign.read_checkpoints(path, KEY.public_key())
    assert (expected.count, asyncio.run(expected.signatures())) == (2, (200,))
    # Redis's copies: checked as they are added, and the one that fails adds nothing.
    copies = expected_of([every_100(h)[0], theirs])
    assert (copies.count, copies.newest, asyncio.run(copies.signatures())) == (2, 100, (200,))


def test_a_line_that_is_not_a_checkpoint_is_named_by_its_number(tmp_path: Path):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(every_100(hashes())[0]) + "\n\n" + '{"seq": "x"}\n')
    with pytest.raises(sign.CheckpointFileError, match=r"line 3 is not a checkpoint"):
        sign.read_checkpoints(path, KEY.public_key())


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in rows))
    return path


@pytest.mark.parametrize("n", [200, 1200])
def test_signatures_from_a_file_name_the_first_this_key_did_not_sign(n, tmp_path: Path):
    h = hashes(n)
    good = [checkpoint(h, s - 1, s) for s in range(1, n + 1)]
    pub = KEY.public_key()
    assert asyncio.run(sign.read_checkpoints(jsonl(tmp_path / "good", good), pub).signatures()) is None
    forged = list(good)
    forged[n - 150] = checkpoint(h, n - 151, n - 150, Ed25519PrivateKey.generate())  # another key's
    forged[n - 100] = dict(good[n - 100], hash="f" * 64)  # a signed one, edited
    read = sign.read_checkpoints(jsonl(tmp_path / "forged", forged), pub)
    assert asyncio.run(read.signatures()) == (n - 150,)  # the first in file order
    forged[n - 150] = dict(good[n - 150], sig="not base64!")
    read = sign.read_checkpoints(jsonl(tmp_path / "forged", forged), pub)
    assert asyncio.run(read.signatures()) == (good[n - 150]["seq"],)
    # Redis's copies (no file): each checked as it is added, the same answer.
    assert asyncio.run(expected_of(forged).signatures()) == (good[n - 150]["seq"],)


def test_a_checkpoints_file_swapped_after_it_was_read_is_refused_not_trusted(tmp_path: Path):
    h = hashes()
    path = jsonl(tmp_path / "c.jsonl", every_100(h))
    other = list(h)
    other[7] = hashlib.sha256(b"a forged history").hexdigest()
    read = sign.read_checkpoints(path, KEY.public_key())
    jsonl(path, every_100(other))  # also validly signed: only the change gives it away
    with pytest.raises(sign.CheckpointFileError, match="changed while it was read"):
        asyncio.run(read.signatures())
