"""Signed checkpoints of the audit chain (docs/security-model.md: "Audit log").

The hash chain proves order, not authorship: whoever writes Redis can rewrite it from any
entry to the head. So the running bot signs the chain head with an Ed25519 key Redis never
holds, and publishes each checkpoint outside Redis (a log line, the audit channel). A
checkpoint also carries a short fingerprint (8 hex digits of the hash) of every entry since
the previous one, so `verify --pubkey` names the first rewritten entry, not just the window.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import bisect
import hashlib
import itertools
import json
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import orjson
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from bot import logs, metrics
from bot.audit.chain import AuditLog, canonical
from bot.clock import Clock, iso
from bot.store import Keys, Redis, text

log = logs.get(__name__)

EVERY_ENTRIES = 100  # a checkpoint at least this often (entries)...
EVERY_SECONDS = 60.0  # ...or this often (seconds), whichever comes first, when the chain moved
FP_LEN = 8  # hex digits of each entry's hash in a checkpoint's fingerprints
_CONTEXT = b"firebreak-audit-checkpoint/v1\n"  # the signature is over this and the canonical body
_SIGNED = ("seq", "hash", "ts", "key_id", "from", "fps")
MAX_FPS = 1000  # at most this many entries' fingerprints in one checkpoint
CLAIM_TTL_S = 86_400  # a claim only has to outlive the race between replicas signing one seq
# What verify accepts as "within the cadence": entries waiting for a checkpoint, between two given
# checkpoints or after the newest one, at most this many or this long. Above the signer's own
# figures by what an honest signer can add: entries appended during one poll, a poll, a slow Redis,
# and the minute between exporting the checkpoints and running verify.
COVER_ENTRIES = EVERY_ENTRIES + EVERY_ENTRIES // 2
COVER_SECONDS = 2 * EVERY_SECONDS
SKEW_S = 5.0  # a checkpoint time further ahead of this process's clock than this is not believed


class KeyFileError(Exception):
    """A key file that is missing, unreadable or not the right kind of key: one line."""


class CheckpointFileError(Exception):
    """A checkpoints file that cannot be read or has a line that is not a checkpoint."""


class BadCheckpoint(Exception):
    """A checkpoint whose signature does not verify under the given public key."""

    def __init__(self, seq: object) -> None:
        super().__init__(f"checkpoint at seq {seq} has a bad signature (not signed by this key)")
        self.seq = seq


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"can't read the {what} {path}: {exc.strerror or exc}") from None


def load_private_key(path: Path) -> Ed25519PrivateKey:
    data = _read(path, "audit signing key (FIREBREAK_AUDIT_KEY)")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{path} is not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path} is a {type(key).__name__.lstrip('_')}, not an Ed25519 private key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    data = _read(path, "public key")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise KeyFileError(f"{path} is not a PEM public key ({str(exc).splitlines()[0][:80]})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{path} is a {type(key).__name__.lstrip('_')}, not an Ed25519 public key")
    return key


def key_id(pub: Ed25519PublicKey) -> str:
    raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def keygen(directory: Path) -> tuple[Path, Path]:
    """Write audit-key.pem (0600, created exclusively: never overwrites) and audit-key.pub.pem."""
    priv_path, pub_path = directory / "audit-key.pem", directory / "audit-key.pub.pem"
    if not directory.is_dir():
        raise KeyFileError(f"{directory} is not a directory")
    for p in (priv_path, pub_path):
        if p.exists():
            raise KeyFileError(f"{p} already exists: not overwriting a key")
    key = Ed25519PrivateKey.generate()
    priv = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    pub = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    try:
        fd = os.open(priv_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # 0600 from the start
        with os.fdopen(fd, "wb") as f:
            f.write(priv)
        with open(pub_path, "xb") as f:
            f.write(pub)
    except OSError as exc:
        raise KeyFileError(f"can't write the key pair in {directory}: {exc.strerror or exc}") from None
    return priv_path, pub_path


def sign(key: Ed25519PrivateKey, body: dict[str, Any]) -> dict[str, Any]:
    doc = {k: body[k] for k in _SIGNED}
    return {**doc, "sig": base64.b64encode(key.sign(_CONTEXT + canonical(doc))).decode()}


def signed_by(pub: Ed25519PublicKey, ckpt: dict[str, Any]) -> bool:
    """Is ``ckpt`` signed by ``pub``?"""
    try:
        sig = base64.b64decode(str(ckpt.get("sig", "")), validate=True)
        pub.verify(sig, _CONTEXT + canonical({k: ckpt.get(k) for k in _SIGNED}))
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


def check(pub: Ed25519PublicKey, ckpt: dict[str, Any]) -> None:
    """Raise BadCheckpoint unless ``ckpt`` is signed by ``pub``."""
    if not signed_by(pub, ckpt):
        raise BadCheckpoint(ckpt.get("seq"))


def signed_time(ckpt: dict[str, Any]) -> float | None:
    """The checkpoint's `ts` (signed, second precision) as epoch seconds, or None."""
    return parse_ts(ckpt.get("ts"))


