"""levers.kube against the fake API server over real HTTP: credentials as kubectl loads them (an exec
plugin, a tokenFile) kept working across rotation, clear refusals when they cannot be loaded, the
field manager and dryRun on the wire, bounded retries, pagination and discovery."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.clusters import KubeError
from fbworld.kube import FAKE_TOKEN, FakeKubeCluster, samples, tls
from fbworld.kube.kubeconfig import cluster_entry
from levers.kube import FIELD_MANAGER, Kube, read_kubeconfig
from levers.plan import JSON_PATCH, MERGE, ApiCall
from tests.support.harness import audit_entries
from tests.support.levers import KUBECTL, OPS, say

PLUGIN = Path(__file__).resolve().parent / "exec_plugin.py"
CQ = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/research-h100"
CM = "/api/v1/namespaces/toolgw/configmaps"


def exec_user(token_file: Path, ttl: float = 3600) -> dict[str, Any]:
    """A kubeconfig user whose credential comes from tests/levers/exec_plugin.py, as EKS/GKE/AKS users do."""
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(PLUGIN), str(token_file), str(ttl)],
            "interactiveMode": "Never",
        }
    }


def kubeconfig(
    path: Path, servers: dict[str, str], user: dict[str, Any], cluster: dict[str, Any] | None = None
) -> Path:
    """One context per server, all with `user`; each cluster trusts the fake's CA, unless `cluster`
    gives its TLS fields instead (e.g. a certificate-authority file)."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": n, "cluster": cluster_entry(url) if cluster is None else {"server": url, **cluster}}
            for n, url in servers.items()
        ],
        "users": [{"name": "firebreak", "user": user}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": "firebreak"}} for n in servers],
        "current-context": next(iter(servers)),
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def rotate(token_file: Path, token: str, *cells: FakeKubeCluster) -> None:
    """The token issuer mints a new token and the API server stops accepting the old one."""
    token_file.write_text(token)
    for cell in cells:
        cell.set_tokens(token)


def failing(token_file: Path, stderr: str | None) -> None:
    """Make the plugin fail with `stderr` (None: work again)."""
    flag = Path(f"{token_file}.fail")
    if stderr is None:
        flag.unlink()
    else:
        flag.write_text(stderr)


def runs(token_file: Path) -> int:
    p = Path(f"{token_file}.runs")
    return len(p.read_text().splitlines()) if p.exists() else 0


def bearer(cell: FakeKubeCluster) -> list[tuple[str | None, int | None]]:
    return [(r.headers.get("Authorization"), r.status) for r in cell.requests]


@pytest.fixture
async def cell() -> AsyncIterator[FakeKubeCluster]:
    c = FakeKubeCluster("us-east-3")
    await c.start()
    c.put(samples.cluster_queue())
    c.put(samples.configmap_toolgw())
    yield c
    await c.stop()


@pytest.fixture
async def kube() -> AsyncIterator[list[Kube]]:
    """Kube pools a test makes (append them); closed afterwards."""
    made: list[Kube] = []
    yield made
    for k in made:
        await k.close()


def new_kube(made: list[Kube], config: Path, timeout: float = 2.0) -> Kube:
    k = Kube(config, timeout)
    made.append(k)
    return k


# ----------------------------------------------------------------- credentials


async def test_exec_plugin_token_rotated_mid_test_keeps_calls_working(cell, kube, tmp_path):
    token = tmp_path / "token"
    rotate(token, "token-1", cell)
    client = await new_kube(kube, kubeconfig(tmp_path / "kc", {"c": cell.url}, exec_user(token))).client("c")
    assert (await client.get(CQ))["metadata"]["name"] == "research-h100"
    assert runs(token) == 1

    rotate(token, "token-2", cell)  # token-1 is now refused; its expirationTimestamp is an hour away
    assert (await client.get(CQ))["metadata"]["name"] == "research-h100"
    assert runs(token) == 2  # the 401 re-ran the plugin once
    assert bearer(cell) == [("Bearer token-1", 200), ("Bearer token-1", 401), ("Bearer token-2", 200)]
    # The new credential stays in use: no plugin run, no 401 for the next calls.
    await client.call("PATCH", CQ, MERGE, {"spec": {"stopPolicy": "Hold"}})
    assert runs(token) == 2 and bearer(cell)[-1] == ("Bearer token-2", 200)


async def test_an_expired_exec_credential_is_refreshed_before_the_call(cell, kube, tmp_path):
    token = tmp_path / "token"
    rotate(token, "token-1", cell)
    # The plugin's credentials expire at once (kubectl re-runs it when expirationTimestamp has passed).
    client = await new_kube(kube, kubeconfig(tmp_path / "kc", {"c": cell.url}, exec_user(token, ttl=-60))).client("c")
    rotate(token, "token-2", cell)
    await client.get(CQ)
    assert runs(token) == 2
    assert bearer(cell) == [("Bearer token-2", 200)]  # refreshed before sending: never a 401


async def test_concurrent_401s_run_the_plugin_once(cell, kube, tmp_path):
    token = tmp_path / "token"
    rotate(token, "token-1", cell)
    client = await new_kube(kube, kubeconfig(tmp_path / "kc", {"c": cell.url}, exec_user(token))).client("c")
    await client.get(CQ)
    rotate(token, "token-2", cell)
    got = await asyncio.gather(*(client.get(CQ) for _ in range(8)))
    assert all(g["metadata"]["name"] == "research-h100" for g in got)
    assert runs(token) == 2


async def test_token_file_rotated_is_reread_and_a_refused_one_is_a_clear_401(cell, kube, tmp_path):
    token = tmp_path / "sa-token"
    rotate(token, "token-1", cell)
    client = await new_kube(kube, kubeconfig(tmp_path / "kc", {"c": cell.url}, {"tokenFile": str(token)})).client("c")
    await client.get(CQ)
    rotate(token, "token-2", cell)  # as the kubelet rotates a projected service-account token
    await client.get(CQ)
    assert bearer(cell)[-2:] == [("Bearer token-1", 401), ("Bearer token-2", 200)]

    cell.set_tokens("token-3")  # the server moved on, the file did not
    with pytest.raises(KubeError) as err:
        await client.get(CQ)
    assert err.value.code == 401 and err.value.reason == "Unauthorized"
    assert "credentials for context `c` were refused even after refreshing" in str(err.value)
    assert [s for _, s in bearer(cell)[-2:]] == [401, 401]  # one reload, one retry: no loop


async def test_a_failing_exec_plugin_is_a_credentials_error(cell, kube, tmp_path):
    token = tmp_path / "token"
    rotate(token, "token-1", cell)
    failing(token, "error: token service unavailable\n")
    k = new_kube(kube, kubeconfig(tmp_path / "kc", {"c": cell.url}, exec_user(token)))
    with pytest.raises(KubeError) as err:
        await k.client("c")
    e = err.value
    assert (e.code, e.reason) == (None, "Credentials")
    assert e.message == (
        "kube credentials for context `c` failed: exec: process returned 1. error: token service unavailable"
    )
    assert cell.requests == []

    # It recovers, and a plugin that breaks at refresh time is the same clear error, not a 401.
    failing(token, None)
    client = await k.client("c")
    await client.get(CQ)
    failing(token, "error: token service unavailable\n")
    rotate(token, "token-2", cell)
    with pytest.raises(KubeError) as err:
        await client.get(CQ)
    assert (err.value.reason, err.value.message) == (e.reason, e.message)


async def test_a_missing_certificate_file_is_a_credentials_error(cell, kube, tmp_path):
    config = kubeconfig(
        tmp_path / "kc",
        {"c": cell.url},
        {"token": "token-1"},
        cluster={"certificate-authority": str(tmp_path / "missing-ca.crt")},
    )
    with pytest.raises(KubeError) as err:
        await new_kube(kube, config).client("c")
    e = err.value
    assert (e.code, e.reason) == (None, "Credentials")
    assert e.message.startswith("kube credentials for context `c` failed: ")
    assert "missing-ca.crt" in e.message and "Traceback" not in e.message and "\n" not in e.message
    assert cell.requests == []


# ----------------------------------------------------------------- the wire


async def test_every_write_names_the_field_manager_and_reads_do_not(cell, kube, tmp_path):
    client = await new_kube(kube, cell_config(cell, tmp_path)).client("c")
    await client.get(CQ)
    await client.call("PATCH", CQ, MERGE, {"spec": {"stopPolicy": "Hold"}})
    made = samples.configmap_toolgw(name="made-here")
    created = await client.call("POST", CM, "application/json", made)
    created["data"] = {"x": "1"}
    await client.call("PUT", f"{CM}/made-here", "application/json", created)
    assert [(r.method, r.query.get("fieldManager")) for r in cell.requests] == [
        ("GET", None),
        ("PATCH", FIELD_MANAGER),
        ("POST", FIELD_MANAGER),
        ("PUT", FIELD_MANAGER),
    ]
    managers = {m["manager"] for m in cell.get("clusterqueue", "research-h100")["metadata"]["managedFields"]}
    assert "firebreak" in managers


async def test_dry_run_reaches_the_server_and_stores_nothing(cell, kube, tmp_path):
    client = await new_kube(kube, cell_config(cell, tmp_path)).client("c")
    before = cell.get("clusterqueue", "research-h100")
    call = ApiCall("PATCH", CQ, JSON_PATCH, [{"op": "replace", "path": "/spec/stopPolicy", "value": "Hold"}], "")
    answer = await client.send(call, dry_run=True)
    assert answer["spec"]["stopPolicy"] == "Hold"  # what it would be
    [patch] = cell.find_requests("PATCH")
    assert patch.query == {"dryRun": "All", "fieldManager": FIELD_MANAGER} and patch.status == 200
    assert cell.get("clusterqueue", "research-h100") == before


async def test_a_read_is_retried_after_a_503(cell, kube, tmp_path):
    client = await new_kube(kube, cell_config(cell, tmp_path)).client("c")
    cell.fail_next("GET", "clusterqueues/research-h100", 503)
    assert (await client.get(CQ))["metadata"]["name"] == "research-h100"
    assert [r.status for r in cell.find_requests("GET")] == [503, 200]


async def test_a_read_gives_up_after_three_attempts(cell, kube, tmp_path):
    client = await new_kube(kube, cell_config(cell, tmp_path)).client("c")
    cell.fail_next("GET", "clusterqueues/research-h100", 500, times=5, message="etcd leader changed")
    with pytest.raises(KubeError) as err:
        await client.get(CQ)
    assert err.value.code == 500 and "etcd leader changed" in err.value.message
    assert [r.status for r in cell.find_requests("GET")] == [500, 500, 500]


async def test_a_read_that_times_out_is_retried(cell, kube, tmp_path):
    client = await new_kube(kube, cell_config(cell, tmp_path), timeout=0.5).client("c")
    cell.delay_next("GET", "clusterqueues/research-h100", 1.5)
    assert (await client.get(CQ))["metadata"]["name"] == "research-h100"
    assert len(cell.find_requests("GET")) == 2


async def test_a_write_is_not_retried_after_a_500(cell, kube, tmp_path):
    client = await new_kube(kube, cell_config(cell, tmp_path)).client("c")
    cell.fail_next("PATCH", "clusterqueues/research-h100", 500)
    with pytest.raises(KubeError) as err:
        await client.call("PATCH", CQ, MERGE, {"spec": {"stopPolicy": "Hold"}})
    assert err.value.code == 500
    assert [r.status for r in cell.find_requests("PATCH")] == [500]  # it may have run: never sent twice
    assert cell.get("clusterqueue", "research-h100")["spec"]["stopPolicy"] == "None"


async def test_a_write_is_retried_after_a_429_once_retry_after_has_passed(cell, kube, tmp_path):
    client = await new_kube(kube, cell_config(cell, tmp_path)).client("c")
    cell.fail_next("PATCH", "clusterqueues/research-h100", 429)  # the apiserver's: Retry-After: 1
    started = time.monotonic()
    await client.call("PATCH", CQ, MERGE, {"spec": {"stopPolicy": "Hold"}})
    waited = time.monotonic() - started
    [first, second] = cell.find_requests("PATCH")
    assert (first.status, second.status) == (429, 200)
    assert waited >= 0.95, waited  # Retry-After honoured (the back-off alone is at most 0.25 s)
    assert cell.get("clusterqueue", "research-h100")["spec"]["stopPolicy"] == "Hold"


async def test_a_retry_after_beyond_the_cap_fails_at_once(cell, kube, tmp_path):
    # Waiting a minute inside a lever pull is worse than saying so; retrying early would ignore the server.
    client = await new_kube(kube, cell_config(cell, tmp_path)).client("c")
    cell.fail_next("GET", "clusterqueues/research-h100", 429, retry_after=60)
    started = time.monotonic()
    with pytest.raises(KubeError) as err:
        await client.get(CQ)
    assert err.value.code == 429 and time.monotonic() - started < 1
    assert [r.status for r in cell.find_requests("GET")] == [429]


async def test_list_all_pages_through_every_item(cell, kube, tmp_path):
    for i in range(1203):
        cell.put(samples.gpu_node(f"gpu-{i:04d}"))
    client = await new_kube(kube, cell_config(cell, tmp_path)).client("c")
    nodes = await client.list_all("/api/v1/nodes", {"labelSelector": "nvidia.com/gpu.present=true"})
    assert sorted(n["metadata"]["name"] for n in nodes) == [f"gpu-{i:04d}" for i in range(1203)]
    pages = cell.find_requests("GET", "/api/v1/nodes$")
    assert [p.query.get("limit") for p in pages] == ["500", "500", "500"]
    assert "continue" not in pages[0].query and all(p.query.get("continue") for p in pages[1:])


async def test_discovery_finds_the_served_version_and_the_plural(kube, tmp_path):
    async with FakeKubeCluster("old", served={"clusterqueues.kueue.x-k8s.io": ["v1beta1"]}) as old:
        client = await new_kube(kube, cell_config(old, tmp_path)).client("c")
        kueue = ["v1beta2", "v1beta1"]
        assert await client.served_version("kueue.x-k8s.io", kueue, "clusterqueues") == "v1beta1"
        assert await client.served_version("kueue.x-k8s.io", ["v1beta2"], "clusterqueues") is None
        # The group still serves v1beta2 (for Workloads): without the plural that is the answer.
        assert await client.served_version("kueue.x-k8s.io", kueue) == "v1beta2"
        assert await client.served_version("kueue.x-k8s.io", kueue, "workloads") == "v1beta2"
        assert await client.served_version("no.such.group", ["v1"]) is None
        assert await client.served_version("", ["v1"]) == "v1"
        assert await client.plural_for("keda.sh/v1alpha1", "ScaledObject") == "scaledobjects"
        assert await client.plural_for("apps/v1", "Deployment") == "deployments"
        assert await client.plural_for("v1", "Node") == "nodes"
        assert await client.plural_for("apps/v1", "NoSuchKind") is None
        asked = len(old.requests)
        await client.served_version("kueue.x-k8s.io", kueue, "clusterqueues")
        await client.plural_for("apps/v1", "Deployment")
        assert len(old.requests) == asked  # cached


def cell_config(cell: FakeKubeCluster, tmp_path: Path) -> Path:
    return kubeconfig(tmp_path / "kc", {"c": str(cell.url)}, {"token": FAKE_TOKEN})


# ----------------------------------------------------------------- through the app


@pytest.fixture
def app_settings(cells, tmp_path: Path) -> dict:
    """The app's kubeconfig: every cell's credential comes from the exec plugin."""
    token = tmp_path / "exec-token"
    rotate(token, "token-1", cells.east3, cells.east1, cells.fleet)
    servers = {"us-east-3": cells.east3.url, "us-east-1": cells.east1.url, "global": cells.fleet.url}
    return {"kubeconfig": str(kubeconfig(tmp_path / "exec-kubeconfig", servers, exec_user(token)))}


async def test_a_lever_keeps_working_after_the_exec_token_rotates(app, cells, tmp_path):
    token = tmp_path / "exec-token"
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, inc.channel_id)
    assert "applied and verified" in out, out
    rotate(token, "token-2", cells.east3, cells.east1, cells.fleet)
    out = await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert "REQ-1 kueue-hold" in out and "undone" in out, out
    assert cells.east3.get("clusterqueue", "research-h100")["spec"]["stopPolicy"] == "None"
    assert ("Bearer token-1", 401) in bearer(cells.east3) and bearer(cells.east3)[-1] == ("Bearer token-2", 200)


