"""The real kube-apiserver of the session (tests/support/kube_apiserver.py) with deploy/ applied as a
platform team applies it, the real controllers running against it (Argo Rollouts, KEDA, Kueue,
JobSet: tests/support/argo_controller.py, keda_controller.py, kueue_controller.py,
jobset_controller.py), NodeHealthCheck's stand-in (fbworld.realkube.NodeHealthChecks), and the real
app whose kubeconfig is the bot's ServiceAccount token.

One of each real controller per session (per xdist worker: each has its own server). Whoever asks
first starts it: a module's own fixture (`argo_controller`, ...) or `controllers` (all four at once,
in threads); everyone after shares that instance, since two of one controller on one server would
fight over the same objects. They run until the session ends, or until a module that must see its
objects untouched by any controller asks for `no_controllers`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import tests.support.argo_controller as argo
import tests.support.jobset_controller as jobset
import tests.support.keda_controller as keda
import tests.support.kueue_controller as kueue
from fbworld.realkube import NodeHealthChecks, RealKube, run_controllers
from tests.support.deploy import DEPLOY, policy
from tests.support.harness import RunningApp, start_app
from tests.support.kube_apiserver import KubeAPIServer, kube_apiserver  # noqa: F401 (fixture)
from tests.support.lever_fixtures import prometheus, write_policy  # noqa: F401 (fixture)
from tests.support.real_controllers import Controllers, SessionControllers

OVERLAY = "overlays/example"  # what tests/deploy render and hold equal to the levers' needs


@pytest.fixture(scope="session")
def session_controllers(
    kube_apiserver: KubeAPIServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[SessionControllers]:
    ctls = SessionControllers(kube_apiserver, tmp_path_factory)
    try:
        yield ctls
    finally:
        ctls.stop_all()
    assert not ctls.died, "a real controller died during the session:\n" + "\n".join(ctls.died)


@pytest.fixture
def argo_controller(session_controllers: SessionControllers) -> argo.ArgoController:
    return session_controllers.get("argo")


@pytest.fixture
def keda_controller(session_controllers: SessionControllers) -> keda.KedaOperator:
    return session_controllers.get("keda")


@pytest.fixture
def kueue_controller(session_controllers: SessionControllers) -> kueue.KueueController:
    return session_controllers.get("kueue")


@pytest.fixture
def jobset_controller(session_controllers: SessionControllers) -> jobset.JobSetController:
    return session_controllers.get("jobset")


@pytest.fixture(scope="module")
def no_controllers(session_controllers: SessionControllers) -> None:
    """None of the real controllers running while a module's tests run (stopped if an earlier module
    started them; the next test that asks for one starts it again). For a module whose objects must
    stay exactly as it wrote them, as a bare API server keeps them."""
    session_controllers.stop_all()


@pytest.fixture
async def controllers(deployed: KubeAPIServer, session_controllers: SessionControllers) -> AsyncIterator[Controllers]:
    """The session's four real controllers (as admin: their own RBAC is not under test), started
    together in threads by the first test that asks, and, for this test, NodeHealthCheck's stand-in.
    A stand-in pass that crashed, or a real controller that died, fails the test at teardown."""
    real = await asyncio.to_thread(session_controllers.all)
    async with RealKube(deployed.url, deployed.admin_token, deployed.ca_file) as kube:
        nhc = NodeHealthChecks(kube)
        task = asyncio.get_running_loop().create_task(run_controllers(kube, [nhc], interval=0.1))
        yield Controllers(real["argo"], real["keda"], real["kueue"], real["jobset"], nhc)
        crashed = task.done() and not task.cancelled() and task.exception()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception:  # noqa: BLE001 - reported just below, with the assertion
            pass
        assert not crashed, f"the NodeHealthCheck stand-in crashed: {crashed!r}"
    dead = [f"{n}:\n{c.log_tail()}" for n, c in real.items() if not c.alive()]
    assert not dead, "a real controller died:\n" + "\n".join(dead)


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
