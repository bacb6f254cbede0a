"""Fixtures of the Kubernetes API emulator's tests: one seeded cell, its kubeconfig and a client."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_asyncio
from kube_support import KUBECTL, KUBECTL_REQUIRED, seed_all
from kubernetes_asyncio import config

from fbworld.kube import FakeKubeCluster, write_kubeconfig


@pytest.fixture
def require_kubectl() -> str:
    """Fail, never skip, when kubectl is missing: it is the reference client these tests compare against."""
    if KUBECTL is None:
        pytest.fail(KUBECTL_REQUIRED, pytrace=False)
    return KUBECTL


@pytest_asyncio.fixture
async def cell():
    c = FakeKubeCluster("cell-us-east-3")
    await c.start()
    seed_all(c)
    yield c
    await c.stop()


@pytest_asyncio.fixture
async def kubeconfig(cell, tmp_path) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", {cell.name: cell.url})


@pytest_asyncio.fixture
async def api(cell, kubeconfig):
    ac = await config.new_client_from_config(config_file=str(kubeconfig), context=cell.name)
    yield ac
    await ac.close()