async def test_a_failing_exec_plugin_refuses_the_pull_clearly(app, cells, tmp_path):
    failing(tmp_path / "exec-token", "error: token service unavailable\n")
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, inc.channel_id)
    assert out == (
        "Not pulled, nothing changed: us-east-3: kube credentials for context `us-east-3` failed: "
        "exec: process returned 1. error: token service unavailable."
    ), out
    assert cells.east3.requests == []
    [refused] = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.lever"]
    assert refused["detail"]["result"] == "refused"


# ----------------------------------------------------------------- as kubectl (issue 25)


async def test_every_request_carries_firebreaks_user_agent(cell, kube, tmp_path):
    client = await new_kube(kube, cell_config(cell, tmp_path)).client("c")
    await client.get(CQ)
    await client.call("PATCH", CQ, MERGE, {"spec": {"stopPolicy": "Hold"}})
    agent = f"firebreak/{metadata.version('firebreak')}"
    assert [r.headers.get("User-Agent") for r in cell.requests] == [agent, agent]


async def _kubectl_env(kubeconfig: str, *args: str) -> str:
    """kubectl with KUBECONFIG (several files joined by `:`), the reference for how it is read."""
    proc = await asyncio.create_subprocess_exec(
        KUBECTL,
        *args,
        env={**os.environ, "KUBECONFIG": kubeconfig},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


async def test_kubeconfig_with_several_files_is_merged_as_kubectl_merges_it(cell, kube, tmp_path):
    # The first file to name a cluster, user or context wins; current-context comes from the
    # first file that sets it; a file in the list that does not exist is skipped.
    first = _write(
        tmp_path / "a" / "config",
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "k", "cluster": cluster_entry(cell.url)}],
            "users": [{"name": "u", "user": {"token": FAKE_TOKEN}}],
            "contexts": [{"name": "c1", "context": {"cluster": "k", "user": "u"}}],
        },
    )
    second = _write(
        tmp_path / "b" / "config",
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],  # shadowed by a's
            "users": [{"name": "u", "user": {"token": "not-the-token"}}],  # shadowed by a's
            "contexts": [
                {"name": "c1", "context": {"cluster": "nowhere", "user": "u"}},  # shadowed by a's
                {"name": "c2", "context": {"cluster": "k", "user": "u"}},
            ],
            "current-context": "c2",
        },
    )
    third = _write(tmp_path / "c" / "config", {"apiVersion": "v1", "kind": "Config", "current-context": "c1"})
    joined = os.pathsep.join([str(first), str(tmp_path / "missing"), str(second), str(third)])

    k = new_kube(kube, Path(joined))
    names = await _kubectl_env(joined, "config", "get-contexts", "-o", "name")
    assert sorted(await k.contexts() or []) == sorted(names.split()) == ["c1", "c2"]
    assert (await _kubectl_env(joined, "config", "current-context")).strip() == "c2"
    assert read_kubeconfig(Path(joined))["current-context"] == "c2"
    for context in ("c1", "c2"):  # both reach the cell with a's cluster and a's token
        client = await k.client(context)
        assert (await client.get(CQ))["metadata"]["name"] == "research-h100"
    assert [r.headers.get("Authorization") for r in cell.requests if r.path == CQ] == [f"Bearer {FAKE_TOKEN}"] * 2


