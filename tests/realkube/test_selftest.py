"""Issue 35 items 5 and 13 on a REAL kube-apiserver: at start and in /readyz, Firebreak sends one
forbidden dry run per cell as its own identity (the ServiceAccount token of the bot's kubeconfig)
and expects the admission policies' refusal (levers/selftest.py). With deploy/ applied it is ready;
with a policy's binding removed, or a policy matching another identity than the one the kubeconfig
authenticates as (the hand-patched username of item 13), the dry run is let through and the app is
not ready, saying which context and why."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from fbworld.kube import samples
from tests.realkube.conftest import OVERLAY
from tests.support.deploy import DEPLOY
from tests.support.harness import start_app
from tests.support.kube_apiserver import KubeAPIServer

NODE = "gpu-selftest-0001"
# The policies that can decide a node patch (the GPU nodes' own, and the one for every other node).
NODE_POLICIES = ("firebreak-nodes", "firebreak-nodes-gpu")
CONTEXTS = ("global", "us-east-1", "us-east-3")  # the bot kubeconfig's: all this one server


@pytest.fixture(scope="module")
def node(deployed: KubeAPIServer) -> Iterator[str]:
    """A node for the dry run to go to (a cell always has one)."""
    deployed.put_node(samples.gpu_node(NODE, "us-east-3"))
    yield NODE
    deployed.delete("node", NODE)


def _served(server: KubeAPIServer, kind: str) -> list[str]:
    items = json.loads(server.kubectl("get", kind, "-o", "json"))["items"]
    return [i["metadata"]["name"] for i in items if i["metadata"]["name"] in NODE_POLICIES]


async def _readyz(slack, redis_url, clock, server: KubeAPIServer) -> tuple[int, dict[str, Any]]:
    """A fresh app as the bot: its start hooks run (the first self-test), then /readyz."""
    app = await start_app(slack, redis_url, clock, kubeconfig=str(server.bot_kubeconfig))
    try:
        for hook in app.services.scheduler.startup:
            await hook()
        async with aiohttp.ClientSession() as s, s.get(app.url + "/readyz") as resp:
            return resp.status, await resp.json()
    finally:
        await app.stop()


async def _settled(slack, redis_url, clock, server: KubeAPIServer, status: int) -> tuple[int, dict[str, Any]]:
    """/readyz once the API server's admission has caught up with a policy change (its informers take
    a moment), i.e. until it answers ``status`` (or 20 s have passed: then the last answer)."""
    deadline = asyncio.get_running_loop().time() + 20
    while True:
        got = await _readyz(slack, redis_url, clock, server)
        if got[0] == status or asyncio.get_running_loop().time() > deadline:
            return got
        await asyncio.sleep(0.5)


async def test_with_the_policies_installed_it_is_ready(slack, redis_url, clock, deployed, node):
    status, body = await _readyz(slack, redis_url, clock, deployed)
    assert status == 200 and body["ok"] is True, body
    assert set(body["admission"]) == set(CONTEXTS)
    for context in CONTEXTS:
        assert body["admission"][context].startswith("ok: a forbidden dry run as Firebreak was refused"), body


async def test_with_a_binding_removed_it_is_not_ready_and_says_why(slack, redis_url, clock, deployed, node):
    bound = _served(deployed, "validatingadmissionpolicybindings")
    assert "firebreak-nodes" in bound
    deployed.kubectl("delete", "validatingadmissionpolicybinding", *bound)
    try:
        status, body = await _settled(slack, redis_url, clock, deployed, 503)
    finally:
        deployed.apply_k(DEPLOY / OVERLAY)
    assert status == 503 and body["ok"] is False and body["redis"] is True, body
    for context in CONTEXTS:
        said = body["admission"][context]
        assert said.startswith("let through: a forbidden dry run as Firebreak (label firebreak.io/self-test"), said
        assert "missing or unbound" in said and "another identity" in said, said
    assert (await _settled(slack, redis_url, clock, deployed, 200))[0] == 200  # bound again: ready again


async def test_with_the_policies_matching_another_username_it_is_not_ready(slack, redis_url, clock, deployed, node):
    """The item-13 mismatch: RBAC binds the kubeconfig's identity, the policies name someone else."""
    policies = _served(deployed, "validatingadmissionpolicies")
    before = {
        name: json.loads(deployed.kubectl("get", "validatingadmissionpolicy", name, "-o", "json"))["spec"][
            "matchConditions"
        ]
        for name in policies
    }
    other = [{"name": "firebreak", "expression": "request.userInfo.username == 'system:serviceaccount:ops:firebreak'"}]
    for name in policies:
        _match_conditions(deployed, name, other)
    try:
        status, body = await _settled(slack, redis_url, clock, deployed, 503)
    finally:
        for name, conditions in before.items():
            _match_conditions(deployed, name, conditions)
    assert status == 503 and body["ok"] is False, body
    assert body["admission"]["us-east-3"].startswith("let through:"), body
    assert (await _settled(slack, redis_url, clock, deployed, 200))[0] == 200


def _match_conditions(server: KubeAPIServer, policy: str, conditions: list) -> None:
    """Set a ValidatingAdmissionPolicy's matchConditions, as an operator's `kubectl patch` would."""
    server.kubectl(
        "patch",
        "validatingadmissionpolicy",
        policy,
        "--type=json",
        "-p",
        json.dumps([{"op": "replace", "path": "/spec/matchConditions", "value": conditions}]),
    )
