"""The real kube-apiserver of the session (tests/support/kube_apiserver.py) with deploy/ applied as a
platform team applies it, the stand-in controllers (fbworld.realkube) running against it, and the real
app whose kubeconfig is the bot's ServiceAccount token."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from fbworld.realkube import ArgoAbort, KedaPause, KueueJobSets, RealKube, run_controllers
from tests.support.deploy import DEPLOY, policy
from tests.support.harness import RunningApp, start_app
from tests.support.kube_apiserver import KubeAPIServer, kube_apiserver  # noqa: F401 (fixture)
from tests.support.lever_fixtures import prometheus, write_policy  # noqa: F401 (fixture)

OVERLAY = "overlays/example"  # what tests/deploy render and hold equal to the levers' needs


@pytest.fixture(scope="session")
def deployed(kube_apiserver: KubeAPIServer) -> Iterator[KubeAPIServer]:  # noqa: F811
    """deploy/overlays/example applied once per session with `kubectl apply -k`, as admin, after the
    namespaces the policy names for the levers exist (deploy/'s Roles live in them)."""
    pol = policy()
    for ns in sorted(
        {n for names in pol.namespaces.values() for n in names} | {pol.killswitch.configmap.rpartition("/")[0]}
    ):
        kube_apiserver.namespace(ns)
    kube_apiserver.apply_k(DEPLOY / OVERLAY)
    yield kube_apiserver


@pytest.fixture
async def controllers(deployed: KubeAPIServer) -> AsyncIterator[list]:
    """Kueue, Argo Rollouts and KEDA stand-ins on the real server (as admin: their own RBAC is not under
    test). A pass that crashed fails the test at teardown."""
    async with RealKube(deployed.url, deployed.admin_token, deployed.ca_file) as kube:
        reconcilers = [KueueJobSets(kube), ArgoAbort(kube), KedaPause(kube)]
        task = asyncio.get_running_loop().create_task(run_controllers(kube, reconcilers, interval=0.1))
        yield reconcilers
        crashed = task.done() and not task.cancelled() and task.exception()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception:  # noqa: BLE001 - reported just below, with the assertion
            pass
        assert not crashed, f"a stand-in controller crashed: {crashed!r}"


@pytest.fixture
def policy_overrides() -> dict:
    return {"rollout_verify_seconds": 5, "api_timeout_seconds": 5}


@pytest.fixture
async def app(
    slack,
    redis_url,
    clock,
    deployed: KubeAPIServer,
    prometheus,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
    policy_overrides: dict,
) -> AsyncIterator[RunningApp]:
    """The real app, its kube contexts the real server as ServiceAccount firebreak/firebreak."""
    running = await start_app(
        slack,
        redis_url,
        clock,
        kubeconfig=str(deployed.bot_kubeconfig),
        firebreak_policy_dir=str(write_policy(tmp_path, **policy_overrides)),
        prometheus_url=prometheus.url,
    )
    yield running
    await running.stop()
