"""What ``REDIS_URL`` names: one Redis, a Sentinel-watched master, or a Cluster.

Parsed once, at start, into a `Target`; a malformed URL is a `BadRedisUrl` whose message
says what to type instead (config.py turns it into a start-up error, not a traceback).

    redis://[user:pass@]host:port/db          one Redis (rediss:// for TLS, unix:// a socket)
    redis+sentinel://[user:pass@]h1:26379,h2,h3/<master>[/<db>][?wait=1&failover_s=15]
    redis+cluster://[user:pass@]h1:p1,h2:p2[?failover_s=15]
    rediss+sentinel://, rediss+cluster://     the same over TLS

The credentials are those of the Redis servers (an ACL user, deploy/redis/acl.md);
Sentinels are asked without them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qs, unquote, urlsplit

SENTINEL_PORT = 26379
REDIS_PORT = 6379
# How long a command keeps retrying across a failover before the person is told the store is
# unreachable. Above Sentinel's down-after-milliseconds plus its election (a few seconds when
# tuned as in deploy/), and above a Cluster's cluster-node-timeout.
FAILOVER_S = 15.0
WAIT_REPLICAS = 1  # Sentinel: writes wait for this many replicas (WAIT) before they are answered
WAIT_MS = 500  # ... for at most this long; past it the write stands on the master alone (logged)

_FORMS = (
    "redis://host:6379/0, rediss://host:6380/0, unix:///path/redis.sock, "
    "redis+sentinel://h1:26379,h2:26379,h3:26379/<master>/<db> or redis+cluster://h1:6379,h2:6379"
)


class BadRedisUrl(ValueError):
    pass


@dataclass(frozen=True)
class Target:
    kind: Literal["single", "sentinel", "cluster"]
    url: str  # as given (single: handed to redis-py whole)
    tls: bool = False
    nodes: tuple[tuple[str, int], ...] = ()  # sentinel: the Sentinels; cluster: startup nodes
    master: str = ""  # sentinel: the master's name
    db: int = 0
    username: str | None = None
    password: str | None = None
    wait_replicas: int = 0
    wait_ms: int = WAIT_MS
    failover_s: float = 0.0  # 0: no retry (one Redis: its outage is not a failover)

    def __str__(self) -> str:  # for logs and banners: never the password
        hosts = ",".join(f"{h}:{p}" for h, p in self.nodes)
        if self.kind == "sentinel":
            return f"sentinel {hosts} master {self.master!r} db {self.db}"
        if self.kind == "cluster":
            return f"cluster {hosts}"
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}"


def _nodes(netloc: str, default_port: int) -> tuple[tuple[str, int], ...]:
    hosts = netloc.rsplit("@", 1)[-1]
    out = []
    for item in hosts.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep:
            host, port = port, str(default_port)
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise BadRedisUrl(f"{item!r} is not host:port; {_FORMS}")
        out.append((host.strip("[]"), int(port)))
    return tuple(out)


def _number(query: dict[str, list[str]], name: str, default: float, lo: float, hi: float) -> float:
    if name not in query:
        return default
    raw = query.pop(name)[-1]
    try:
        value = float(raw)
    except ValueError:
        raise BadRedisUrl(f"?{name}={raw} is not a number (e.g. ?{name}={default:g})") from None
    if not lo <= value <= hi:
        raise BadRedisUrl(f"?{name}={raw} is out of range ({lo:g}..{hi:g})")
    return value


def parse(url: str) -> Target:
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("redis", "rediss", "unix"):
        return Target(kind="single", url=url, tls=scheme == "rediss")
    if not scheme:
        raise BadRedisUrl(f"no scheme (it is not echoed: it may hold a password); use {_FORMS}")
    if scheme not in ("redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster"):
        raise BadRedisUrl(f"unknown scheme {scheme}://; use {_FORMS}")
    parts = urlsplit(url)
    userinfo = parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else ""
    user, _, password = userinfo.partition(":")
    query = parse_qs(parts.query)
    common = {
        "url": url,
        "tls": scheme.startswith("rediss"),
        "username": unquote(user) or None,
        "password": unquote(password) or None,
        "failover_s": _number(query, "failover_s", FAILOVER_S, 0, 300),
    }
    path = [p for p in parts.path.split("/") if p]
    if scheme.endswith("sentinel"):
        if not path:
            raise BadRedisUrl(
                "a Sentinel URL names its master: redis+sentinel://h1:26379,h2:26379,h3:26379/<master>/<db>"
            )
        if len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
            raise BadRedisUrl(f"after the hosts comes /<master>/<db> with db a number, not {parts.path!r}")
        wait = int(_number(query, "wait", WAIT_REPLICAS, 0, 16))
        wait_ms = int(_number(query, "wait_ms", WAIT_MS, 1, 60_000))
        target = Target(
            kind="sentinel",
            nodes=_nodes(parts.netloc, SENTINEL_PORT),
            master=unquote(path[0]),
            db=int(path[1]) if len(path) == 2 else 0,
            wait_replicas=wait,
            wait_ms=wait_ms,
            **common,  # type: ignore[arg-type]
        )
    else:
        if path:
            raise BadRedisUrl(f"a Cluster has no db: redis+cluster://h1:6379,h2:6379 (drop {parts.path!r})")
        target = Target(kind="cluster", nodes=_nodes(parts.netloc, REDIS_PORT), **common)  # type: ignore[arg-type]
    if query:
        raise BadRedisUrl(f"unknown option ?{next(iter(query))}= (known: wait, wait_ms, failover_s)")
    return target
