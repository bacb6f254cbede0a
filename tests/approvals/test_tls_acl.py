"""rediss:// with REDIS_CA_FILE, as the least-privileged ACL user of deploy/redis/firebreak.acl:
levers with approval and break-glass run unchanged (the same tests, another Redis)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from fbworld.tls import TLSFiles, make_tls
from tests.approvals.test_breakglass import test_grant_use_and_security_posts as test_breakglass_over_tls_as_acl_user
from tests.approvals.test_lever_approval import (
    test_approved_request_changes_the_object_exactly_once as test_approval_over_tls_as_acl_user,
)
from tests.approvals.test_lever_approval import test_the_audit_tells_the_whole_story as test_audit_over_tls_as_acl_user
from tests.support.ports import free_port

__all__ = [
    "test_approval_over_tls_as_acl_user",
    "test_audit_over_tls_as_acl_user",
    "test_breakglass_over_tls_as_acl_user",
]

ACL = Path(__file__).resolve().parents[2] / "deploy" / "redis" / "firebreak.acl"
PASSWORD = "s3cret-test-pw"


def _rules() -> str:
    line = next(ln for ln in ACL.read_text().splitlines() if ln.startswith("user firebreak "))
    return line.removeprefix("user firebreak ").replace(">CHANGE-ME", f">{PASSWORD}")


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, TLSFiles]]:
    d = tmp_path_factory.mktemp("redis-tls")
    tls = make_tls(d)
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(d), "--tls-cert-file", str(tls.cert_file),
         "--tls-key-file", str(tls.key_file), "--tls-ca-cert-file", str(tls.ca_file), "--tls-auth-clients", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    admin = redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(tls.ca_file))
    deadline = time.monotonic() + 10
    while True:
        try:
            admin.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    admin.execute_command("ACL", "SETUSER", "firebreak", *_rules().split())
    yield port, tls
    proc.terminate()
    proc.wait(5)


@pytest.fixture
def redis_url(tls_redis: tuple[int, TLSFiles], monkeypatch: pytest.MonkeyPatch) -> str:
    port, tls = tls_redis
    redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(tls.ca_file)).flushall()
    monkeypatch.setenv("REDIS_CA_FILE", str(tls.ca_file))  # read by load_settings in the harness
    return f"rediss://firebreak:{PASSWORD}@127.0.0.1:{port}/0"


def test_the_acl_user_cannot_reach_other_keys_or_flush(tls_redis):
    port, tls = tls_redis
    r = redis.Redis(
        host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(tls.ca_file), username="firebreak", password=PASSWORD
    )
    assert r.set("fb:{x}:probe", "1")
    for refused in (lambda: r.set("other:key", "1"), r.flushall, lambda: r.config_get("*"), lambda: r.keys("*")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            refused()
