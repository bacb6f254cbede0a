"""Fixtures for the lever tests: fake cells (us-east-3, us-east-1) and the fleet context (global),
a kubeconfig naming them, and the real app over HTTP wired to them (`app`)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from fbworld.kube import FakeKubeCluster, samples, write_kubeconfig
from tests.support.harness import T0, RunningApp, start_app
from tests.support.levers import Cells
from tests.support.prometheus import CellTriage, PrometheusServer, ensure_services_installed, ttft_scenario

REPO = Path(__file__).resolve().parents[2]


def gpu_nodes(cell: FakeKubeCluster, n: int = 10, cell_name: str = "us-east-3") -> None:
    for i in range(n):
        cell.put(samples.gpu_node(f"gpu-a3-{i:04d}", cell_name))


def seed_cell(cell: FakeKubeCluster) -> None:
    cell.put(samples.cluster_queue())
    cell.put(samples.deployment(name="llm-70b", replicas=6))
    so = samples.scaled_object()
    so["spec"]["scaleTargetRef"] = {"name": "llm-70b"}  # KEDA's default target: apps/v1 Deployment
    cell.put(so)
    cell.put(samples.rollout())
    cell.put(samples.jobset())
    cell.put(samples.pod())
    cell.put(samples.quarantine_network_policy())  # what makes sandbox-quarantine's label isolate the pod
    cell.put(samples.configmap_toolgw())
    cell.put(samples.node_health_check(pause_requests=["cluster-upgrade-operator"]))
    gpu_nodes(cell)


def write_policy(tmp: Path, **overrides: object) -> Path:
    """A policy dir whose levers.yaml is the shipped one with top-level keys overridden."""
    doc = yaml.safe_load((REPO / "policies" / "levers.yaml").read_text())
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key] = {**doc[key], **copy.deepcopy(value)}
        else:
            doc[key] = value
    d = tmp / "policies"
    d.mkdir(exist_ok=True)
    (d / "levers.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return d


@pytest.fixture
async def cells(tmp_path: Path) -> AsyncIterator[Cells]:
    east3, east1, fleet = FakeKubeCluster("us-east-3"), FakeKubeCluster("us-east-1"), FakeKubeCluster("global")
    for c in (east3, east1, fleet):
        await c.start()
    seed_cell(east3)
    seed_cell(east1)
    fleet.put(samples.http_route(backends={"cell-us-east-1": 50, "cell-us-east-2": 50, "cell-us-east-3": 0}))
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", {"us-east-3": east3.url, "us-east-1": east1.url, "global": fleet.url}
    )
    yield Cells(east3, east1, fleet, kubeconfig)
    for c in (east3, east1, fleet):
        await c.stop()


@pytest.fixture
def policy_overrides() -> dict:
    return {"rollout_verify_seconds": 2, "api_timeout_seconds": 2}


BURN = {"us-east-1": 0.2, "us-east-2": 0.001, "us-east-3": 0.001}  # 20x, 0.1x, 0.1x at a 99% SLO


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory):
    """A real Prometheus with TTFT history for three cells (us-east-1 burning). One per session (per
    xdist worker): the tests only query it, and its backfill is the slow part of starting it."""
    ensure_services_installed()
    # dcgm-exporter's XID gauge (0: none) for the seeded GPU nodes, so node-quarantine's undo finds them clean
    # (levers/returngate.py); history runs past T0 so the clock can move.
    gpus = CellTriage(hosts=[f"gpu-a3-{i:04d}" for i in range(10)])
    sc = ttft_scenario(BURN, start_ts=T0 - 7200, minutes=240, triage={"us-east-3": gpus, "us-east-1": gpus})
    prom = PrometheusServer(tmp_path_factory.mktemp("prom"), sc)
    asyncio.run(prom.start())
    yield prom
    asyncio.run(prom.stop())


@pytest.fixture
def app_settings() -> dict:
    """Settings for `app` on top of the fake cells' kubeconfig and the test policy. A module overrides
    this fixture; a test may parametrize it (e.g. `{"kubeconfig": None}` for no kube config at all)."""
    return {}


@pytest.fixture
async def app(
    slack, redis_url, clock, cells: Cells, tmp_path: Path, policy_overrides: dict, app_settings: dict
) -> AsyncIterator[RunningApp]:
    """The real app over HTTP, its kube contexts the fake cells, its levers policy `policy_overrides`."""
    settings = {
        "kubeconfig": str(cells.kubeconfig),
        "firebreak_policy_dir": str(write_policy(tmp_path, **policy_overrides)),
        **app_settings,
    }
    running = await start_app(slack, redis_url, clock, **settings)
    yield running
    await running.stop()  # the runtime closes the kube clients too
