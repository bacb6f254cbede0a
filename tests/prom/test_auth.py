"""The app's Prometheus client as the runtime builds it from settings (bot.runtime.build_services),
against a real Prometheus behind credentials:

- basic auth and the CA setting: a real Prometheus serving HTTPS with ``basic_auth_users``
  (``--web.config.file``, a bcrypt hash), so Prometheus itself checks both;
- a bearer token: Prometheus has no bearer-token check of its own, so a small aiohttp reverse proxy
  on loopback (as an OAuth proxy in front of Prometheus would) checks ``Authorization`` and passes
  the query to a real Prometheus.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from bot.config import load_settings
from bot.core.services import Services
from bot.prom import Failed, Vector, Why
from bot.runtime import build_services, close
from tests.support.harness import T0
from tests.support.prometheus import CellHealth, PrometheusServer, ensure_services_installed, health_series, make_tls
from tests.support.triage import serve

SERIES = health_series("us-east-3", CellHealth(running_per_pod=8, waiting_per_pod=2), T0 - 3600, 120)
RUNNING = 'sum by (cell) (vllm:num_requests_running{cell="us-east-3"})'

USER, PASSWORD = "firebreak", "firebreak-basic-pw"
# bcrypt (cost 4, the minimum, to keep Prometheus's check quick) of PASSWORD.
PASSWORD_HASH = "$2b$04$fIrEbReAkTeStSaLtSaLtO8u.6C4GzK7w5a8w184aLJpoNwt1J4PK"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """HTTPS with a throwaway CA, and basic auth on every endpoint."""
    ensure_services_installed()
    d = tmp_path_factory.mktemp("prom-guarded")
    yield from serve(
        PrometheusServer(d / "prom", SERIES, tls=make_tls(d / "tls"), basic_auth=(USER, PASSWORD, PASSWORD_HASH))
    )


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    ensure_services_installed()
    yield from serve(PrometheusServer(tmp_path_factory.mktemp("prom"), SERIES))


@dataclass
class BearerProxy:
    url: str
    tokens: set[str]  # the tokens it accepts now (a test rotates them)
    seen: list[dict[str, str]] = field(default_factory=list)  # each request's headers


@pytest.fixture
async def proxy(plain: PrometheusServer) -> AsyncIterator[BearerProxy]:
    state = BearerProxy("", {"token-1"})

    async def forward(request: web.Request) -> web.Response:
        state.seen.append(dict(request.headers))
        given = request.headers.get("Authorization", "")
        if not any(given == f"Bearer {t}" for t in state.tokens):
            return web.Response(status=401, text="bad or missing bearer token\n")
        async with aiohttp.ClientSession() as session, session.get(plain.url + request.path_qs) as resp:
            return web.Response(status=resp.status, body=await resp.read(), content_type=resp.content_type)

    app = web.Application()
    app.router.add_get("/{tail:.*}", forward)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    state.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield state
    await runner.cleanup()


@pytest.fixture
async def services() -> AsyncIterator[list[Services]]:
    made: list[Services] = []
    yield made
    for svc in made:
        await close(svc)
        await svc.redis.aclose()


async def ask(made: list[Services], **settings: object) -> object:
    """RUNNING at T0 through the client the app builds from ``settings``."""
    svc = build_services(load_settings(**settings))
    made.append(svc)
    assert svc.prometheus is not None
    return await svc.prometheus.query(RUNNING, T0)


async def test_basic_auth_and_the_ca_reach_prometheus(guarded: PrometheusServer, services: list[Services]) -> None:
    ca = str(guarded.tls.ca_file)  # type: ignore[union-attr]
    got = await ask(
        services,
        prometheus_url=guarded.url,
        prometheus_ca_file=ca,
        prometheus_username=USER,
        prometheus_password=PASSWORD,
    )
    assert isinstance(got, Vector) and got.values == [16.0]


async def test_without_the_ca_the_certificate_is_not_trusted(
    guarded: PrometheusServer, services: list[Services]
) -> None:
    got = await ask(services, prometheus_url=guarded.url, prometheus_username=USER, prometheus_password=PASSWORD)
    assert got == Failed(Why.TLS, "unable to get local issuer certificate")


@pytest.mark.parametrize("password", [None, "wrong"], ids=["no-credentials", "wrong-password"])
async def test_refused_credentials_are_said(guarded: PrometheusServer, services: list[Services], password) -> None:
    creds = {} if password is None else {"prometheus_username": USER, "prometheus_password": password}
    got = await ask(services, prometheus_url=guarded.url, prometheus_ca_file=str(guarded.tls.ca_file), **creds)  # type: ignore[union-attr]
    assert got == Failed(Why.AUTH, "Unauthorized", 401)
    assert str(got) == (
        "Prometheus refused Firebreak's credentials (HTTP 401: Unauthorized); "
        "check PROMETHEUS_BEARER_TOKEN(_FILE) or PROMETHEUS_USERNAME and PROMETHEUS_PASSWORD"
    )


async def test_a_bearer_token_reaches_prometheus_with_firebreaks_user_agent(
    proxy: BearerProxy, services: list[Services]
) -> None:
    got = await ask(services, prometheus_url=proxy.url, prometheus_bearer_token="token-1")
    assert isinstance(got, Vector) and got.values == [16.0]
    (headers,) = proxy.seen
    assert headers["Authorization"] == "Bearer token-1"
    assert headers["User-Agent"] == f"firebreak/{metadata.version('firebreak')}"

    refused = await ask(services, prometheus_url=proxy.url, prometheus_bearer_token="token-0")
    assert refused == Failed(Why.AUTH, "bad or missing bearer token", 401)


async def test_a_token_file_is_read_at_each_query(proxy: BearerProxy, services: list[Services], tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("token-1\n")
    svc = build_services(load_settings(prometheus_url=proxy.url, prometheus_bearer_token_file=str(token_file)))
    services.append(svc)
    assert svc.prometheus is not None
    assert isinstance(await svc.prometheus.query(RUNNING, T0), Vector)

    proxy.tokens = {"token-2"}  # rotated: the old one is refused, the file has the new one
    token_file.write_text("token-2\n")
    assert isinstance(await svc.prometheus.query(RUNNING, T0), Vector)
    assert [h["Authorization"] for h in proxy.seen] == ["Bearer token-1", "Bearer token-2"]

    token_file.unlink()
    got = await svc.prometheus.query(RUNNING, T0)
    assert got == Failed(Why.TOKEN_FILE, f"PROMETHEUS_BEARER_TOKEN_FILE {token_file} can't be read")
    assert len(proxy.seen) == 2  # nothing was sent without the token
