"""The in-cluster Redis that deploy/ ships, run for real: redis-server started with the exact
arguments of the rendered StatefulSet (the Secret's password put where Kubernetes would expand
$(REDIS_PASSWORD)), and Firebreak's store client with the rendered REDIS_URL. A client without the
password gets nothing; `default` can't log in; Firebreak's user reaches its own keys only, with the
rules of deploy/redis/firebreak.acl (issue 26, item 5)."""

from __future__ import annotations

import asyncio
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from bot.store import connect
from tests.support.deploy import DEPLOY, one, render
from tests.support.ports import free_port

PASSWORD = secrets.token_hex(32)  # as docs/operating.md makes it: hex, so it goes into a URL as it is
# redis-py retries an AuthenticationError (a ConnectionError) three times with backoff by default:
# 4 s a refusal. A refusal here is the answer, not a fault to retry.
ONCE = {"retry": Retry(NoBackoff(), 0)}


def _expand(value: str) -> str:
    return value.replace("$(REDIS_PASSWORD)", PASSWORD)


@pytest.fixture(scope="module")
def rendered() -> dict:
    objs = render("overlays/example")
    [redis_c] = one(objs, "StatefulSet", "firebreak-redis")["spec"]["template"]["spec"]["containers"]
    [bot] = one(objs, "Deployment", "firebreak")["spec"]["template"]["spec"]["containers"]
    [url] = [e["value"] for e in bot["env"] if e["name"] == "REDIS_URL"]
    return {"args": redis_c["args"], "url": url}


@pytest.fixture
def deployed_redis(rendered, tmp_path: Path) -> Iterator[int]:
    binary = shutil.which("redis-server")
    assert binary, "redis-server is required (.ci/install-services.sh)"
    args = [_expand(a) for a in rendered["args"]]
    assert args[0] == "redis-server"
    args[args.index("--dir") + 1] = str(tmp_path)  # the PersistentVolumeClaim's mount
    port = free_port()
    # Only where it listens differs from the pod: a free loopback port instead of 6379 on the pod's IP.
    proc = subprocess.Popen([binary, *args[1:], "--port", str(port), "--bind", "127.0.0.1"], stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with redis.Redis(port=port, username="firebreak", password=PASSWORD, socket_timeout=1, **ONCE) as r:
                    if r.ping():
                        break
            except redis.ConnectionError:
                assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else "redis-server exited"
                assert time.monotonic() < deadline, "the deploy Redis did not start"
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_client_without_the_password_is_refused(deployed_redis):
    with redis.Redis(port=deployed_redis, socket_timeout=2, **ONCE) as anonymous:
        with pytest.raises(redis.exceptions.AuthenticationError, match=r"authenticated|Authentication required"):
            anonymous.get("fb:incident:INC-1")
        with pytest.raises(redis.exceptions.AuthenticationError, match=r"authenticated|Authentication required"):
            anonymous.set("fb:audit:head", "forged")
    for user, password in (("default", ""), ("default", PASSWORD), ("firebreak", "wrong")):
        with (
            pytest.raises(redis.exceptions.AuthenticationError),
            redis.Redis(port=deployed_redis, username=user, password=password, socket_timeout=2, **ONCE) as r,
        ):
            r.ping()


def test_firebreaks_user_reaches_its_own_keys_and_nothing_dangerous(deployed_redis):
    with redis.Redis(port=deployed_redis, username="firebreak", password=PASSWORD, socket_timeout=2) as r:
        assert r.set("fb:probe", "1") and r.get("fb:probe") == b"1"
        for call in (lambda: r.set("other:key", "1"), lambda: r.flushall(), lambda: r.config_get("*")):
            with pytest.raises(redis.exceptions.NoPermissionError):
                call()


def test_the_rendered_user_is_the_acl_file(rendered):
    acl = (DEPLOY / "redis" / "firebreak.acl").read_text().split()
    assert acl[:4] == ["user", "firebreak", "on", ">CHANGE-ME"]
    args = rendered["args"]
    users = [i for i, a in enumerate(args) if a == "--user"]
    assert len(users) == 2
    assert args[users[0] + 1 : users[1]] == ["default", "off", "resetpass"]
    end = next((i for i in range(users[1] + 1, len(args)) if args[i].startswith("--")), len(args))
    assert args[users[1] + 1 : end] == ["firebreak", "on", ">$(REDIS_PASSWORD)", *acl[4:]]
    assert "--protected-mode" not in args  # its default: on


async def test_firebreak_connects_with_the_rendered_url(rendered, deployed_redis):
    parts = urlsplit(_expand(rendered["url"]))
    assert parts.username == "firebreak" and parts.password == PASSWORD and parts.hostname == "firebreak-redis"
    here = urlunsplit(parts._replace(netloc=f"firebreak:{PASSWORD}@127.0.0.1:{deployed_redis}"))
    store = connect(here)
    try:
        assert await store.set("fb:probe:url", "ok")
        assert await store.get("fb:probe:url") == "ok"
    finally:
        await store.aclose()
    without = aioredis.Redis(port=deployed_redis, socket_timeout=2, retry=AsyncRetry(NoBackoff(), 0))
    try:
        with pytest.raises(aioredis.AuthenticationError):
            await asyncio.wait_for(without.get("fb:probe:url"), 5)
    finally:
        await without.aclose()
