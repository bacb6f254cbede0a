"""Real Redis topologies on loopback for the tests: a Sentinel-watched master with a replica
and three Sentinels, and a three-master Cluster. Debian's redis-server runs both (a Sentinel
is `redis-server <conf> --sentinel`, which is what Debian's redis-sentinel package starts).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from tests.support.ports import free_port
from tests.support.redis_server import RedisServer

MASTER = "fbmaster"
DOWN_AFTER_MS = 1000  # Sentinel calls the master down after this long without an answer


def _wait(what: str, check: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if check():  # type: ignore[operator]
                return
        except redis.RedisError as exc:
            last = exc
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what} ({last!r})")


class SentinelSetup:
    """A master, a replica and three Sentinels (quorum 2) watching them."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="fb-sentinel-"))
        self.master = RedisServer()
        self.replica = RedisServer()
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.sentinels: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{MASTER}/0"

    def start(self) -> SentinelSetup:
        self.master.start()
        self.replica.extra = ("--replicaof", "127.0.0.1", str(self.master.port))
        self.replica.start()
        binary = shutil.which("redis-server")
        assert binary is not None
        for port in self.sentinel_ports:
            conf = self.dir / f"sentinel-{port}.conf"  # Sentinel rewrites its config: one file each
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.dir}\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {self.master.port} 2\n"
                f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {MASTER} 3000\n"
                f"sentinel parallel-syncs {MASTER} 1\n"
            )
            self.sentinels.append(
                subprocess.Popen(
                    [binary, str(conf), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
            )
        replica = redis.Redis(port=self.replica.port)
        _wait("the replica's sync", lambda: replica.info("replication").get("master_link_status") == "up")
        for port in self.sentinel_ports:
            s = redis.Redis(port=port, decode_responses=True)

            def ready(s: redis.Redis = s) -> bool:
                m = s.sentinel_master(MASTER)
                return bool(int(m["num-other-sentinels"]) == 2 and int(m["num-slaves"]) == 1)

            _wait(f"Sentinel {port} to see its peers and the replica", ready)
        return self

    def current_master_port(self) -> int:
        for port in self.sentinel_ports:
            try:
                _host, p = redis.Redis(port=port).sentinel_get_master_addr_by_name(MASTER)
                return int(p)
            except redis.RedisError:
                continue
        raise RuntimeError("no Sentinel answered")

    def wait_failover(self, old_port: int, timeout: float = 30.0) -> int:
        """Until a Sentinel names another master and that master takes writes; its port."""
        found: list[int] = []

        def moved() -> bool:
            p = self.current_master_port()
            if p == old_port:
                return False
            if redis.Redis(port=p).info("replication")["role"] != "master":
                return False
            found.append(p)
            return True

        _wait("the failover", moved, timeout)
        return found[-1]

    def stop(self) -> None:
        for proc in self.sentinels:
            proc.terminate()
        for proc in self.sentinels:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
        for srv in (self.master, self.replica):
            if srv.proc is not None:
                srv.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class ClusterSetup:
    """Three masters, no replicas, all 16384 slots covered."""

    def __init__(self, masters: int = 3) -> None:
        self.nodes = [RedisServer() for _ in range(masters)]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def start(self) -> ClusterSetup:
        for n in self.nodes:
            n.extra = (
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(n.dir / "nodes.conf"),
                "--cluster-node-timeout", "2000",
                # The bus port is port + 10000 unless given: it must be a port no one else is handed.
                "--cluster-port", str(free_port()),
            )  # fmt: skip
            n.start()
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RuntimeError("redis-cli is not installed: run `bash .ci/install-services.sh`")
        subprocess.run(
            [cli, "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes), "--cluster-yes"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
        )
        for n in self.nodes:
            r = redis.Redis(port=n.port, decode_responses=True)
            _wait(f"cluster_state:ok on {n.port}", lambda r=r: r.cluster("INFO")["cluster_state"] == "ok")
        return self

    def flush(self) -> None:
        for n in self.nodes:
            redis.Redis(port=n.port).flushall()

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()