def parse_ts(value: object) -> float | None:
    try:
        return datetime.strptime(str(value), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _as_checkpoint(obj: object) -> dict[str, Any] | None:
    if not isinstance(obj, dict):
        return None
    # A bare checkpoint, or the bot's own `audit_checkpoint` log line: the same fields, plus the
    # line's own (event, level, timestamp), which the signature does not cover.
    ok = (
        isinstance(obj.get("seq"), int)
        and isinstance(obj.get("hash"), str)
        and isinstance(obj.get("ts"), str)
        and isinstance(obj.get("sig"), str)
    )
    return obj if ok else None


def _lines(f: BinaryIO, digest: Any) -> Iterator[tuple[int, dict[str, Any] | None]]:
    """(line number, the checkpoint or None when the line is not one) of each line that is not
    blank, every byte read also fed to ``digest``."""
    for n, line in enumerate(f, 1):
        digest.update(line)
        if not line.strip():
            continue
        try:
            yield n, _as_checkpoint(orjson.loads(line))
        except orjson.JSONDecodeError:
            yield n, None


def _files(path: Path) -> list[Path]:
    """The file, or every file of the directory (not hidden, by name: the days a log pipeline kept)."""
    try:
        if not path.is_dir():
            return [path]
        found = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    except OSError as exc:
        raise CheckpointFileError(f"can't read the checkpoints directory {path}: {exc.strerror or exc}") from None
    if not found:
        raise CheckpointFileError(f"the checkpoints directory {path} holds no file")
    return found


def read_checkpoints(path: Path, pub: Ed25519PublicKey) -> Expected:
    """Every checkpoint in a JSON Lines file, or in every file of a directory (blank lines skipped),
    read a line at a time and kept compactly; a line that is not a checkpoint is an error. The
    signatures are checked from the files again by ``Expected.signatures`` (so none of the signed
    bytes is held here)."""
    digest = hashlib.sha256()
    files = _files(path)
    out = Expected(pub, files)
    for one in files:
        try:
            with one.open("rb") as f:
                for n, ckpt in _lines(f, digest):
                    if ckpt is None:
                        raise CheckpointFileError(
                            f"{one} line {n} is not a checkpoint (a JSON object with seq, hash, ts, sig)"
                        )
                    out.add(ckpt)
        except OSError as exc:
            raise CheckpointFileError(f"can't read the checkpoints file {one}: {exc.strerror or exc}") from None
    out.read_digest = digest.hexdigest()
    return out


def _file_unsigned(pub: Ed25519PublicKey, paths: Sequence[Path]) -> tuple[tuple[object] | None, str]:
    """(seq,) of the first checkpoint in the files whose signature this key did not make, or
    None; and the SHA-256 of the bytes read (the caller compares it with its own read)."""
    digest, bad = hashlib.sha256(), None
    for path in paths:
        with path.open("rb") as f:
            for _, ckpt in _lines(f, digest):
                if bad is None and ckpt is not None and not signed_by(pub, ckpt):
                    bad = (ckpt.get("seq"),)
    return bad, digest.hexdigest()


_UNSET = b"\0" * FP_LEN  # no checkpoint fingerprints this seq
_CONFLICT = b"\1" * FP_LEN  # two checkpoints disagree about it: no entry can match
_NO_HASH = b"\2" * FP_LEN  # what an entry without a usable hash compares as: never a fingerprint
_MASK = bytes([0] + [0xFF] * 255)  # translate(): 0x00 where nothing is expected, 0xff elsewhere


class Expected:
    """What signed checkpoints say the chain holds: each checkpoint's head hash and one flat
    array of the fingerprints they give (FP_LEN bytes per seq, zeros where none does), checked a
    page at a time as verify streams the log: one big-integer compare per page, not per entry
    (at 10^6 entries that is 8 MB and a fraction of a second)."""

    def __init__(self, pub: Ed25519PublicKey, paths: Sequence[Path] | None = None) -> None:
        self._pub = pub
        self.heads: dict[int, str] = {}
        self.times: dict[int, float] = {}  # seq -> the checkpoint's signed time (the earliest given)
        self._opened: dict[int, float | None] = {}  # seq after a checkpoint -> that entry's ts, as streamed
        self._head_seqs: list[int] = []  # sorted lazily (heads come in any order)
        self._fps = bytearray()
        self.newest = 0
        self.count = 0
        # From a file, the signatures are checked by signatures() from the file, alongside the
        # stream; until then the figures are taken as given, and a bad one voids the verdict.
        # Otherwise (Redis's copies) each is checked as it is added.
        self._paths = list(paths) if paths is not None else None
        self.read_digest = ""  # SHA-256 of the files as read_checkpoints read them
        self._unsigned: tuple[object] | None = None  # (seq,) of the first this key did not sign

    def add(self, c: dict[str, Any]) -> None:
        """Take one checkpoint (its signature: see ``signatures``)."""
        self.count += 1
        if self._paths is None and not signed_by(self._pub, c):
            self._unsigned = self._unsigned or (c.get("seq"),)
            return
        if not isinstance(c.get("seq"), int) or not isinstance(c.get("hash"), str):
            return  # not a checkpoint the bot wrote: its signature fails, and it says nothing
        seq = int(c["seq"])
        self.heads[seq] = c["hash"]
        if (t := signed_time(c)) is not None:
            self.times[seq] = min(t, self.times.get(seq, t))
        self._head_seqs = []
        self.newest = max(self.newest, seq)
        start, fps = c.get("from"), c.get("fps")
        if not (isinstance(start, int) and start >= 0 and isinstance(fps, str) and fps.isascii()):
            return
        raw = fps[: len(fps) // FP_LEN * FP_LEN].encode()
        at, end = start * FP_LEN, start * FP_LEN + len(raw)  # entry start+1 sits at byte start*FP_LEN
        if len(self._fps) < end:
            self._fps.extend(bytes(end - len(self._fps)))
        old = bytes(self._fps[at:end])
        if old == bytes(len(raw)):
            self._fps[at:end] = raw
            return
        # Overlapping checkpoints (the same ones from two sources, say): where they disagree, no
        # entry can satisfy both, so that seq is marked as one that always fails.
        for i in range(0, len(raw), FP_LEN):
            was, now = old[i : i + FP_LEN], raw[i : i + FP_LEN]
            if was == _UNSET:
                self._fps[at + i : at + i + FP_LEN] = now
            elif was != now:
                self._fps[at + i : at + i + FP_LEN] = _CONFLICT

    async def signatures(self) -> tuple[object] | None:
        """(seq,) of a checkpoint this key did not sign, or None. From a file, checked in a thread
        while the caller streams the chain: cryptography lets go of the GIL for part of each check,
        and a thread needs no second interpreter (a spawned worker process was slower end to end
        on two cores, and held 57 MB more)."""
        if self._paths is None:
            return self._unsigned
        where = str(self._paths[0]) if len(self._paths) == 1 else f"in {self._paths[0].parent}"
        try:
            bad, seen = await asyncio.to_thread(_file_unsigned, self._pub, self._paths)
        except OSError as exc:
            raise CheckpointFileError(f"can't read the checkpoints file {where}: {exc.strerror or exc}") from None
        if seen != self.read_digest:
            # What was checked must be what was read, or a file swapped in between would pass.
            raise CheckpointFileError(f"the checkpoints file {where} changed while it was read: run verify again")
        return bad

    def first_bad(self, lo: int, entries: list[dict[str, Any]]) -> int | None:
        """The first seq in ``entries`` (seqs lo, lo+1, ...) that contradicts a checkpoint."""
        n = len(entries)
        found: list[int] = []
        if not self._head_seqs:
            self._head_seqs = sorted(self.heads)
            # The first entry after each checkpoint but the newest: its time, read as the chain
            # streams by, is when that stretch began to wait for the next checkpoint (gaps()).
            self._opened = {s + 1: self._opened.get(s + 1) for s in self._head_seqs[:-1]}
        # Only this page's stretches (a bisect, not a walk over every checkpoint each page); every
        # checkpoint but the newest opens one, at the seq after it.
        heads, top = self._head_seqs, max(len(self._head_seqs) - 1, 0)
        for k in range(bisect.bisect_left(heads, lo - 1, hi=top), bisect.bisect_left(heads, lo + n - 1, hi=top)):
            seq = heads[k] + 1
            self._opened[seq] = parse_ts(entries[seq - lo].get("ts"))
        i = bisect.bisect_left(self._head_seqs, lo)
        while i < len(self._head_seqs) and (seq := self._head_seqs[i]) < lo + n:
            if entries[seq - lo].get("hash") != self.heads[seq]:
                found.append(seq)
                break
            i += 1
        want = bytes(self._fps[(lo - 1) * FP_LEN : (lo - 1 + n) * FP_LEN])
        if want.strip(b"\0"):
            got = b"".join(_fp(e) for e in entries)[: len(want)]
            mask = want.translate(_MASK)
            if int.from_bytes(got, "big") & int.from_bytes(mask, "big") != int.from_bytes(want, "big"):
                for k in range(0, len(want), FP_LEN):
                    w = want[k : k + FP_LEN]
                    if w != _UNSET and got[k : k + FP_LEN] != w:
                        found.append(lo + k // FP_LEN)
                        break
        if lo <= self.newest:
            # An entry with no hash at all, at or before a checkpoint, is a rewrite too.
            for k, e in enumerate(entries[: self.newest - lo + 1]):
                if not isinstance(e.get("hash"), str):
                    found.append(lo + k)
                    break
        return min(found) if found else None

    def short(self, last: int) -> int | None:
        """The first missing seq if a chain ending at ``last`` was cut back below a checkpoint."""
        return last + 1 if last < self.newest else None

    def gaps(self) -> list[str]:
        """After a verify that passed (so the entries' times are the signed chain's): each stretch
        between two given checkpoints longer than the cadence, in entries or in time. A rewrite
        there, before the later checkpoint, would have been signed by it."""
        out = []
        seqs = sorted(self.heads)
        for a, b in itertools.pairwise(seqs):
            began, signed = self._opened.get(a + 1), self.times.get(b)
            waited = signed - began if began is not None and signed is not None else None
            if b - a > COVER_ENTRIES or (waited is not None and waited > COVER_SECONDS):
                took = f", {waited:.0f} s" if waited is not None else ""
                out.append(
                    f"entries seq {a + 1}-{b} waited for a checkpoint ({b - a} entries{took};"
                    f" the cadence allows {COVER_ENTRIES} entries, {COVER_SECONDS:.0f} s)"
                )
        return out

    def tail(self, head: int, now: float) -> str | None:
        """Why the newest given checkpoint does not cover a chain whose head is ``head`` within the
        cadence, or None. ``now`` is the verifier's clock: the head's own time is Redis's to forge."""
        if head <= self.newest:
            return None
        if not self.heads:
            return f"no checkpoint given, and the head is seq {head}"
        age = now - self.times[self.newest] if self.newest in self.times else None
        if head - self.newest > COVER_ENTRIES or age is None or age > COVER_SECONDS:
            when = f"signed {age:.0f} s ago" if age is not None else "with no readable time"
            return (
                f"the newest checkpoint given is seq {self.newest} ({when}) and the head is seq {head}:"
                f" {head - self.newest} entries are past it, more than the cadence allows"
                f" ({COVER_ENTRIES} entries, {COVER_SECONDS:.0f} s); take newer checkpoints and run verify again"
            )
        return None


def _fp(e: dict[str, Any]) -> bytes:
    digest = e.get("hash")
    if isinstance(digest, str) and len(digest) >= FP_LEN and digest.isascii():
        return digest[:FP_LEN].encode()
    return _NO_HASH


async def verify_signed(audit: AuditLog, checkpoints: Expected) -> int | None:
    """The first bad seq against the hash chain and the signed checkpoints, or None.
    Raises BadCheckpoint for a checkpoint this key did not sign: then no verdict on the chain
    is given, as the checkpoints it was held to are not all the key's."""
    signatures = asyncio.create_task(checkpoints.signatures())
    try:
        # One pass: the chain and the checkpoints are checked page by page as the log streams by
        # (the head is read with each page, so appends by running replicas are no false alarm).
        verdict = await audit.verify(signed=checkpoints)
    finally:
        unsigned = await signatures
    if unsigned is not None:
        raise BadCheckpoint(unsigned[0])
    return verdict


async def stored_checkpoints(redis: Redis, pub: Ed25519PublicKey) -> Expected:
    """The copies kept in Redis: a convenience (whoever writes Redis can delete them)."""
    out = Expected(pub)
    for raw in await redis.lrange(Keys.AUDIT_CHECKPOINTS, 0, -1):
        try:
            c = _as_checkpoint(json.loads(raw))
        except json.JSONDecodeError:
            c = None
        # Only the bot writes these: anything else there was put there, and is reported as such.
        out.add(c if c is not None else {"seq": "? (a copy in Redis that is not a checkpoint)", "sig": ""})
    return out


def _hash_of(raw: str | bytes) -> str:
    try:
        e = json.loads(raw)
    except json.JSONDecodeError:
        return ""
    return str(e.get("hash", "")) if isinstance(e, dict) else ""


Publish = Callable[[str, str], Awaitable[object]]  # (channel, text): the chat port's post


class Checkpointer:
    """Signs the chain head when EVERY_ENTRIES entries or EVERY_SECONDS seconds have passed since
    the last checkpoint (any replica's), and at shutdown. One replica signs a given seq: a SET NX
    claim on it. Each checkpoint goes to a log line, the audit channel if set, and a Redis copy.

    Whoever writes Redis can still hold the claims so nobody signs: each check sets
    ``firebreak_audit_checkpoint_age_seconds``, how long this process has seen the head ahead of
    the newest checkpoint, and deploy/components/monitoring alerts when it outgrows the cadence."""

    def __init__(
        self,
        redis: Redis,
        clock: Clock,
        key: Ed25519PrivateKey,
        *,
        post: Publish | None = None,
        channel: str | None = None,
        poll: float = 1.0,
    ) -> None:
        self._r, self._clock, self._key = redis, clock, key
        self._pub = key.public_key()
        self.key_id = key_id(self._pub)
        self._mine: tuple[int, float] = (0, 0.0)  # the newest checkpoint this process signed
        self._post, self._channel, self._poll = post, channel, poll
        self._lock = asyncio.Lock()  # one checkpoint at a time from this process
        self._stopping = asyncio.Event()
        self._unsigned_since: float | None = None  # when this process first saw the head unsigned

    async def _last(self, now: float) -> tuple[int, float]:
        """(seq, epoch seconds) of the newest checkpoint: the Redis copy when this key signed it
        (another replica's), else this process's own. A copy that does not verify is ignored, so
        whoever writes Redis cannot stop the signing by planting a checkpoint far ahead. Its time
        is the signed `ts`, never a field beside it; a time ahead of this clock (a replica's
        skewed clock) is not waited for: the next checkpoint is due at once."""
        raw = text(await self._r.lindex(Keys.AUDIT_CHECKPOINTS, -1))
        if raw:
            try:
                copy = json.loads(raw)
                check(self._pub, copy)
                if copy["seq"] > self._mine[0]:
                    at = signed_time(copy)
                    return int(copy["seq"]), at if at is not None and at <= now + SKEW_S else 0.0
            except (json.JSONDecodeError, TypeError, KeyError, ValueError, BadCheckpoint):
                log.warning("audit_checkpoint_copy_ignored", reason="not a checkpoint signed by this key")
        return self._mine

    def _age(self, now: float, unsigned: bool) -> None:
        if not unsigned:
            self._unsigned_since = None
        elif self._unsigned_since is None:
            self._unsigned_since = now
        metrics.AUDIT_CHECKPOINT_AGE.set(0.0 if self._unsigned_since is None else now - self._unsigned_since)

    async def maybe(self, *, force: bool = False) -> dict[str, Any] | None:
        """Sign the head if it is due (``force``: whenever the chain moved); the checkpoint, or None."""
        async with self._lock:
            raw = text(await self._r.get(Keys.AUDIT_HEAD))
            now = self._clock.now()
            if not raw:
                self._age(now, unsigned=False)
                return None
            seq, digest = int(raw.split()[0]), raw.split()[1]
            last, at = await self._last(now)
            self._age(now, unsigned=seq > last)
            if seq <= last:
                return None
            if not force and seq - last < EVERY_ENTRIES and now - at < EVERY_SECONDS:
                return None
            claim = Keys.audit_checkpoint_claim(seq)
            if not await self._r.set(claim, self.key_id, nx=True, ex=CLAIM_TTL_S):
                return None  # another replica signs this one (or a held claim: the age shows it)
            # Bounded: with the Redis copies gone, the window would otherwise be the whole log.
            start = max(last, seq - MAX_FPS)
            rows = await self._r.hmget(Keys.AUDIT_ENTRIES, list(range(start + 1, seq + 1)))
            fps = "".join(str(_hash_of(e) if e is not None else "")[:FP_LEN].ljust(FP_LEN, "-") for e in rows)
            ckpt = sign(
                self._key,
                {"seq": seq, "hash": digest, "ts": iso(now), "key_id": self.key_id, "from": start, "fps": fps},
            )
            self._mine = (seq, now)
            await self._publish(ckpt)
            self._age(now, unsigned=False)
            return ckpt

    async def _publish(self, ckpt: dict[str, Any]) -> None:
        # The log line first: it is the copy outside Redis that needs nothing else to be up.
        log.info("audit_checkpoint", **ckpt)
        # The copy is the checkpoint alone: its time is the signed `ts` (an unsigned field beside
        # it was whatever Redis said, and a future one stopped the signing).
        await self._r.rpush(Keys.AUDIT_CHECKPOINTS, json.dumps(ckpt))
        if self._post is not None and self._channel:
            line = json.dumps(ckpt, sort_keys=True, separators=(",", ":"))
            await self._post(self._channel, f"audit checkpoint seq {ckpt['seq']}\n```{line}```")

    async def run(self) -> None:
        """Check every ``poll`` seconds until ``stop``; a failed check is logged and tried again."""
        while not self._stopping.is_set():
            try:
                await self.maybe()
            except Exception:  # the signing loop outlives any one failed check (Redis, Slack or a bug)
                log.exception("audit_checkpoint_failed")
                if self._unsigned_since is not None:  # a check that fails signs nothing either
                    metrics.AUDIT_CHECKPOINT_AGE.set(self._clock.now() - self._unsigned_since)
            try:
                async with asyncio.timeout(self._poll):
                    await self._stopping.wait()
            except TimeoutError:
                pass

    async def final(self) -> dict[str, Any] | None:
        """At shutdown: stop the loop and sign whatever the chain holds now."""
        self._stopping.set()
        return await self.maybe(force=True)
