"""`audit verify` and `audit export --incident` on long histories: before vs after issue 9.

    python bench/audit_bench.py [--sizes 10000,100000,1000000] [--no-cli] [--tracemalloc]

Starts a private redis-server on a free loopback port and builds one chain that grows
through the sizes (entries made with the real `entry_hash`/`canonical`, RPUSHed in big
pipelines with the per-incident index and the head: tests/support/audit_chain.py). 1% of
the entries belong to INC-1, the incident exported.

At each size, side by side:
- BEFORE: the implementation as it was before issue 9, copied below (load the whole
  chain into a list and check it; scan the whole log for one incident's entries);
- AFTER: the code the CLI runs (`AuditLog.verify` streaming pages through a
  ChainChecker; `bot.cli.export` reading the incident's index).

Each measurement runs in a fresh child process (so one cannot inherit another's heap):
wall time, and memory as the child's peak RSS (ru_maxrss) at the end, printed next to the
child's peak just before the measurement (after imports and the Redis connection: what
any run costs). `--tracemalloc`
adds tracemalloc's peak from a second, separate child per measurement (slower: tracing
costs time). Before and after must agree (same verdict, same exported bytes) or the
bench fails. Unless `--no-cli`, it also times `python -m bot audit verify` and `audit
export --incident INC-1` end to end as subprocesses (peak RSS of the whole process).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.audit import AuditLog  # noqa: E402
from bot.audit.chain import GENESIS_HASH, entry_hash  # noqa: E402
from bot.cli import export  # noqa: E402
from bot.clock import SystemClock  # noqa: E402
from bot.store import Keys, Redis, connect  # noqa: E402
from tests.support.audit_chain import every_hundredth, extend_chain  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402

INCIDENT = "INC-1"
CASES = ("verify-before", "verify-after", "export-before", "export-after")


# -- BASELINE: the implementation before issue 9 -------------------------------------------
# Copied from bot/audit/chain.py (AuditLog.entries, AuditLog.verify, verify_entries) and
# bot/cli.py (the export loop) at commit 46e31d3, changed only from methods to functions.


async def before_entries(r: Redis, incident: str | None = None, batch: int = 500) -> AsyncIterator[dict[str, Any]]:
    start = 0
    while True:
        chunk = await r.lrange(Keys.AUDIT_LOG, start, start + batch - 1)
        if not chunk:
            return
        for raw in chunk:
            try:
                e = json.loads(raw)
            except json.JSONDecodeError:
                e = {"seq": None, "corrupt": raw}
            if incident is None or e.get("incident") == incident:
                yield e
        start += batch


def before_verify_entries(entries: Iterable[dict[str, Any]], head: tuple[int, str] | None = None) -> int | None:
    prev = GENESIS_HASH
    expected_seq = 1
    for e in entries:
        seq = e.get("seq")
        if seq != expected_seq or e.get("prev_hash") != prev or e.get("hash") != entry_hash(e):
            return seq if isinstance(seq, int) else expected_seq
        prev = e["hash"]
        expected_seq += 1
    last = expected_seq - 1
    if head is not None and head != (last, prev):
        return min(head[0], last) + 1 if head[0] != last else last
    return None


async def before_verify(r: Redis) -> int | None:
    raw = await r.get(Keys.AUDIT_HEAD)
    head = (int(raw.split()[0]), raw.split()[1]) if raw else (0, GENESIS_HASH)
    return before_verify_entries([e async for e in before_entries(r)], head)


async def before_export(r: Redis, incident: str, out: Any) -> None:
    async for e in before_entries(r, incident):
        out.write(json.dumps(e, sort_keys=True, ensure_ascii=False) + "\n")


# -- one measurement (the child process) -----------------------------------------------------


class Digest:
    """Stands in for stdout: counts and hashes what would be printed, keeps none of it."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.lines = 0

    def write(self, s: str) -> None:
        self.h.update(s.encode())
        self.lines += s.count("\n")


async def measure(case: str, url: str, trace: bool) -> dict[str, Any]:
    r = connect(url)
    log = AuditLog(r, SystemClock())
    await r.ping()  # the connection exists before the baseline is taken
    out = Digest()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    if case == "verify-before":
        result: Any = await before_verify(r)
    elif case == "verify-after":
        result = await log.verify()
    elif case == "export-before":
        await before_export(r, INCIDENT, out)
        result = out.h.hexdigest()
    else:
        await export(log, INCIDENT, out)
        result = out.h.hexdigest()
    wall = time.perf_counter() - start
    traced = tracemalloc.get_traced_memory()[1] if trace else None
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    await r.aclose()
    return {
        "wall": wall,
        "rss_before_kb": rss_before,
        "rss_peak_kb": rss_after,
        "traced": traced,
        "result": result,
        "lines": out.lines,
    }


