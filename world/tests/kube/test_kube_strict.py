"""The fake API server is as strict as a real one where the levers depend on it: bearer tokens,
RBAC, served CRD versions, dryRun, fieldManager/managedFields, metadata validation, the JSON-patch
`test` failure, list pagination and ReplicaSets. Everything goes over real HTTPS, through aiohttp,
kubernetes_asyncio or kubectl (the reference client)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytest_asyncio
from kube_support import (
    KUEUE,
    MERGE,
    http,
    kubectl,
    needs_kubectl,
    status_of,
)
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from fbworld.kube import FAKE_TOKEN, FakeKubeCluster, Rule, samples, write_kubeconfig

CQ_PATH = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/research-h100"
NODE = "gpu-h100-a017"


@pytest_asyncio.fixture
async def cell():
    c = FakeKubeCluster("cell-us-east-3")
    await c.start()
    for make in (samples.cluster_queue, samples.gpu_node, samples.rollout, samples.configmap_toolgw, samples.jobset):
        c.put(make())
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


async def raw(cell: FakeKubeCluster, method: str, path: str, headers: dict | None = None, **kw) -> tuple[int, str]:
    async with http(cell, headers) as s, s.request(method, cell.url + path, **kw) as r:
        return r.status, await r.text()


# --------------------------------------------------------------------- 401


@pytest.mark.asyncio
@pytest.mark.parametrize("path", ["/version", "/api", "/apis", "/api/v1/nodes", CQ_PATH])
async def test_a_missing_or_unknown_bearer_token_is_the_real_401(cell, path):
    unauthorized = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }
    for headers in ({}, {"Authorization": "Bearer not-the-token"}, {"Authorization": f"Basic {FAKE_TOKEN}"}):
        code, body = await raw(cell, "GET", path, headers)
        assert (code, json.loads(body)) == (401, unauthorized), headers
    assert (await raw(cell, "GET", path))[0] == 200


@pytest.mark.asyncio
async def test_rotated_tokens_refuse_the_old_one_for_both_clients(cell, api, kubeconfig):
    cell.set_tokens("token-2")
    with pytest.raises(ApiException) as ei:
        await client.CoreV1Api(api).read_node(NODE)
    assert ei.value.status == 401 and status_of(ei.value)["reason"] == "Unauthorized"
    rc, _, err = await kubectl(kubeconfig, cell.name, "get", "nodes")
    assert rc != 0 and "You must be logged in to the server" in err
    assert (await raw(cell, "GET", "/api/v1/nodes", {"Authorization": "Bearer token-2"}))[0] == 200
    cell.set_tokens(FAKE_TOKEN, "token-2")
    rc, out, err = await kubectl(kubeconfig, cell.name, "get", "nodes")
    assert rc == 0 and NODE in out, err


# --------------------------------------------------------------------- 403


@pytest.mark.asyncio
async def test_rbac_denies_with_the_apiservers_403(cell, api):
    cell.allow_only(
        Rule(["get", "list", "watch"], ["*"], ["*"]),
        Rule(["patch"], ["argoproj.io"], ["rollouts/status"]),
        Rule(["patch", "update"], [""], ["configmaps"], names=["toolgw-flags"]),
    )
    core, co = client.CoreV1Api(api), client.CustomObjectsApi(api)
    assert (await core.read_node(NODE)).metadata.name == NODE  # reads allowed

    with pytest.raises(ApiException) as ei:
        await core.patch_node(NODE, {"spec": {"unschedulable": True}})
    body = status_of(ei.value)
    assert ei.value.status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == (
        f'nodes "{NODE}" is forbidden: User "fake-user" cannot patch resource "nodes" in API group "" '
        "at the cluster scope"
    )
    assert body["details"] == {"name": NODE, "kind": "nodes"}

    ro = ("argoproj.io", "v1alpha1", "serve-chat", "rollouts", "llm-70b")
    with pytest.raises(ApiException) as ei:
        await co.patch_namespaced_custom_object(*ro, {"spec": {"paused": True}}, _content_type=MERGE)
    body = status_of(ei.value)
    assert body["message"] == (
        'rollouts.argoproj.io "llm-70b" is forbidden: User "fake-user" cannot patch resource "rollouts" '
        'in API group "argoproj.io" in the namespace "serve-chat"'
    )
    assert body["details"] == {"name": "llm-70b", "group": "argoproj.io", "kind": "rollouts"}
    out = await co.patch_namespaced_custom_object_status(*ro, {"status": {"abort": True}}, _content_type=MERGE)
    assert out["status"]["abort"] is True

    # resourceNames: the named ConfigMap only; creating one is never allowed by a named rule.
    await core.patch_namespaced_config_map("toolgw-flags", "toolgw", {"data": {"acme.max_side_effect": "read"}})
    with pytest.raises(ApiException) as ei:
        await core.create_namespaced_config_map("toolgw", samples.configmap_toolgw(name="other"))
    assert status_of(ei.value)["message"] == (
        'configmaps is forbidden: User "fake-user" cannot create resource "configmaps" in API group "" '
        'in the namespace "toolgw"'
    )
    # A dry run is authorized like the real write: denied, and nothing stored either way.
    with pytest.raises(ApiException) as ei:
        await core.patch_node(NODE, {"spec": {"unschedulable": True}}, dry_run="All")
    assert ei.value.status == 403
    assert "unschedulable" not in cell.get("node", NODE)["spec"]
    cell.rbac = None
    assert (await core.patch_node(NODE, {"spec": {"unschedulable": True}})).spec.unschedulable is True


@pytest.mark.asyncio
async def test_a_roles_rule_allows_only_in_its_namespace(cell, api):
    cell.allow_only(Rule(["get", "patch"], [""], ["pods"], namespace="sbx-tenant-acme"))
    cell.put(samples.pod())
    cell.put(samples.pod(ns="serve-chat", name="other"))
    core = client.CoreV1Api(api)
    label = {"metadata": {"labels": {"ir.corp/quarantine": "true"}}}
    assert (await core.patch_namespaced_pod("sess-7f3a9c-0", "sbx-tenant-acme", label)).metadata.labels
    with pytest.raises(ApiException) as ei:
        await core.patch_namespaced_pod("other", "serve-chat", label)
    assert status_of(ei.value)["message"] == (
        'pods "other" is forbidden: User "fake-user" cannot patch resource "pods" in API group "" '
        'in the namespace "serve-chat"'
    )
    with pytest.raises(ApiException) as ei:  # every namespace at once is not this namespace
        await core.list_pod_for_all_namespaces()
    assert ei.value.status == 403


@needs_kubectl
@pytest.mark.asyncio
async def test_kubectl_sees_the_403_and_discovery_stays_open(cell, kubeconfig):
    cell.allow_only(Rule(["get", "list"], [""], ["nodes"]))
    rc, out, err = await kubectl(kubeconfig, cell.name, "get", "nodes")
    assert rc == 0 and NODE in out, err
    _, _, err = await kubectl(kubeconfig, cell.name, "cordon", NODE)  # kubectl cordon exits 0 even then
    assert f'unable to cordon node "{NODE}": nodes "{NODE}" is forbidden: User "fake-user" cannot patch' in err
    assert cell.find_requests("PATCH")[-1].status == 403
    assert "unschedulable" not in cell.get("node", NODE)["spec"]


# -------------------------------------------------------------- served versions


@pytest.mark.asyncio
async def test_only_the_served_versions_exist(tmp_path):
    served = {"clusterqueues.kueue.x-k8s.io": ["v1beta1"], "workloads.kueue.x-k8s.io": ["v1beta1"]}
    async with FakeKubeCluster("old-kueue", served=served) as c:
        with pytest.raises(ValueError, match="not served"):
            c.put(samples.cluster_queue())  # v1beta2
        c.put(samples.cluster_queue(version="v1beta1"))
        groups = json.loads((await raw(c, "GET", "/apis"))[1])["groups"]
        kueue = next(g for g in groups if g["name"] == "kueue.x-k8s.io")
        assert [v["version"] for v in kueue["versions"]] == ["v1beta1"]
        assert kueue["preferredVersion"]["version"] == "v1beta1"
        assert json.loads((await raw(c, "GET", "/apis/kueue.x-k8s.io"))[1])["versions"] == kueue["versions"]
        # The unserved version answers the apiserver's NotFound delegate: plain text, not a Status.
        for path in ("/apis/kueue.x-k8s.io/v1beta2", CQ_PATH, "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"):
            assert await raw(c, "GET", path) == (404, "404 page not found\n"), path
        code, body = await raw(c, "GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/research-h100")
        assert code == 200 and json.loads(body)["spec"]["cohort"] == "research"
        stored = c.get("cq", "research-h100")
        assert stored["apiVersion"] == "kueue.x-k8s.io/v1beta1"  # the newest served version stores

        kc = write_kubeconfig(tmp_path / "kc", {c.name: c.url})
        rc, out, err = await kubectl(kc, c.name, "get", "clusterqueue", "research-h100", "-o", "json")
        assert rc == 0 and json.loads(out)["apiVersion"] == "kueue.x-k8s.io/v1beta1", err


@pytest.mark.asyncio
async def test_an_empty_served_list_leaves_the_crd_out(tmp_path):
    served = {"clusterqueues.kueue.x-k8s.io": [], "workloads.kueue.x-k8s.io": []}
    async with FakeKubeCluster("no-kueue", served=served) as c:
        groups = {g["name"] for g in json.loads((await raw(c, "GET", "/apis"))[1])["groups"]}
        assert "kueue.x-k8s.io" not in groups and "argoproj.io" in groups
        assert await raw(c, "GET", "/apis/kueue.x-k8s.io") == (404, "404 page not found\n")
        kc = write_kubeconfig(tmp_path / "kc", {c.name: c.url})
        rc, _, err = await kubectl(kc, c.name, "get", "clusterqueues")
        assert rc != 0 and 'the server doesn\'t have a resource type "clusterqueues"' in err
    with pytest.raises(ValueError, match="v9"):
        FakeKubeCluster("x", served={"clusterqueues.kueue.x-k8s.io": ["v9"]})
    with pytest.raises(ValueError, match=r"widgets\.example\.com"):
        FakeKubeCluster("x", served={"widgets.example.com": ["v1"]})


@pytest.mark.asyncio
async def test_an_unknown_resource_in_a_builtin_group_is_a_status_404(cell):
    code, body = await raw(cell, "GET", "/apis/apps/v1/namespaces/default/widgets")
    assert code == 404
    assert json.loads(body)["message"] == "the server could not find the requested resource"


# --------------------------------------------------------------------- dryRun


@pytest.mark.asyncio
async def test_dry_run_validates_admits_and_stores_nothing(cell, api):
    co = client.CustomObjectsApi(api)
    before = cell.get("cq", "research-h100")
    out = await co.patch_cluster_custom_object(
        *KUEUE, "clusterqueues", "research-h100", {"spec": {"stopPolicy": "Hold"}}, _content_type=MERGE, dry_run="All"
    )
    assert out["spec"]["stopPolicy"] == "Hold" and out["metadata"]["managedFields"][-1]["manager"]
    assert cell.get("cq", "research-h100") == before  # not even the resourceVersion moved
    assert cell.requests[-1].query == {"dryRun": "All"}
    with pytest.raises(ApiException) as ei:  # still validated
        await co.patch_cluster_custom_object(
            *KUEUE,
            "clusterqueues",
            "research-h100",
            {"spec": {"stopPolicy": "Nope"}},
            _content_type=MERGE,
            dry_run="All",
        )
    assert ei.value.status == 422 and status_of(ei.value)["details"]["causes"][0]["field"] == "spec.stopPolicy"

    core = client.CoreV1Api(api)
    made = await core.create_namespaced_config_map("toolgw", samples.configmap_toolgw(name="new"), dry_run="All")
    assert made.metadata.uid and not made.metadata.resource_version
    assert cell.get("configmap", "new", "toolgw") is None
    await core.delete_namespaced_config_map("toolgw-flags", "toolgw", dry_run="All")
    assert cell.get("configmap", "toolgw-flags", "toolgw") is not None

    async with (
        http(cell) as s,
        s.patch(cell.url + CQ_PATH, params={"dryRun": "Yes"}, data=b"{}", headers={"Content-Type": MERGE}) as r,
    ):
        assert r.status == 422
        assert (await r.json())["message"] == (
            'PatchOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Yes"}: '
            'supported values: "All"'
        )


@needs_kubectl
@pytest.mark.asyncio
async def test_kubectl_dry_run_server_changes_nothing(cell, kubeconfig):
    rc, out, err = await kubectl(
        kubeconfig, cell.name, "patch", "cq", "research-h100", "--type=merge", "--dry-run=server",
        "-p", '{"spec":{"stopPolicy":"Hold"}}', "-o", "jsonpath={.spec.stopPolicy}",
    )  # fmt: skip
    assert rc == 0 and out == "Hold", err
    assert cell.find_requests("PATCH")[-1].query["dryRun"] == "All"
    assert cell.get("cq", "research-h100")["spec"]["stopPolicy"] == "None"
    rc, _, err = await kubectl(
        kubeconfig, cell.name, "patch", "cq", "research-h100", "--type=merge", "--dry-run=server",
        "-p", '{"spec":{"stopPolicy":"Never"}}',
    )  # fmt: skip
    assert rc != 0 and "Unsupported value" in err  # the server validated the dry run


# --------------------------------------------------------------- fieldManager


def entries(obj: dict) -> dict[tuple[str, str], dict]:
    return {(e["manager"], e.get("subresource", "")): e for e in obj["metadata"].get("managedFields") or []}


@pytest.mark.asyncio
async def test_field_manager_is_recorded_in_managed_fields(cell, api):
    co = client.CustomObjectsApi(api)
    await co.patch_cluster_custom_object(
        *KUEUE,
        "clusterqueues",
        "research-h100",
        {"spec": {"stopPolicy": "Hold"}},
        _content_type=MERGE,
        field_manager="firebreak",
    )
    fb = entries(cell.get("cq", "research-h100"))[("firebreak", "")]
    assert {k: v for k, v in fb.items() if k != "time"} == {
        "manager": "firebreak",
        "operation": "Update",
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:stopPolicy": {}}},
    }
    # Without one the manager is the User-Agent's product token: kubernetes_asyncio's "OpenAPI-Generator".
    assert cell.requests[-1].headers["User-Agent"].startswith("OpenAPI-Generator/")
    await co.patch_cluster_custom_object(
        *KUEUE, "clusterqueues", "research-h100", {"spec": {"stopPolicy": "HoldAndDrain"}}, _content_type=MERGE
    )
    mf = entries(cell.get("cq", "research-h100"))
    assert mf[("OpenAPI-Generator", "")]["fieldsV1"] == {"f:spec": {"f:stopPolicy": {}}}
    assert ("firebreak", "") not in mf  # it lost its only field to the other manager
    # A no-op write records nothing new.
    rv = cell.get("cq", "research-h100")["metadata"]["resourceVersion"]
    await co.patch_cluster_custom_object(
        *KUEUE,
        "clusterqueues",
        "research-h100",
        {"spec": {"stopPolicy": "HoldAndDrain"}},
        _content_type=MERGE,
        field_manager="someone-else",
    )
    assert cell.get("cq", "research-h100")["metadata"]["resourceVersion"] == rv
    # /status writes are their own entry.
    await co.patch_namespaced_custom_object_status(
        "argoproj.io", "v1alpha1", "serve-chat", "rollouts", "llm-70b", {"status": {"abort": True}},
        _content_type=MERGE, field_manager="firebreak",
    )  # fmt: skip
    st = entries(cell.get("rollout", "llm-70b", "serve-chat"))[("firebreak", "status")]
    assert st["subresource"] == "status" and st["fieldsV1"] == {"f:status": {"f:abort": {}}}
    with pytest.raises(ApiException) as ei:
        await co.patch_cluster_custom_object(
            *KUEUE, "clusterqueues", "research-h100", {"spec": {}}, _content_type=MERGE, field_manager="x" * 129
        )
    assert status_of(ei.value)["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than 128 bytes'
    )


@needs_kubectl
@pytest.mark.asyncio
async def test_kubectl_writes_carry_kubectls_field_managers(cell, kubeconfig):
    for args in (
        ("cordon", NODE),
        ("taint", "nodes", NODE, "gpu.corp/quarantine=xid79:NoSchedule"),
        ("label", "nodes", NODE, "gpu.corp/state=quarantined"),
        ("patch", "node", NODE, "-p", '{"metadata":{"annotations":{"gpu.corp/ticket":"INC-1"}}}'),
    ):
        rc, _, err = await kubectl(kubeconfig, cell.name, *args)
        assert rc == 0, err
    mf = entries(cell.get("node", NODE))
    # kubectl cordon sends no fieldManager: the server falls back to "kubectl" from its User-Agent.
    assert mf[("kubectl", "")]["fieldsV1"] == {"f:spec": {"f:unschedulable": {}}}
    assert mf[("kubectl-taint", "")]["fieldsV1"] == {"f:spec": {"f:taints": {}}}
    assert mf[("kubectl-label", "")]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:gpu.corp/state": {}}}}
    assert mf[("kubectl-patch", "")]["fieldsV1"] == {
        "f:metadata": {"f:annotations": {".": {}, "f:gpu.corp/ticket": {}}}
    }


# ---------------------------------------------------------- metadata validation


@pytest.mark.asyncio
async def test_label_and_annotation_rules_are_enforced(cell, api):
    core = client.CoreV1Api(api)
    before = cell.get("node", NODE)
    long_value = "v" * 64
    with pytest.raises(ApiException) as ei:
        await core.patch_node(NODE, {"metadata": {"labels": {"gpu.corp/ticket": long_value, "bad key": "x"}}})
    body = status_of(ei.value)
    assert ei.value.status == 422 and body["reason"] == "Invalid"
    causes = body["details"]["causes"]
    assert {c["field"] for c in causes} == {"metadata.labels"}
    assert any(c["message"] == f'Invalid value: "{long_value}": must be no more than 63 characters' for c in causes)
    assert any(c["message"].startswith('Invalid value: "bad key": name part must consist of') for c in causes)
    assert body["message"].startswith(f'Node "{NODE}" is invalid: [metadata.labels: Invalid value:')

    # A number where a string must be: the patched object no longer decodes.
    with pytest.raises(ApiException) as ei:
        await core.patch_node(NODE, {"metadata": {"annotations": {"gpu.corp/xid": 79}}})
    body = status_of(ei.value)
    assert ei.value.status == 422 and body["reason"] == "Invalid"
    [cause] = body["details"]["causes"]
    assert cause["field"] == "patch" and cause["message"].endswith(
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.annotations of type string"
    )
    co = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as ei:
        await co.patch_cluster_custom_object(
            *KUEUE,
            "clusterqueues",
            "research-h100",
            {"metadata": {"labels": {"team": True}}},
            _content_type=MERGE,
        )
    assert ei.value.status == 422 and "ObjectMeta.labels of type string" in status_of(ei.value)["message"]
    # On create the body itself does not decode: 400.
    cm = samples.configmap_toolgw(name="typed")
    cm["metadata"]["annotations"] = {"replicas": 3}
    with pytest.raises(ApiException) as ei:
        await core.create_namespaced_config_map("toolgw", cm)
    assert ei.value.status == 400 and status_of(ei.value)["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.annotations of type string"
    )
    assert cell.get("node", NODE) == before and cell.get("configmap", "typed", "toolgw") is None
    with pytest.raises(ValueError, match="of type string"):
        cell.put({**samples.pod(), "metadata": {"name": "p", "namespace": "x", "labels": {"n": 1}}})


# ------------------------------------------------------------ JSON patch test op


@pytest.mark.asyncio
async def test_a_failed_json_patch_test_is_the_apiservers_generic_422(cell):
    ops = [
        {"op": "test", "path": "/spec/stopPolicy", "value": "Hold"},
        {"op": "replace", "path": "/spec/stopPolicy", "value": "HoldAndDrain"},
    ]
    async with (
        http(cell) as s,
        s.patch(cell.url + CQ_PATH, json=ops, headers={"Content-Type": "application/json-patch+json"}) as r,
    ):
        assert r.status == 422
        assert await r.json() == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "the server rejected our request due to an error in our request",
            "reason": "Invalid",
            "details": {
                "causes": [
                    {
                        "reason": "UnexpectedServerResponse",
                        "message": "testing value /spec/stopPolicy failed: test failed",
                    }
                ]
            },
            "code": 422,
        }
    assert cell.get("cq", "research-h100")["spec"]["stopPolicy"] == "None"


@needs_kubectl
@pytest.mark.asyncio
async def test_kubectl_json_patch_test_failure(cell, kubeconfig):
    rc, _, err = await kubectl(
        kubeconfig, cell.name, "patch", "cq", "research-h100", "--type=json",
        "-p", '[{"op":"test","path":"/spec/stopPolicy","value":"Hold"},{"op":"remove","path":"/spec/stopPolicy"}]',
    )  # fmt: skip
    # kubectl renders an Invalid Status from its causes (field "" here).
    assert rc != 0 and "The request is invalid: : testing value /spec/stopPolicy failed: test failed" in err
    assert cell.find_requests("PATCH")[-1].status == 422


# ------------------------------------------------------------------ pagination


@pytest.mark.asyncio
async def test_lists_page_with_limit_and_continue(cell, api):
    for i in range(6):
        cell.put(samples.gpu_node(f"gpu-b-{i}"))
    core = client.CoreV1Api(api)
    names, token, pages = [], None, []
    while True:
        page = await core.list_node(limit=3, _continue=token)
        pages.append(page)
        names += [n.metadata.name for n in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert [len(p.items) for p in pages] == [3, 3, 1]
    assert [p.metadata.remaining_item_count for p in pages] == [4, 1, None]
    assert names == sorted(n["metadata"]["name"] for n in cell.list("node"))
    assert len({p.metadata.resource_version for p in pages}) == 1  # one snapshot's resourceVersion
    # With a selector the remaining count is unknown, as on etcd.
    page = await core.list_node(limit=2, label_selector="nvidia.com/gpu.present=true")
    assert page.metadata._continue and page.metadata.remaining_item_count is None
    code, body = await raw(cell, "GET", "/api/v1/nodes?limit=2&continue=bm90LWEtdG9rZW4")
    assert code == 400 and json.loads(body)["message"].startswith("invalid continue token: continue key is not valid")


@needs_kubectl
@pytest.mark.asyncio
async def test_kubectl_get_follows_continue(cell, kubeconfig):
    for i in range(4):
        cell.put(samples.gpu_node(f"gpu-b-{i}"))
    rc, out, err = await kubectl(kubeconfig, cell.name, "get", "nodes", "--chunk-size=2", "-o", "name")
    assert rc == 0, err
    assert out.split() == [f"node/{n['metadata']['name']}" for n in cell.list("node")]
    lists = cell.find_requests("GET", r"^/api/v1/nodes$")
    assert [r.query.get("limit") for r in lists] == ["2", "2", "2"]
    assert [bool(r.query.get("continue")) for r in lists] == [False, True, True]


# ------------------------------------------------------------------ kubectl verbs


@needs_kubectl
@pytest.mark.asyncio
async def test_kubectl_cordon_uncordon_taint_and_status_patch(cell, kubeconfig):
    rc, _, err = await kubectl(kubeconfig, cell.name, "cordon", NODE)
    assert rc == 0, err
    assert cell.get("node", NODE)["spec"]["unschedulable"] is True
    rc, _, err = await kubectl(kubeconfig, cell.name, "taint", "nodes", NODE, "nvidia.com/gpu:NoSchedule-")
    assert rc == 0, err
    assert "taints" not in cell.get("node", NODE)["spec"]  # the GPU pool's taint, removed by key and effect
    rc, _, err = await kubectl(kubeconfig, cell.name, "uncordon", NODE)
    assert rc == 0, err
    assert "unschedulable" not in cell.get("node", NODE)["spec"]
    spec = cell.get("rollout", "llm-70b", "serve-chat")["spec"]
    rc, _, err = await kubectl(
        kubeconfig, cell.name, "patch", "rollout", "llm-70b", "-n", "serve-chat", "--subresource=status",
        "--type=merge", "-p", '{"status":{"abort":true},"spec":{"paused":true}}',
    )  # fmt: skip
    assert rc == 0, err
    ro = cell.get("rollout", "llm-70b", "serve-chat")
    assert ro["status"]["abort"] is True and ro["spec"] == spec  # /status changes status only


# ------------------------------------------------------------------ ReplicaSets


@needs_kubectl
@pytest.mark.asyncio
async def test_replicasets_are_served_with_status_and_scale(cell, kubeconfig, api):
    ro = cell.put(samples.rollout_canary())
    for rs in samples.rollout_replica_sets(ro):
        cell.put(rs)
    res = {r["name"] for r in json.loads((await raw(cell, "GET", "/apis/apps/v1"))[1])["resources"]}
    assert {"replicasets", "replicasets/status", "replicasets/scale"} <= res
    rc, out, err = await kubectl(kubeconfig, cell.name, "get", "rs", "-n", "serve-chat", "-o", "name")
    assert rc == 0 and out.split() == ["replicaset.apps/llm-13b-6d9f7c8b5", "replicaset.apps/llm-13b-7b8c9d6f4"], err
    rc, _, err = await kubectl(
        kubeconfig, cell.name, "scale", "rs", "llm-13b-7b8c9d6f4", "-n", "serve-chat", "--replicas=0"
    )
    assert rc == 0, err
    assert cell.get("rs", "llm-13b-7b8c9d6f4", "serve-chat")["spec"]["replicas"] == 0
    owner = cell.get("rs", "llm-13b-6d9f7c8b5", "serve-chat")["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Rollout", "llm-13b", ro["metadata"]["uid"])
    bad = samples.replica_set(pod_hash="0000000000")
    bad["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    with pytest.raises(ApiException) as ei:
        await client.AppsV1Api(api).create_namespaced_replica_set("serve-chat", bad)
    assert ei.value.status == 422 and "`selector` does not match template `labels`" in status_of(ei.value)["message"]


@pytest.mark.asyncio
async def test_an_injected_429_carries_retry_after_like_the_apiservers_throttling(cell):
    cell.fail_next("GET", "/api/v1/nodes$", 429)
    cell.fail_next("GET", "/api/v1/nodes$", 429, retry_after=7)
    for expected in ("1", "7"):
        async with http(cell) as s, s.get(cell.url + "/api/v1/nodes") as r:
            assert (r.status, r.headers["Retry-After"]) == (429, expected)
            assert (await r.json())["details"]["retryAfterSeconds"] == int(expected)
    assert (await raw(cell, "GET", "/api/v1/nodes"))[0] == 200
