"""`firebreak serve | console | audit export | audit verify [--pubkey] | audit keygen | audit reindex |
postmortem INC-n | report | migrate`."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from redis.exceptions import RedisError

from bot import logs
from bot.config import ConfigError, load_settings
from bot.policy import PolicyError
from bot.schema import MigrationTimeout, SchemaTooNew

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from bot.audit import AuditLog
    from bot.audit.sign import Expected


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="firebreak", description="Chat-ops incident bot for ML platforms")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run the Slack app (HTTP mode, or Socket Mode with SLACK_APP_TOKEN)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=3000)
    c = sub.add_parser("console", help="try Firebreak in the terminal against an embedded Slack emulator")
    c.add_argument("--user", default="you", help="who you are at start: a name (alice) or a Slack user id (U2)")
    c.add_argument("--script", help="run the lines of this file, then exit (non-interactive)")
    c.add_argument(
        "--drill", metavar="NAME", help="replay a game-day drill on the demo fleet (`--drill list` names them)"
    )
    c.add_argument(
        "--speed", type=_speed, default=None, help="drill speed: 1 is real time (default), 10 ten times faster"
    )
    # Never from REDIS_URL or KUBECONFIG: an operator exports those for production (bot/console/main.py).
    c.add_argument(
        "--redis", metavar="URL", help="keep state in this Redis instead of memory (the console then runs no timers)"
    )
    c.add_argument(
        "--kubeconfig", metavar="FILE", type=Path, help="pull levers on these clusters (needs --real-clusters)"
    )
    c.add_argument("--real-clusters", action="store_true", help="yes, --kubeconfig names real clusters: act on them")
    a = sub.add_parser("audit", help="the hash-chained audit log")
    asub = a.add_subparsers(dest="audit_cmd", required=True)
    e = asub.add_parser("export", help="print entries as JSON Lines")
    e.add_argument("--incident")
    v = asub.add_parser(
        "verify", help="check the chain: exit 1 names the first bad entry, 3 when no signed checkpoint vouches for it"
    )
    v.add_argument("--pubkey", type=Path, help="PEM Ed25519 public key: also check the signed checkpoints")
    v.add_argument(
        "--checkpoints",
        type=Path,
        help="JSON Lines of checkpoints (or the bot's audit_checkpoint log lines), or a directory of such files",
    )
    kg = asub.add_parser("keygen", help="write an Ed25519 key pair for FIREBREAK_AUDIT_KEY into DIR")
    kg.add_argument("dir", type=Path)
    asub.add_parser("reindex", help="index entries written before the per-incident index existed (once)")
    ev = sub.add_parser("evidence", help="print what each lever found before it acted, as JSON Lines, with digests")
    ev.add_argument("incident", help="INC-n")
    ev.add_argument("request", nargs="?", help="REQ-n (default: every lever of the incident)")
    pm = sub.add_parser("postmortem", help="print an incident's postmortem as Markdown")
    pm.add_argument("incident", help="INC-n")
    rp = sub.add_parser("report", help="resolved incidents by root-cause class: counts, median TTD/TTR, GPU-hours")
    rp.add_argument("--since", help="only incidents resolved on or after this date (YYYY-MM-DD, UTC)")
    mg = sub.add_parser(
        "migrate", help="bring the state in REDIS_URL to this release's schema (serve does it at start)"
    )
    mg.add_argument("--dry-run", action="store_true", help="list what would change, change nothing")
    p.add_argument(
        "--log-level", default=None, help="default INFO (the console writes its log to a file and says where)"
    )
    return p


def _speed(text: str) -> float:
    # The upper bound is the drill runner's (fbworld); bot.console.main checks it.
    try:
        speed = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a number") from None
    if not 0 < speed < float("inf"):
        raise argparse.ArgumentTypeError(f"more than 0 (got {text[:20]})")
    return speed


def _console(args: argparse.Namespace) -> int:
    """`console [--drill NAME [--speed N]] [--redis URL] [--kubeconfig FILE --real-clusters]`: the console
    and its world live in bot.console and fbworld."""
    from bot.console import WORLD_MISSING, world_installed

    if not world_installed():
        print(f"firebreak: {WORLD_MISSING}", file=sys.stderr)
        return 2
    from bot.console.main import main

    return main(
        args.user,
        args.script,
        args.drill,
        args.speed,
        redis_url=args.redis,
        kubeconfig=args.kubeconfig,
        real_clusters=args.real_clusters,
    )


async def export(log: AuditLog, incident: str | None, out: TextIO) -> None:
    """`audit export` (bench/audit_bench.py times this same function): streams JSON Lines."""
    if incident is not None and (older := await log.unindexed()):
        print(
            f"firebreak: entries 1-{older} predate the incident index, so they are scanned"
            " (run `firebreak audit reindex` once to index them)",
            file=sys.stderr,
        )
    async for e in log.entries(incident):
        out.write(json.dumps(e, sort_keys=True, ensure_ascii=False) + "\n")


def _keygen(directory: Path) -> int:
    from bot.audit import sign

    try:
        priv, pub = sign.keygen(directory)
    except sign.KeyFileError as exc:
        print(f"firebreak: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {priv} (private, 0600: FIREBREAK_AUDIT_KEY) and {pub} (public: audit verify --pubkey)")
    return 0


def _fail(text: str) -> int:
    print(f"firebreak: {text}", file=sys.stderr)
    return 2


def _id(text: object, shape: re.Pattern[str], example: str) -> str | None:
    """`text` as an id of `shape` (upper-cased), or None after saying what to type instead."""
    got = str(text).strip().upper()
    if shape.fullmatch(got):
        return got
    kind = {"INC": "an incident", "REQ": "a request"}[example.split("-")[0]]
    _fail(f"{str(text)[:40]!r} is not {kind} id: use {example.split('-')[0]}-<n>, like {example}")
    return None


def _no_redis(what: str) -> int:
    # An embedded store here would be new and empty: "nothing found" would be a lie.
    return _fail(f"REDIS_URL is not set: there {what} (set it to the Redis the server uses)")


async def _audit(args: argparse.Namespace) -> int:
    from bot.audit import AuditLog, sign
    from bot.audit.chain import AuditIndexError, OldLayout, collector_paused
    from bot.clock import SystemClock
    from bot.store import Keys, connect

    pub = None
    given: Expected | None = None
    if args.audit_cmd == "verify":
        # All input is read before Redis is: a bad file changes nothing and says so in one line.
        if args.checkpoints is not None and args.pubkey is None:
            print("firebreak: --checkpoints needs --pubkey (the key they were signed with)", file=sys.stderr)
            return 2
        try:
            if args.pubkey is not None:
                pub = await asyncio.to_thread(sign.load_public_key, args.pubkey)
            if args.checkpoints is not None and pub is not None:  # --pubkey is required with it (above)
                given = await asyncio.to_thread(sign.read_checkpoints, args.checkpoints, pub)
        except (sign.KeyFileError, sign.CheckpointFileError) as exc:
            print(f"firebreak: {exc}", file=sys.stderr)
            return 2
    settings = load_settings()
    if not settings.redis_url:
        return _no_redis("is no audit log to read")
    r = connect(settings.redis_url, ca_file=settings.redis_ca_file)
    log = AuditLog(r, SystemClock())
    try:
        with collector_paused():  # a short-lived process reading up to millions of entries
            if args.audit_cmd == "export":
                await export(log, args.incident, sys.stdout)
                return 0
            if args.audit_cmd == "reindex":
                n = await log.reindex()
                print(f"audit index: indexed {n} older entries" if n else "audit index: already covers every entry")
                return 0
            if pub is not None:
                return await _verify_signed(log, pub, given)
            bad = await log.verify()
            if bad is not None:
                print(f"audit chain BROKEN at seq {bad}", file=sys.stderr)
                return 1
            n = await log.count()
            # The hash chain alone passes a rewrite of the whole chain: where the bot signs, only
            # checkpoints kept outside Redis can say OK. Redis's copies are a hint (a forger can
            # delete them); FIREBREAK_AUDIT_KEY where verify runs is one Redis can't take away.
            copies = await log.redis.llen(Keys.AUDIT_CHECKPOINTS)
            if settings.firebreak_audit_key is not None or copies:
                why = (
                    "FIREBREAK_AUDIT_KEY is set"
                    if settings.firebreak_audit_key
                    else f"Redis holds {copies} checkpoints"
                )
                print(
                    f"audit chain NOT PROVEN ({n} entries hash-linked): {why}, so the bot signs checkpoints, and the"
                    " hash chain alone passes a rewrite of the whole chain: run `firebreak audit verify --pubkey"
                    " audit-key.pub.pem --checkpoints FILE|DIR` with the checkpoints kept outside Redis",
                    file=sys.stderr,
                )
                return NOT_PROVEN
            print(f"audit chain OK ({n} entries)")
            return 0
    except AuditIndexError as exc:
        print(f"firebreak: {exc}: the log was altered (run `firebreak audit verify`)", file=sys.stderr)
        return 1
    except OldLayout as exc:
        print(f"firebreak: {exc}", file=sys.stderr)
        return 2
    except RedisError as exc:
        print(f"firebreak: can't read the audit log from REDIS_URL ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    finally:
        await r.aclose()


NOT_PROVEN = 3  # the chain is whole as far as it was checked, but nothing outside Redis vouches for all of it


async def _verify_signed(log: AuditLog, pub: Ed25519PublicKey, given: Expected | None) -> int:
    """`verify --pubkey`: the chain against checkpoints signed by ``pub``: the file's (or the
    directory's), else Redis's copies, which can name a break but never prove the chain whole."""
    from bot.audit import sign

    checkpoints = given if given is not None else await sign.stored_checkpoints(log.redis, pub)
    where = "the checkpoints file" if given is not None else "Redis"
    try:
        bad = await sign.verify_signed(log, checkpoints)
    except sign.BadCheckpoint as exc:
        print(f"audit checkpoint BAD: {exc}", file=sys.stderr)
        return 1
    except sign.CheckpointFileError as exc:
        print(f"firebreak: {exc}", file=sys.stderr)
        return 2
    newest = checkpoints.newest
    if bad is not None:
        print(
            f"audit chain BROKEN at seq {bad} (checked against {checkpoints.count} signed checkpoints)", file=sys.stderr
        )
        return 1
    n = await log.count()
    if given is None:
        print(
            f"audit chain NOT PROVEN ({n} entries): no checkpoint from outside Redis was given, and Redis's"
            f" {checkpoints.count} copies (up to seq {newest}) are whoever writes Redis's to delete or trim:"
            " pass --checkpoints FILE|DIR (the bot's audit_checkpoint log lines, or the audit channel's posts)",
            file=sys.stderr,
        )
        return NOT_PROVEN
    head, _ = await log.head()
    problems = checkpoints.gaps()
    if (tail := checkpoints.tail(head, time.time())) is not None:
        problems.append(tail)
    if problems:
        print(f"audit chain NOT PROVEN ({n} entries): " + "; ".join(problems), file=sys.stderr)
        return NOT_PROVEN
    print(f"audit chain OK ({n} entries; signed up to seq {newest}, {checkpoints.count} checkpoints from {where})")
    return 0


async def _postmortem(args: argparse.Namespace) -> int:
    """`postmortem INC-n` and `report [--since]`: the app's own services (bot/runtime.py) on REDIS_URL,
    with PROMETHEUS_URL for the impact start, exactly as `/incident postmortem` builds them."""
    from bot.ids import INCIDENT_ID
    from bot.postmortem import document, report

    since = None
    if args.cmd == "report" and args.since is not None:
        try:
            since = report.parse_since(args.since)
        except report.BadDate as exc:
            print(f"firebreak: {exc}", file=sys.stderr)
            return 2
    inc_id = ""
    if args.cmd == "postmortem":
        found = _id(args.incident, INCIDENT_ID, "INC-3")
        if found is None:
            return 2
        inc_id = found
    settings = load_settings()
    if not settings.redis_url:
        return _no_redis("are no incidents to read")
    from bot.runtime import build_services, close  # the whole app: imported once the input is known good

    svc = build_services(settings)
    try:
        if args.cmd == "report":
            sys.stdout.write(await report.report(svc, since))
            return 0
        try:
            sys.stdout.write(await document.build(svc, inc_id))
        except document.NotFound:
            print(f"firebreak: {inc_id} does not exist", file=sys.stderr)
            return 2
        return 0
    except RedisError as exc:
        print(f"firebreak: can't read the incidents from REDIS_URL ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    finally:
        await close(svc)
        await svc.redis.aclose()


async def _evidence(args: argparse.Namespace) -> int:
    """`evidence INC-n [REQ-n]`: the records levers/evidence.py kept, one JSON line each, with the
    SHA-256 recomputed from what is stored (compare it with the lever.apply audit entry's)."""
    from bot.ids import INCIDENT_ID, REQUEST_ID
    from bot.store import connect
    from levers import evidence

    inc_id = _id(args.incident, INCIDENT_ID, "INC-3")
    if inc_id is None:
        return 2
    req = None
    if args.request is not None and (req := _id(args.request, REQUEST_ID, "REQ-7")) is None:
        return 2
    settings = load_settings()
    if not settings.redis_url:
        return _no_redis("is no evidence to read")
    r = connect(settings.redis_url, ca_file=settings.redis_ca_file)
    try:
        records = await evidence.read(r, inc_id, req)
    except RedisError as exc:
        print(f"firebreak: can't reach REDIS_URL ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    finally:
        await r.aclose()
    if not records:
        what = f"{req} of {inc_id}" if req else inc_id
        print(f"firebreak: no evidence for {what} (a lever keeps it when it applies)", file=sys.stderr)
        return 2
    for rec in records:
        sys.stdout.write(json.dumps(rec, sort_keys=True, ensure_ascii=False) + "\n")
    return 0


async def _migrate(args: argparse.Namespace) -> int:
    """`migrate [--dry-run]`: what `serve` does at start, or the list of what it would do."""
    from bot import schema
    from bot.audit import AuditLog
    from bot.clock import SystemClock
    from bot.runtime import MIGRATIONS
    from bot.store import connect

    settings = load_settings()
    if not settings.redis_url:
        return _no_redis("is no state to migrate")
    r = connect(settings.redis_url, ca_file=settings.redis_ca_file)
    try:
        if args.dry_run:
            print("\n".join(await schema.dry_run(r, MIGRATIONS)))
            return 0
        ran = await schema.ensure(r, MIGRATIONS, schema.audited(AuditLog(r, SystemClock())))
        print(f"schema version {len(MIGRATIONS)}: " + (f"ran {', '.join(ran)}" if ran else "nothing to migrate"))
        return 0
    except (schema.SchemaTooNew, schema.MigrationTimeout) as exc:
        print(f"firebreak: {exc}", file=sys.stderr)
        return 2
    except RedisError as exc:
        print(f"firebreak: can't reach REDIS_URL ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    finally:
        await r.aclose()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.cmd == "console":
        from bot.console import LOG_PATH

        # The console prints the app's replies; its logs would interleave with them, so they go to a file.
        log_file = open(LOG_PATH, "a", encoding="utf-8")  # noqa: SIM115 - open for the process's life
        logs.configure(args.log_level or "INFO", json=False, stream=log_file)
    else:
        logs.configure(args.log_level or "INFO", json=args.cmd == "serve")
    try:
        if args.cmd == "serve":
            from bot.serve import serve

            asyncio.run(serve(load_settings(), args.host, args.port))
            return 0
        if args.cmd == "console":
            return _console(args)
        if args.cmd == "migrate":
            return asyncio.run(_migrate(args))
        if args.cmd == "evidence":
            return asyncio.run(_evidence(args))
        if args.cmd in ("postmortem", "report"):
            return asyncio.run(_postmortem(args))
        if args.audit_cmd == "keygen":  # files only: no Redis, no event loop
            return _keygen(args.dir)
        return asyncio.run(_audit(args))
    except (ConfigError, PolicyError, SchemaTooNew, MigrationTimeout) as exc:
        print(f"firebreak: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