def child(case: str, url: str, trace: bool) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", case, "--url", url] + (["--trace-child"] if trace else [])
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{case} failed:\n{done.stderr}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def cli_run(url: str, *args: str) -> tuple[float, int, str]:
    """`python -m bot audit ...` end to end: wall time and the process's peak RSS (KB)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "REDIS_", "FIREBREAK_"))}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "audit", *args],
        cwd=ROOT,
        env={**env, "REDIS_URL": url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"firebreak audit {' '.join(args)} exited {proc.returncode}: {err}")
    return wall, usage.ru_maxrss, err


# -- the run -----------------------------------------------------------------------------------


def mb(kb: int) -> str:
    return f"{kb / 1024:,.0f} MB" if kb >= 10 * 1024 else f"{kb / 1024:.1f} MB"


def secs(s: float) -> str:
    return f"{s:.2f} s" if s < 10 else f"{s:.1f} s"


async def build(url: str, size: int) -> float:
    r = connect(url)
    start = time.perf_counter()
    await extend_chain(r, size, every_hundredth(INCIDENT))
    took = time.perf_counter() - start
    assert await r.llen(Keys.AUDIT_LOG) == size
    await r.aclose()
    return took


def run(sizes: list[int], with_cli: bool, trace: bool) -> None:
    srv = RedisServer().start()
    rows: list[str] = []
    cli_rows: list[str] = []
    idle: list[int] = []
    try:
        for size in sizes:
            took = asyncio.run(build(srv.url, size))
            print(f"built {size:,} entries in {took:.1f} s; measuring", file=sys.stderr, flush=True)
            got = {case: child(case, srv.url, False) for case in CASES}
            if trace:
                for case in CASES:
                    got[case]["traced"] = child(case, srv.url, True)["traced"]
            vb, va, eb, ea = (got[c] for c in CASES)
            if vb["result"] is not None or va["result"] is not None:
                raise RuntimeError(f"the built chain does not verify: {vb['result']} / {va['result']}")
            if (eb["result"], eb["lines"]) != (ea["result"], ea["lines"]) or ea["lines"] != size // 100:
                raise RuntimeError(f"before and after export differ: {eb['lines']} vs {ea['lines']} lines")
            for name, b, a in (("verify", vb, va), (f"export --incident ({ea['lines']:,} lines)", eb, ea)):
                mem = f"{mb(b['rss_peak_kb'])} → {mb(a['rss_peak_kb'])}"
                idle.extend([b["rss_before_kb"], a["rss_before_kb"]])
                traced = f" | {b['traced'] / 1e6:,.1f} → {a['traced'] / 1e6:,.1f} MB" if trace else ""
                rows.append(
                    f"| {size:,} | {name} | {secs(b['wall'])} → {secs(a['wall'])} | "
                    f"{b['wall'] / a['wall']:,.1f}× | {mem}{traced} |"
                )
            print(rows[-2] + "\n" + rows[-1], file=sys.stderr, flush=True)
            if with_cli:
                vw, vrss, _ = cli_run(srv.url, "verify")
                ew, erss, err = cli_run(srv.url, "export", "--incident", INCIDENT)
                if "predate" in err:
                    raise RuntimeError(f"export scanned instead of using the index: {err}")
                cli_rows.append(f"| {size:,} | {secs(vw)}, {mb(vrss)} | {secs(ew)}, {mb(erss)} |")
    finally:
        srv.stop()
    traced_head = " | tracemalloc peak before → after" if trace else ""
    print(f"\n| entries | command | wall before → after | speed-up | peak RSS before → after{traced_head} |")
    print("|---|---|---|---|---|" + ("---|" if trace else ""))
    print("\n".join(rows))
    span = mb(min(idle)) if mb(min(idle)) == mb(max(idle)) else f"{mb(min(idle))}–{mb(max(idle))}"
    print(f"\nA measuring child's peak RSS before it starts (imports, connection): {span}.")
    if with_cli:
        print("\n| entries | `firebreak audit verify` (after): wall, process peak RSS | `audit export --incident` |")
        print("|---|---|---|")
        print("\n".join(cli_rows))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated chain lengths, ascending")
    p.add_argument("--no-cli", action="store_true", help="skip timing `python -m bot audit ...` end to end")
    p.add_argument("--tracemalloc", action="store_true", help="also report tracemalloc peaks (a second child each)")
    p.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--trace-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(measure(args.child, args.url, args.trace_child))))
        return
    try:
        sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        p.error("--sizes takes chain lengths separated by commas, e.g. --sizes 10000,100000")
    if not sizes or sizes != sorted(sizes) or sizes[0] < 100:
        p.error("--sizes takes ascending chain lengths of at least 100, e.g. --sizes 10000,100000")
    run(sizes, not args.no_cli, args.tracemalloc)


if __name__ == "__main__":
    main()
