"""What the Kubernetes API emulator's tests share: content types, a raw client, kubectl (the
reference client: a missing kubectl fails these tests, it does not skip them)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from fbworld.kube import FAKE_TOKEN, FakeKubeCluster, samples

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
SMP = "application/strategic-merge-patch+json"
KUEUE = ("kueue.x-k8s.io", "v1beta2")
KUBECTL = shutil.which("kubectl")
KUBECTL_REQUIRED = "kubectl is required: install it (it is on the machine image; see .ci/run)"
AUTH = {"Authorization": f"Bearer {FAKE_TOKEN}"}


def http(cell: FakeKubeCluster, headers: dict[str, str] | None = None) -> aiohttp.ClientSession:
    """A raw client for `cell`: trusts its TLS CA and sends the fake token unless `headers` say otherwise."""
    return aiohttp.ClientSession(
        headers=AUTH if headers is None else headers, connector=aiohttp.TCPConnector(ssl=cell.ssl_context())
    )


needs_kubectl = pytest.mark.usefixtures("require_kubectl")


def seed_all(cell: FakeKubeCluster) -> None:
    for make in samples.ALL.values():
        cell.put(make())


def status_of(exc: ApiException) -> dict:
    body = json.loads(exc.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1"
    assert body["status"] == "Failure" and body["code"] == exc.status
    return body


async def kubectl(kubeconfig: Path, context: str, *args: str) -> tuple[int, str, str]:
    # Must not block: the fake server runs on this same event loop.
    proc = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(kubeconfig),
        "--context",
        context,
        # Discovery cached per kubeconfig, not in ~/.kube/cache by host:port: test servers reuse
        # ports, and a cache from another server's API versions makes kubectl ask for the wrong one.
        "--cache-dir",
        str(kubeconfig.parent / ".kube-cache"),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()
