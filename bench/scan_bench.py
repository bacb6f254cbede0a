"""Secret scans on crafted text: Python's `re` (before issue 24) vs RE2 (bot/redact.py), side by side.

    python bench/scan_bench.py [--repeat 5] [--skip-re]

No Redis, no network: pure scanning. For each input, every secret pattern (the built-in ones
and policies/comms.yaml's) is run the way each engine runs them: BEFORE compiles them with `re`
and searches the whole text, as bot/comms/secrets.py did; AFTER is `bot.redact.find`, RE2 with
its 40 KB windows. Inputs:

- `a-a-a-…` 40 KB: the quadratic case for the "password in a URL" pattern (each `a` after a `-`
  starts a word, and `[a-z][a-z0-9+.-]*` runs to the end of the text before failing);
- the same 40 KB followed by a real password URL (found, past the first window);
- 40 KB of ordinary prose; and a 400 KB message (ten windows).

Prints each engine's median ms per input and the kinds each found (they must agree, or the
bench exits 1). Target: AFTER under 20 ms on every 40 KB input (prints MISSED otherwise, exit 1).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable

from bot import redact
from bot.policy.loader import load_policy

TARGET_MS = 20.0


def inputs() -> dict[str, str]:
    flood = "a-" * 20_000
    prose = ("The router in the chat cell shed load at 03:05 after a config push; " * 600)[:40_000]
    return {
        "a-a-a-… 40 KB (quadratic on re)": flood,
        "a-a-a-… 40 KB + password URL": flood + " https://admin:hunter22@db.internal/x",
        "prose 40 KB": prose,
        "prose 400 KB": prose * 10,
    }


def timed(fn: Callable[[], list[str]], repeat: int) -> tuple[float, list[str]]:
    runs, found = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        found = fn()
        runs.append((time.perf_counter() - t) * 1000)
    return statistics.median(runs), found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-re", action="store_true", help="RE2 only (the `re` flood case takes seconds)")
    args = ap.parse_args()
    extra = [(p.kind, p.pattern) for p in load_policy().comms.secret_patterns]
    pairs = [*redact.BUILTIN_PATTERNS, *extra]
    before = [(kind, re.compile(p)) for kind, p in pairs]
    redact.add_patterns(extra)

    def with_re(text: str) -> list[str]:
        return list(dict.fromkeys(kind for kind, rx in before if rx.search(text)))

    print(f"{len(pairs)} patterns; median of {args.repeat} runs\n")
    print("| input | chars | re (before) ms | RE2 (after) ms | found |")
    print("|---|---:|---:|---:|---|")
    failed = False
    for name, text in inputs().items():
        after_ms, after = timed(lambda text=text: redact.find(text), args.repeat)
        if args.skip_re:
            shown_re, agree = "skipped", True
        else:
            re_ms, found_re = timed(lambda text=text: with_re(text), 1 if "quadratic" in name else args.repeat)
            shown_re, agree = f"{re_ms:,.1f}", found_re == after
        missed = len(text) <= redact.MAX_SCAN + 100 and after_ms >= TARGET_MS
        flag = (" MISSED" if missed else "") + ("" if agree else " DISAGREE")
        failed |= missed or not agree
        print(f"| {name} | {len(text):,} | {shown_re} | {after_ms:,.2f}{flag} | {', '.join(after) or '-'} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
