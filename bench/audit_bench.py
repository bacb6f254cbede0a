"""`audit verify` (plain and `--pubkey`) and `audit export --incident` on long histories:
before vs after issue 26.

    python bench/audit_bench.py [--sizes 10000,1000000] [--no-cli]

Starts a private redis-server on a free loopback port. At each size it writes a chain in the
layout Firebreak used before issue 26 (one Redis list, plus the per-incident index of seqs:
tests/support/audit_chain.py, entries made with the real `entry_hash`/`canonical`), with 1% of
the entries in INC-1 and exactly 1,000 in INC-0 (the incidents exported), and signs a checkpoint every 100 entries (the
bot's cadence) with a fresh Ed25519 key, into a checkpoints file. Then, side by side:

- BEFORE: the code on main before issue 26, copied below (verify streams LRANGE pages of
  1,000 and hashes each entry by re-serialising it; `--pubkey` makes a second pass; export
  fetches each indexed entry with LINDEX, which walks the list);
- the migration (`firebreak migrate`'s step 2, bot/audit/migrations.py) moves the list into
  the hash by seq: timed, with Redis's memory before and after;
- AFTER: the code the CLI runs (`AuditLog.verify`, `sign.verify_signed`, `bot.cli.export`).

Each measurement runs in a fresh child process (none inherits another's heap): wall time and
the child's peak RSS (VmHWM, the whole process: interpreter, imports, connection) at the end,
and its peak just before the measurement. Before and after must agree (same verdict,
same exported bytes) or the bench fails. Export is also shown per line, the figure that must
not grow with the log. Unless `--no-cli`, it also times `python -m bot audit verify` and
`audit export --incident INC-1` end to end as subprocesses.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.audit import AuditLog, sign  # noqa: E402
from bot.audit.chain import GENESIS_HASH, collector_paused, entry_hash  # noqa: E402
from bot.audit.migrations import apply_by_seq  # noqa: E402
from bot.cli import export  # noqa: E402
from bot.clock import SystemClock  # noqa: E402
from bot.store import Keys, Redis, connect  # noqa: E402
from tests.support.audit_chain import every_hundredth, extend_chain  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402

INCIDENT = "INC-1"
FIXED = "INC-0"  # exactly FIXED_LINES entries at every size: export's per-line cost, like for like
FIXED_LINES = 1000
CASES = ("verify", "verify-pubkey", "export", "export-fixed")


def incident_of(size: int) -> Any:
    """1% of entries in INC-1, FIXED_LINES spread evenly in INC-0, the rest as every_hundredth."""
    rest = every_hundredth(INCIDENT)
    step = size // FIXED_LINES

    def of(seq: int) -> str | None:
        return FIXED if seq % step == 1 and seq % 100 != 0 else rest(seq)

    return of


# -- BEFORE: the implementation on main before issue 26 ------------------------------------------
# Copied from bot/audit/chain.py (ChainChecker, _parse, AuditLog.verify, AuditLog._incident_entries)
# and bot/audit/sign.py (verify_signed) at commit 0541faa, changed only from methods to functions;
# BeforeExpected is sign.Expected as it was at ed9bde0, before its flat fingerprint array.


def before_parse(raw: str | bytes) -> dict[str, Any]:
    try:
        e = json.loads(raw)
    except json.JSONDecodeError:
        e = None
    if not isinstance(e, dict):
        return {"seq": None, "corrupt": raw}
    return e


class BeforeChecker:
    def __init__(self) -> None:
        self.prev = GENESIS_HASH
        self.last = 0

    def feed(self, e: dict[str, Any]) -> int | None:
        expected_seq = self.last + 1
        seq = e.get("seq")
        if seq != expected_seq or e.get("prev_hash") != self.prev or e.get("hash") != entry_hash(e):
            return seq if isinstance(seq, int) else expected_seq
        self.prev = e["hash"]
        self.last = expected_seq
        return None

    def finish(self, head: tuple[int, str] | None) -> int | None:
        last = self.last
        if head is not None and head != (last, self.prev):
            return min(head[0], last) + 1 if head[0] != last else last
        return None


def before_head(raw: str | None) -> tuple[int, str]:
    if not raw:
        return (0, GENESIS_HASH)
    seq, digest = raw.split()[:2]
    return (int(seq), digest)


async def before_verify(r: Redis, batch: int = 1000) -> int | None:
    checker = BeforeChecker()
    start = 0
    while True:
        async with r.pipeline(transaction=True) as p:
            p.lrange(Keys.AUDIT_LOG, start, start + batch - 1)
            p.get(Keys.AUDIT_HEAD)
            chunk, raw_head = await p.execute()
        for raw in chunk:
            bad = checker.feed(before_parse(raw))
            if bad is not None:
                return bad
        start += len(chunk)
        if len(chunk) < batch:
            return checker.finish(before_head(raw_head))


async def before_scan(r: Redis, batch: int = 500) -> AsyncIterator[dict[str, Any]]:
    start = 0
    while True:
        chunk = await r.lrange(Keys.AUDIT_LOG, start, start + batch - 1)
        if not chunk:
            return
        for raw in chunk:
            yield before_parse(raw)
        start += len(chunk)


def before_read_checkpoints(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class BeforeExpected:
    """sign.Expected before the flat fingerprint array: each checkpoint's window as a string,
    looked up per entry with bisect."""

    def __init__(self, checkpoints: list[dict[str, Any]]) -> None:
        self.heads: dict[int, str] = {}
        windows: list[tuple[int, str]] = []
        self.newest = 0
        for c in checkpoints:
            seq = int(c["seq"])
            self.heads[seq] = c["hash"]
            self.newest = max(self.newest, seq)
            start, fps = c.get("from"), c.get("fps")
            if isinstance(start, int) and isinstance(fps, str) and fps:
                windows.append((start + 1, fps[: len(fps) // sign.FP_LEN * sign.FP_LEN]))
        windows.sort(key=lambda w: w[0])
        self._firsts = [w[0] for w in windows]
        self._windows = windows
        self._reach: list[int] = []
        for first, fps in windows:
            self._reach.append(max(first + len(fps) // sign.FP_LEN, self._reach[-1] if self._reach else 0))

    def bad(self, e: dict[str, Any], seq: int) -> bool:
        digest = e.get("hash")
        if not isinstance(digest, str):
            return seq <= self.newest
        want = self.heads.get(seq)
        if want is not None and digest != want:
            return True
        i = bisect.bisect_right(self._firsts, seq) - 1
        while i >= 0 and self._reach[i] > seq:
            first, fps = self._windows[i]
            at = (seq - first) * sign.FP_LEN
            if at + sign.FP_LEN <= len(fps) and not digest.startswith(fps[at : at + sign.FP_LEN]):
                return True
            i -= 1
        return False


async def before_verify_signed(r: Redis, pub: Ed25519PublicKey, checkpoints: list[dict[str, Any]]) -> int | None:
    for c in checkpoints:
        sign.check(pub, c)
    expected = BeforeExpected(checkpoints)
    signed_bad: int | None = None
    pos = 0
    async for e in before_scan(r):
        pos += 1
        if expected.bad(e, pos):
            signed_bad = pos
            break
    else:
        if pos < expected.newest:
            signed_bad = pos + 1
    chain_bad = await before_verify(r)
    found = [s for s in (signed_bad, chain_bad) if s is not None]
    return min(found) if found else None


async def before_export(r: Redis, incident: str, out: Any, batch: int = 500) -> None:
    index = Keys.audit_incident(incident)
    last, pos = 0, 0  # the bench's log is indexed from its first entry
    while True:
        page = await r.lrange(index, pos, pos + batch - 1)
        if not page:
            return
        pos += len(page)
        seqs = [s for s in map(int, page) if s > last]
        async with r.pipeline(transaction=False) as p:
            for s in seqs:
                p.lindex(Keys.AUDIT_LOG, s - 1)
            raws = await p.execute()
        for s, raw in zip(seqs, raws, strict=True):
            e = before_parse(raw) if raw is not None else {}
            if e.get("seq") != s or e.get("incident") != incident:
                raise RuntimeError(f"index mismatch at {s}")
            out.write(json.dumps(e, sort_keys=True, ensure_ascii=False) + "\n")  # bot/cli.py export
            last = s


# -- one measurement (the child process) -----------------------------------------------------------


class Digest:
    """Stands in for stdout: counts and hashes what would be printed, keeps none of it."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.lines = 0

    def write(self, s: str) -> None:
        self.h.update(s.encode())
        self.lines += s.count("\n")