async def test_an_exec_plugin_path_relative_to_its_kubeconfig_runs_as_kubectl_runs_it(cell, kube, tmp_path):
    # `command: ./bin/get-token` and `certificate-authority: ca.crt` are relative to the directory
    # of the kubeconfig file that names them (the second of two here), not to the working directory.
    token = tmp_path / "exec-token"
    rotate(token, "token-1", cell)
    plugin = tmp_path / "b" / "bin" / "get-token"
    plugin.parent.mkdir(parents=True)
    plugin.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{PLUGIN}" "$@"\n')
    plugin.chmod(0o755)
    first = _write(tmp_path / "a" / "config", {"apiVersion": "v1", "kind": "Config", "current-context": "c"})
    user = exec_user(token)
    user["exec"].update(command="./bin/get-token", args=[str(token), "3600"])
    assert cell.url.startswith("https://")
    (tmp_path / "b" / "ca.crt").write_bytes(tls.pki().ca_pem)  # and the CA file beside it too
    second = kubeconfig(tmp_path / "b" / "config", {"c": cell.url}, user, cluster={"certificate-authority": "ca.crt"})
    joined = os.pathsep.join([str(first), str(second)])
    assert Path.cwd() != second.parent

    got = await _kubectl_env(joined, "--cache-dir", str(tmp_path / ".kube-cache"), "get", "--raw", CQ)
    assert json.loads(got)["metadata"]["name"] == "research-h100"  # kubectl ran ./bin/get-token
    client = await new_kube(kube, Path(joined)).client("c")
    assert (await client.get(CQ))["metadata"]["name"] == "research-h100"
    assert runs(token) == 2  # kubectl's run and Firebreak's
    assert bearer(cell)[-1] == ("Bearer token-1", 200)
