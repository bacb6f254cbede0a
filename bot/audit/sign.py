"""Signed checkpoints of the audit chain (DESIGN §9, docs/security-model.md: "Audit log").

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
import json
import os
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from bot import logs
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


def check(pub: Ed25519PublicKey, ckpt: dict[str, Any]) -> None:
    """Raise BadCheckpoint unless ``ckpt`` is signed by ``pub``."""
    try:
        sig = base64.b64decode(str(ckpt.get("sig", "")), validate=True)
        pub.verify(sig, _CONTEXT + canonical({k: ckpt.get(k) for k in _SIGNED}))
    except (InvalidSignature, binascii.Error, ValueError):
        raise BadCheckpoint(ckpt.get("seq")) from None


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


def read_checkpoints(path: Path) -> list[dict[str, Any]]:
    """Every checkpoint in a JSON Lines file (blank lines skipped); a line that is not one is an error."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointFileError(f"can't read the checkpoints file {path}: {exc}") from None
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            ckpt = _as_checkpoint(json.loads(line))
        except json.JSONDecodeError:
            ckpt = None
        if ckpt is None:
            raise CheckpointFileError(f"{path} line {n} is not a checkpoint (a JSON object with seq, hash, ts, sig)")
        out.append(ckpt)
    return out


class Expected:
    """What signed checkpoints say the chain holds: each checkpoint's head hash and the
    fingerprints of the entries before it. Checked entry by entry as verify streams the log."""

    def __init__(self, checkpoints: Iterable[dict[str, Any]]) -> None:
        self.heads: dict[int, str] = {}
        # Each checkpoint's fingerprints as it came (first seq, the string), sorted by first seq:
        # not one dict item per entry, which at 10^6 entries cost ~150 MB.
        windows: list[tuple[int, str]] = []
        self.newest = 0
        for c in checkpoints:
            seq = int(c["seq"])
            self.heads[seq] = c["hash"]
            self.newest = max(self.newest, seq)
            start, fps = c.get("from"), c.get("fps")
            if isinstance(start, int) and isinstance(fps, str) and fps:
                windows.append((start + 1, fps[: len(fps) // FP_LEN * FP_LEN]))
        windows.sort(key=lambda w: w[0])
        self._firsts = [w[0] for w in windows]
        self._windows = windows
        # _reach[i]: the end (exclusive seq) furthest out among windows 0..i, so a look back stops
        # at once when no earlier window reaches the seq (the bot's windows do not overlap).
        self._reach: list[int] = []
        for first, fps in windows:
            self._reach.append(max(first + len(fps) // FP_LEN, self._reach[-1] if self._reach else 0))

    def bad(self, e: dict[str, Any], seq: int) -> bool:
        """Does the entry at position ``seq`` contradict a checkpoint?"""
        digest = e.get("hash")
        if not isinstance(digest, str):
            return seq <= self.newest
        want = self.heads.get(seq)
        if want is not None and digest != want:
            return True
        # Every checkpoint that fingerprints the entry must agree with it: the windows that start
        # at or before ``seq`` and reach past it.
        i = bisect.bisect_right(self._firsts, seq) - 1
        while i >= 0 and self._reach[i] > seq:
            first, fps = self._windows[i]
            at = (seq - first) * FP_LEN
            if at + FP_LEN <= len(fps) and not digest.startswith(fps[at : at + FP_LEN]):
                return True
            i -= 1
        return False

    def short(self, last: int) -> int | None:
        """The first missing seq if a chain ending at ``last`` was cut back below a checkpoint."""
        return last + 1 if last < self.newest else None


async def verify_signed(audit: AuditLog, pub: Ed25519PublicKey, checkpoints: list[dict[str, Any]]) -> int | None:
    """The first bad seq against the hash chain and the signed checkpoints, or None.
    Raises BadCheckpoint for a checkpoint this key did not sign (checked before the chain)."""
    for c in checkpoints:
        check(pub, c)
    # One pass: the chain and the checkpoints are checked entry by entry as the log streams by
    # (the head is read with each page, so appends by running replicas are no false alarm).
    return await audit.verify(signed=Expected(checkpoints))


async def stored_checkpoints(redis: Redis) -> list[dict[str, Any]]:
    """The copies kept in Redis: a convenience (whoever writes Redis can delete them)."""
    out = []
    for raw in await redis.lrange(Keys.AUDIT_CHECKPOINTS, 0, -1):
        try:
            c = _as_checkpoint(json.loads(raw))
        except json.JSONDecodeError:
            c = None
        # Only the bot writes these: anything else there was put there, and is reported as such.
        out.append(c if c is not None else {"seq": "? (a copy in Redis that is not a checkpoint)", "sig": ""})
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
    claim on it. Each checkpoint goes to a log line, the audit channel if set, and a Redis copy."""

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

    async def _last(self) -> tuple[int, float]:
        """(seq, epoch seconds) of the newest checkpoint: the Redis copy when this key signed it
        (another replica's), else this process's own. A copy that does not verify is ignored, so
        whoever writes Redis cannot stop the signing by planting a checkpoint far ahead."""
        raw = text(await self._r.lindex(Keys.AUDIT_CHECKPOINTS, -1))
        if raw:
            try:
                copy = json.loads(raw)
                check(self._pub, copy)
                if copy["seq"] > self._mine[0]:
                    return int(copy["seq"]), float(copy.get("at", 0.0))
            except (json.JSONDecodeError, TypeError, KeyError, ValueError, BadCheckpoint):
                log.warning("audit_checkpoint_copy_ignored", reason="not a checkpoint signed by this key")
        return self._mine

    async def maybe(self, *, force: bool = False) -> dict[str, Any] | None:
        """Sign the head if it is due (``force``: whenever the chain moved); the checkpoint, or None."""
        async with self._lock:
            raw = text(await self._r.get(Keys.AUDIT_HEAD))
            if not raw:
                return None
            seq, digest = int(raw.split()[0]), raw.split()[1]
            last, at = await self._last()
            now = self._clock.now()
            if seq <= last:
                return None
            if not force and seq - last < EVERY_ENTRIES and now - at < EVERY_SECONDS:
                return None
            claim = Keys.audit_checkpoint_claim(seq)
            if not await self._r.set(claim, self.key_id, nx=True, ex=CLAIM_TTL_S):
                return None  # another replica signs this one
            # Bounded: with the Redis copies gone, the window would otherwise be the whole log.
            start = max(last, seq - MAX_FPS)
            rows = await self._r.hmget(Keys.AUDIT_ENTRIES, list(range(start + 1, seq + 1)))
            fps = "".join(str(_hash_of(e) if e is not None else "")[:FP_LEN].ljust(FP_LEN, "-") for e in rows)
            ckpt = sign(
                self._key,
                {"seq": seq, "hash": digest, "ts": iso(now), "key_id": self.key_id, "from": start, "fps": fps},
            )
            self._mine = (seq, now)
            await self._publish(ckpt, now)
            return ckpt

    async def _publish(self, ckpt: dict[str, Any], now: float) -> None:
        # The log line first: it is the copy outside Redis that needs nothing else to be up.
        log.info("audit_checkpoint", **ckpt)
        await self._r.rpush(Keys.AUDIT_CHECKPOINTS, json.dumps({**ckpt, "at": now}))
        if self._post is not None and self._channel:
            line = json.dumps(ckpt, sort_keys=True, separators=(",", ":"))
            await self._post(self._channel, f"audit checkpoint seq {ckpt['seq']}\n```{line}```")

    async def run(self) -> None:
        """Check every ``poll`` seconds until ``stop``; a failed check is logged and tried again."""
        while not self._stopping.is_set():
            try:
                await self.maybe()
            except Exception:
                log.exception("audit_checkpoint_failed")
            try:
                async with asyncio.timeout(self._poll):
                    await self._stopping.wait()
            except TimeoutError:
                pass

    async def final(self) -> dict[str, Any] | None:
        """At shutdown: stop the loop and sign whatever the chain holds now."""
        self._stopping.set()
        return await self.maybe(force=True)