def peak_rss_kb() -> int:
    """This process's peak RSS (VmHWM). Not ru_maxrss: Linux carries that over from the parent
    across fork and exec, so every child would report the bench's own peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # not Linux: the best there is


async def measure(case: str, when: str, url: str, pubkey: str, checkpoints: str) -> dict[str, Any]:
    r = connect(url)
    log = AuditLog(r, SystemClock())
    await r.ping()  # the connection exists before the baseline is taken
    out = Digest()
    rss_before = peak_rss_kb()
    start = time.perf_counter()
    result: Any
    # "after" runs as the CLI does (bot/cli.py): the cycle collector paused for the read.
    with collector_paused() if when == "after" else contextlib.nullcontext():
        if case == "verify":
            result = await (before_verify(r) if when == "before" else log.verify())
        elif case == "verify-pubkey":
            pub = sign.load_public_key(Path(pubkey))  # reading the checkpoints is part of the command
            if when == "before":
                result = await before_verify_signed(r, pub, before_read_checkpoints(Path(checkpoints)))
            else:
                result = await sign.verify_signed(log, sign.read_checkpoints(Path(checkpoints), pub))
        else:
            inc = INCIDENT if case == "export" else FIXED
            await (before_export(r, inc, out) if when == "before" else export(log, inc, out))
            result = out.h.hexdigest()
        wall = time.perf_counter() - start
    rss_after = peak_rss_kb()
    await r.aclose()
    return {"wall": wall, "rss_before_kb": rss_before, "rss_peak_kb": rss_after, "result": result, "lines": out.lines}


def child(case: str, when: str, url: str, keydir: Path) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", case, "--when", when, "--url", url, "--keydir", str(keydir)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{case} ({when}) failed:\n{done.stderr}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def cli_run(url: str, *args: str) -> tuple[float, int, str]:
    """`python -m bot audit ...` end to end: wall time and the process's peak RSS (KB)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "REDIS_", "FIREBREAK_"))}
    start = time.perf_counter()
    # bot.cli.main as `python -m bot` runs it, printing its peak RSS (VmHWM) last on stderr.
    run = (
        "import sys; from bot.cli import main; rc = main(sys.argv[1:]); "
        "print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0], file=sys.stderr); sys.exit(rc)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", run, "audit", *args],
        cwd=ROOT,
        env={**env, "REDIS_URL": url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"firebreak audit {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return wall, int(proc.stderr.strip().splitlines()[-1].split()[1]), proc.stderr


# -- the run ---------------------------------------------------------------------------------------


def mb(kb: float) -> str:
    return f"{kb / 1024:,.0f} MB" if kb >= 10 * 1024 else f"{kb / 1024:.1f} MB"


def secs(s: float) -> str:
    return f"{s:.2f} s" if s < 10 else f"{s:.1f} s"


async def build(url: str, size: int, keydir: Path) -> tuple[float, list[str]]:
    """The old layout of ``size`` entries, and a checkpoint signed every 100 entries (JSON lines)."""
    r = connect(url)
    await r.flushall()
    start = time.perf_counter()
    await extend_chain(r, size, incident_of(size), legacy=True)
    took = time.perf_counter() - start
    assert await r.llen(Keys.AUDIT_LOG) == size
    key = sign.load_private_key(keydir / "audit-key.pem")
    kid = sign.key_id(key.public_key())
    lines: list[str] = []
    fps: list[str] = []
    seq = 0
    async for e in before_scan(r, 10_000):
        seq += 1
        fps.append(e["hash"][: sign.FP_LEN])
        if seq % sign.EVERY_ENTRIES == 0 or seq == size:
            body = {"seq": seq, "hash": e["hash"], "ts": e["ts"], "key_id": kid, "from": seq - len(fps)}
            lines.append(json.dumps(sign.sign(key, {**body, "fps": "".join(fps)})) + "\n")
            fps = []
    await r.aclose()
    return took, lines


async def migrate(url: str) -> tuple[float, int, int]:
    """Step 2 of `firebreak migrate`: wall time, Redis used_memory before and after (bytes)."""
    r = connect(url)
    before = int((await r.info("memory"))["used_memory"])
    start = time.perf_counter()
    await apply_by_seq(r)
    took = time.perf_counter() - start
    after = int((await r.info("memory"))["used_memory"])
    await r.aclose()
    return took, before, after


def run(sizes: list[int], with_cli: bool) -> None:
    srv = RedisServer().start()
    keydir = Path(tempfile.mkdtemp(prefix="fb-audit-bench-"))
    sign.keygen(keydir)
    rows: list[str] = []
    per_line: list[str] = []
    notes: list[str] = []
    cli_rows: list[str] = []
    try:
        for size in sizes:
            took, ckpts = asyncio.run(build(srv.url, size, keydir))
            (keydir / "checkpoints.jsonl").write_text("".join(ckpts), encoding="utf-8")
            print(f"built {size:,} entries (old layout) in {took:.1f} s; measuring", file=sys.stderr, flush=True)
            before = {case: child(case, "before", srv.url, keydir) for case in CASES}
            moved, mem_before, mem_after = asyncio.run(migrate(srv.url))
            notes.append(f"| {size:,} | {secs(moved)} | {mem_before / 2**20:,.0f} MB → {mem_after / 2**20:,.0f} MB |")
            after = {case: child(case, "after", srv.url, keydir) for case in CASES}
            for case in CASES:
                b, a = before[case], after[case]
                if not case.startswith("export") and (b["result"] is not None or a["result"] is not None):
                    raise RuntimeError(f"{case}: the built chain does not verify: {b['result']} / {a['result']}")
                if case.startswith("export") and ((b["result"], b["lines"]) != (a["result"], a["lines"])):
                    raise RuntimeError(f"before and after export differ: {b['lines']} vs {a['lines']} lines")
                name = {"verify": "`audit verify`", "verify-pubkey": "`audit verify --pubkey --checkpoints`"}.get(
                    case, f"`audit export --incident {INCIDENT if case == 'export' else FIXED}` ({a['lines']:,} lines)"
                )
                rows.append(
                    f"| {size:,} | {name} | {secs(b['wall'])} → {secs(a['wall'])} | {b['wall'] / a['wall']:,.1f}× "
                    f"| {mb(b['rss_peak_kb'])} → {mb(a['rss_peak_kb'])} | {mb(a['rss_before_kb'])} |"
                )
                if case.startswith("export"):
                    us_b, us_a = (x["wall"] / x["lines"] * 1e6 for x in (b, a))
                    inc = INCIDENT if case == "export" else FIXED
                    per_line.append(f"| {size:,} | {inc}: {a['lines']:,} | {us_b:,.0f} µs → {us_a:,.0f} µs |")
                print(rows[-1], file=sys.stderr, flush=True)
            if with_cli:
                vw, vrss, _ = cli_run(srv.url, "verify")
                pw, prss, _ = cli_run(
                    srv.url, "verify", "--pubkey", str(keydir / "audit-key.pub.pem"),
                    "--checkpoints", str(keydir / "checkpoints.jsonl"),
                )  # fmt: skip
                ew, erss, _ = cli_run(srv.url, "export", "--incident", INCIDENT)
                cli_rows.append(
                    f"| {size:,} | {secs(vw)}, {mb(vrss)} | {secs(pw)}, {mb(prss)} | {secs(ew)}, {mb(erss)} |"
                )
    finally:
        srv.stop()
    print("\n| entries | command | wall before → after | speed-up | peak RSS before → after | at start (after) |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("\n| entries | export lines | per line before → after |\n|---|---|---|")
    print("\n".join(per_line))
    print("\n| entries | migration (list → hash by seq) | Redis used_memory before → after |\n|---|---|---|")
    print("\n".join(notes))
    if with_cli:
        print("\n| entries | `audit verify` (after): wall, peak RSS | `verify --pubkey` | `export --incident` |")
        print("|---|---|---|---|")
        print("\n".join(cli_rows))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="10000,1000000", help="comma-separated chain lengths, ascending")
    p.add_argument("--no-cli", action="store_true", help="skip timing `python -m bot audit ...` end to end")
    p.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    p.add_argument("--when", choices=("before", "after"), help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--keydir", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        keydir = Path(args.keydir)
        pub, ckpts = str(keydir / "audit-key.pub.pem"), str(keydir / "checkpoints.jsonl")
        print(json.dumps(asyncio.run(measure(args.child, args.when, args.url, pub, ckpts))))
        return
    try:
        sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        p.error("--sizes takes chain lengths separated by commas, e.g. --sizes 10000,100000")
    if not sizes or sizes != sorted(sizes) or sizes[0] < 100:
        p.error("--sizes takes ascending chain lengths of at least 100, e.g. --sizes 10000,100000")
    run(sizes, not args.no_cli)


if __name__ == "__main__":
    main()
