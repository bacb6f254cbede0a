"""Tests for the fake Kubernetes API server (world/fbworld/kube), exercised
over real HTTP through kubernetes_asyncio and kubectl (required: the reference
client; a missing kubectl fails these tests, it does not skip them)."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from kube_support import JSON_PATCH, KUEUE, MERGE, SMP, http, kubectl, needs_kubectl, status_of
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from fbworld.kube import FakeKubeCluster, samples, write_kubeconfig

# ------------------------------------------------------------------ samples


@pytest.mark.asyncio
@pytest.mark.parametrize("sample", sorted(samples.ALL))
async def test_samples_are_valid_and_creatable(sample, cell):
    """Each sample passes validation via put() and via a real POST."""
    obj = samples.ALL[sample]()
    c = FakeKubeCluster("scratch")
    c.put(obj)  # raises ValueError when invalid
    assert c.get(obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))
    # Also create it over HTTP, under a new name, in the seeded cell.
    obj["metadata"]["name"] += "-copy"
    group, _, version = obj["apiVersion"].rpartition("/")
    ns = obj["metadata"].get("namespace")
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    plural = cell.registry.by_name(obj["kind"]).plural
    path = f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"
    async with http(cell) as s, s.post(cell.url + path, json=obj) as r:
        assert r.status == 201, await r.text()
        created = await r.json()
    assert created["metadata"]["resourceVersion"] and not cell.warnings


def test_put_rejects_invalid_and_sets_metadata():
    c = FakeKubeCluster("scratch")
    cq = samples.cluster_queue()
    cq["spec"]["stopPolicy"] = "Sometimes"
    with pytest.raises(ValueError, match=r"spec\.stopPolicy"):
        c.put(cq)
    stored = c.put(samples.scaled_object())
    meta = stored["metadata"]
    assert meta["resourceVersion"].isdigit() and meta["uid"] and meta["creationTimestamp"]
    assert meta["generation"] == 1
    assert c.get("namespace", "serve-chat") is not None  # namespace auto-created
    cm = samples.configmap_toolgw()
    del cm["metadata"]["namespace"]
    assert c.put(cm)["metadata"]["namespace"] == "default"


# ---------------------------------------------------------------- discovery


@pytest.mark.asyncio
async def test_discovery(cell):
    async with http(cell) as s:

        async def get(p):
            async with s.get(cell.url + p) as r:
                return r.status, (await r.json() if r.status == 200 else None)

        assert (await get("/version"))[1]["major"] == "1"
        assert (await get("/api"))[1]["versions"] == ["v1"]
        groups = {g["name"]: g for g in (await get("/apis"))[1]["groups"]}
        assert groups["kueue.x-k8s.io"]["preferredVersion"]["version"] == "v1beta2"
        assert {v["version"] for v in groups["kueue.x-k8s.io"]["versions"]} == {"v1beta1", "v1beta2"}
        assert {"keda.sh", "argoproj.io", "jobset.x-k8s.io", "apps", "gateway.networking.k8s.io"} <= set(groups)
        res = {r["name"]: r for r in (await get("/apis/kueue.x-k8s.io/v1beta2"))[1]["resources"]}
        assert res["clusterqueues"]["namespaced"] is False
        assert res["clusterqueues"]["shortNames"] == ["cq"]
        assert "clusterqueues/status" in res
        ro = {r["name"]: r for r in (await get("/apis/argoproj.io/v1alpha1"))[1]["resources"]}
        assert ro["rollouts/scale"]["kind"] == "Scale" and ro["rollouts"]["namespaced"]
        core = {r["name"]: r for r in (await get("/api/v1"))[1]["resources"]}
        assert core["nodes"]["namespaced"] is False and core["pods"]["namespaced"] is True
        assert (await get("/apis/nope.example.com/v1"))[0] == 404
        assert (await get("/openapi/v2"))[0] == 404


# ------------------------------------------------------ kubernetes_asyncio


@pytest.mark.asyncio
async def test_custom_object_merge_and_json_patch(cell, api):
    co = client.CustomObjectsApi(api)
    before = cell.get("clusterqueue", "research-h100")
    out = await co.patch_cluster_custom_object(
        *KUEUE, "clusterqueues", "research-h100", {"spec": {"stopPolicy": "Hold"}}, _content_type=MERGE
    )
    assert out["spec"]["stopPolicy"] == "Hold"
    assert int(out["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    assert out["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert cell.get("cq", "research-h100")["spec"]["stopPolicy"] == "Hold"
    # A list body makes kubernetes_asyncio pick json-patch by itself.
    ops = [{"op": "test", "path": "/spec/stopPolicy", "value": "Hold"}, {"op": "remove", "path": "/spec/stopPolicy"}]
    out = await co.patch_cluster_custom_object(*KUEUE, "clusterqueues", "research-h100", ops)
    assert cell.requests[-1].content_type == JSON_PATCH
    assert out["spec"]["stopPolicy"] == "None"  # schema default re-applied, like the real server
    # remove of a missing path -> 422
    with pytest.raises(ApiException) as ei:
        await co.patch_cluster_custom_object(
            *KUEUE, "clusterqueues", "research-h100", [{"op": "remove", "path": "/spec/nope"}]
        )
    assert ei.value.status == 422 and status_of(ei.value)["reason"] == "Invalid"
    # failing test op -> 422 and nothing changes
    with pytest.raises(ApiException) as ei:
        await co.patch_cluster_custom_object(
            *KUEUE,
            "clusterqueues",
            "research-h100",
            [
                {"op": "test", "path": "/spec/stopPolicy", "value": "Hold"},
                {"op": "replace", "path": "/spec/stopPolicy", "value": "HoldAndDrain"},
            ],
        )
    assert ei.value.status == 422
    assert cell.get("cq", "research-h100")["spec"]["stopPolicy"] == "None"


@pytest.mark.asyncio
async def test_dict_body_without_content_type_is_sent_as_json_patch(cell, api):
    """kubernetes_asyncio quirk: CustomObjectsApi.patch_* sends a dict body as
    application/json-patch+json unless _content_type is given; the real
    server answers 400, and so does the fake."""
    co = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as ei:
        await co.patch_cluster_custom_object(*KUEUE, "clusterqueues", "research-h100", {"spec": {"stopPolicy": "Hold"}})
    assert cell.requests[-1].content_type == JSON_PATCH
    assert ei.value.status == 400 and status_of(ei.value)["reason"] == "BadRequest"


@pytest.mark.asyncio
async def test_strategic_merge_on_custom_resource_is_415(cell, api):
    co = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as ei:
        await co.patch_namespaced_custom_object(
            "keda.sh",
            "v1alpha1",
            "serve-chat",
            "scaledobjects",
            "llm-70b",
            {"metadata": {"annotations": {"x": "y"}}},
            _content_type=SMP,
        )
    assert ei.value.status == 415
    body = status_of(ei.value)
    assert body["reason"] == "UnsupportedMediaType"
    assert "application/merge-patch+json" in body["message"]


@pytest.mark.asyncio
async def test_invalid_enum_is_422_naming_field(cell, api):
    co = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as ei:
        await co.patch_cluster_custom_object(
            *KUEUE, "clusterqueues", "research-h100", {"spec": {"stopPolicy": "Pause"}}, _content_type=MERGE
        )
    body = status_of(ei.value)
    assert ei.value.status == 422 and body["reason"] == "Invalid"
    assert "spec.stopPolicy" in body["message"] and '"Pause"' in body["message"]
    assert body["details"]["causes"][0]["field"] == "spec.stopPolicy"
    assert cell.get("cq", "research-h100")["spec"]["stopPolicy"] == "None"


@pytest.mark.asyncio
async def test_stale_resource_version_conflicts(cell, api):
    co = client.CustomObjectsApi(api)
    cur = await co.get_cluster_custom_object(*KUEUE, "clusterqueues", "research-h100")
    stale = cur["metadata"]["resourceVersion"]
    await co.patch_cluster_custom_object(
        *KUEUE, "clusterqueues", "research-h100", {"spec": {"stopPolicy": "Hold"}}, _content_type=MERGE
    )
    # patch carrying the stale rv -> 409
    with pytest.raises(ApiException) as ei:
        await co.patch_cluster_custom_object(
            *KUEUE,
            "clusterqueues",
            "research-h100",
            {"metadata": {"resourceVersion": stale}, "spec": {"stopPolicy": "None"}},
            _content_type=MERGE,
        )
    assert ei.value.status == 409 and status_of(ei.value)["reason"] == "Conflict"
    # PUT with the stale object -> 409
    with pytest.raises(ApiException) as ei:
        await co.replace_cluster_custom_object(*KUEUE, "clusterqueues", "research-h100", cur)
    assert ei.value.status == 409
    # PUT without resourceVersion on a custom resource -> 422 (no unconditional update)
    del cur["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as ei:
        await co.replace_cluster_custom_object(*KUEUE, "clusterqueues", "research-h100", cur)
    assert ei.value.status == 422
    # patch with the current rv succeeds
    fresh = cell.get("cq", "research-h100")["metadata"]["resourceVersion"]
    out = await co.patch_cluster_custom_object(
        *KUEUE,
        "clusterqueues",
        "research-h100",
        {"metadata": {"resourceVersion": fresh}, "spec": {"stopPolicy": "None"}},
        _content_type=MERGE,
    )
    assert out["spec"]["stopPolicy"] == "None"


@pytest.mark.asyncio
async def test_noop_patch_keeps_resource_version(cell, api):
    co = client.CustomObjectsApi(api)
    rv = cell.get("cq", "research-h100")["metadata"]["resourceVersion"]
    out = await co.patch_cluster_custom_object(
        *KUEUE, "clusterqueues", "research-h100", {"spec": {"stopPolicy": "None"}}, _content_type=MERGE
    )
    assert out["metadata"]["resourceVersion"] == rv


@pytest.mark.asyncio
async def test_status_subresource_separation(cell, api):
    co = client.CustomObjectsApi(api)
    args = ("argoproj.io", "v1alpha1", "serve-chat", "rollouts", "llm-70b")
    # main resource ignores .status
    out = await co.patch_namespaced_custom_object(
        *args, {"spec": {"paused": True}, "status": {"currentStepIndex": 3}}, _content_type=MERGE
    )
    assert out["spec"]["paused"] is True and out["status"]["currentStepIndex"] == 1
    # /status changes only .status
    gen = out["metadata"]["generation"]
    out = await co.patch_namespaced_custom_object_status(
        *args, {"spec": {"paused": False}, "status": {"currentStepIndex": 2}}, _content_type=MERGE
    )
    assert out["spec"]["paused"] is True and out["status"]["currentStepIndex"] == 2
    assert out["metadata"]["generation"] == gen  # status writes do not bump generation
    stored = cell.get("rollout", "llm-70b", "serve-chat")
    assert stored["status"]["canary"]["weights"]["canary"]["weight"] == 20
    # create drops status when a status subresource exists
    so = samples.scaled_object(name="other")
    so["status"] = {"originalReplicaCount": 4}
    created = await co.create_namespaced_custom_object("keda.sh", "v1alpha1", "serve-chat", "scaledobjects", so)
    assert "status" not in created


@pytest.mark.asyncio
async def test_scale_subresource(cell, api):
    co = client.CustomObjectsApi(api)
    scale = await co.get_namespaced_custom_object_scale("argoproj.io", "v1alpha1", "serve-chat", "rollouts", "llm-70b")
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 8
    assert scale["status"] == {"replicas": 10, "selector": "app=llm-70b"}
    await co.patch_namespaced_custom_object_scale(
        "argoproj.io", "v1alpha1", "serve-chat", "rollouts", "llm-70b", {"spec": {"replicas": 2}}, _content_type=MERGE
    )
    assert cell.get("rollout", "llm-70b", "serve-chat")["spec"]["replicas"] == 2
    apps = client.AppsV1Api(api)
    s = await apps.read_namespaced_deployment_scale("chat-router", "serve-chat")
    assert s.spec.replicas == 3 and s.status.selector == "app=chat-router"
    s = await apps.patch_namespaced_deployment_scale("chat-router", "serve-chat", {"spec": {"replicas": 0}})
    assert s.spec.replicas == 0
    assert cell.get("deployment", "chat-router", "serve-chat")["spec"]["replicas"] == 0
    with pytest.raises(ApiException) as ei:
        await apps.patch_namespaced_deployment_scale("chat-router", "serve-chat", {"spec": {"replicas": -1}})
    assert ei.value.status == 422


@pytest.mark.asyncio
async def test_core_types_via_typed_clients(cell, api):
    core = client.CoreV1Api(api)
    node = await core.patch_node(
        "gpu-h100-a017",
        {"spec": {"taints": [{"key": "gpu.corp/quarantine", "value": "xid79", "effect": "NoSchedule"}]}},
    )
    assert cell.requests[-1].content_type == SMP
    assert node.spec.taints[0].key == "gpu.corp/quarantine"
    with pytest.raises(ApiException) as ei:
        await core.patch_node("gpu-h100-a017", {"spec": {"taints": [{"key": "k", "effect": "NoWay"}]}})
    assert ei.value.status == 422 and "spec.taints[0].effect" in status_of(ei.value)["message"]
    with pytest.raises(ApiException) as ei:
        await core.patch_namespaced_config_map("toolgw-flags", "toolgw", {"data": {"n": 3}})
    assert ei.value.status == 422
    cm = await core.patch_namespaced_config_map(
        "toolgw-flags", "toolgw", {"data": {"acme.max_side_effect": "read"}}, _content_type=MERGE
    )
    assert cm.data == {"acme.max_side_effect": "read"}
    pods = await core.list_namespaced_pod("sbx-tenant-acme", label_selector="tenant=acme")
    assert [p.metadata.name for p in pods.items] == ["sess-7f3a9c-0"]
    assert pods.metadata.resource_version
    pods = await core.list_pod_for_all_namespaces(label_selector="tenant=globex")
    assert pods.items == []
    nodes = await core.list_node(
        label_selector="nvidia.com/gpu.present=true", field_selector="metadata.name=gpu-h100-a017"
    )
    assert len(nodes.items) == 1
    # SMP on a merge-keyed list: containers merge by name
    pod = await core.patch_namespaced_pod(
        "sess-7f3a9c-0",
        "sbx-tenant-acme",
        {"spec": {"containers": [{"name": "sandbox", "image": "registry.corp/agents/sandbox:2.4"}]}},
    )
    assert len(pod.spec.containers) == 1 and pod.spec.containers[0].image.endswith("2.4")
    await core.delete_namespaced_pod("sess-7f3a9c-0", "sbx-tenant-acme")
    assert cell.get("pod", "sess-7f3a9c-0", "sbx-tenant-acme") is None


@pytest.mark.asyncio
async def test_create_conflict_not_found_and_bad_bodies(cell, api):
    co = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as ei:
        await co.create_cluster_custom_object(*KUEUE, "clusterqueues", samples.cluster_queue())
    assert ei.value.status == 409 and status_of(ei.value)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as ei:
        await co.get_cluster_custom_object(*KUEUE, "clusterqueues", "missing")
    body = status_of(ei.value)
    assert ei.value.status == 404 and body["reason"] == "NotFound"
    assert body["message"] == 'clusterqueues.kueue.x-k8s.io "missing" not found'
    with pytest.raises(ApiException) as ei:
        await co.get_cluster_custom_object("nope.example.com", "v1", "widgets", "w")
    assert ei.value.status == 404
    with pytest.raises(ApiException) as ei:
        await co.create_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", "no-such-ns", "jobsets", samples.jobset(ns="no-such-ns")
        )
    assert ei.value.status == 404  # namespace must exist
    async with http(cell) as s:
        url = f"{cell.url}/apis/kueue.x-k8s.io/v1beta2/clusterqueues/research-h100"
        async with s.patch(url, data=b"{not json", headers={"Content-Type": MERGE}) as r:
            assert r.status == 400 and (await r.json())["reason"] == "BadRequest"
        async with s.patch(url, data=b"spec: {}", headers={"Content-Type": "application/apply-patch+yaml"}) as r:
            assert r.status == 415
        async with s.post(
            url.rsplit("/", 1)[0], data=b"\x00garbage", headers={"Content-Type": "application/json"}
        ) as r:
            assert r.status == 400


@pytest.mark.asyncio
async def test_unknown_fields_pruned_or_rejected_when_strict(cell, api):
    co = client.CustomObjectsApi(api)
    out = await co.patch_cluster_custom_object(
        *KUEUE, "clusterqueues", "research-h100", {"spec": {"stopPolicyy": "Hold"}}, _content_type=MERGE
    )
    assert "stopPolicyy" not in out["spec"]
    assert cell.warnings == ['unknown field "spec.stopPolicyy"']
    with pytest.raises(ApiException) as ei:
        await co.patch_cluster_custom_object(
            *KUEUE,
            "clusterqueues",
            "research-h100",
            {"spec": {"stopPolicyy": "Hold"}},
            _content_type=MERGE,
            field_validation="Strict",
        )
    assert ei.value.status == 400 and "spec.stopPolicyy" in status_of(ei.value)["message"]


@pytest.mark.asyncio
async def test_version_conversion_v1beta1(cell, api):
    co = client.CustomObjectsApi(api)
    old = await co.get_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", "research-h100")
    assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert old["spec"]["cohort"] == "research" and "cohortName" not in old["spec"]
    await co.patch_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta1", "clusterqueues", "research-h100", {"spec": {"cohort": "prod"}}, _content_type=MERGE
    )
    assert cell.get("cq", "research-h100")["spec"]["cohortName"] == "prod"


@pytest.mark.asyncio
async def test_dry_run_does_not_persist(cell, api):
    co = client.CustomObjectsApi(api)
    out = await co.patch_cluster_custom_object(
        *KUEUE, "clusterqueues", "research-h100", {"spec": {"stopPolicy": "Hold"}}, _content_type=MERGE, dry_run="All"
    )
    assert out["spec"]["stopPolicy"] == "Hold"
    assert cell.get("cq", "research-h100")["spec"]["stopPolicy"] == "None"


# ----------------------------------------------------------- fault injection


@pytest.mark.asyncio
async def test_fail_next_and_records(cell, api):
    co = client.CustomObjectsApi(api)
    cell.fail_next("PATCH", r"/clusterqueues/research-h100$", 403, times=2)
    for _ in range(2):
        with pytest.raises(ApiException) as ei:
            await co.patch_cluster_custom_object(
                *KUEUE, "clusterqueues", "research-h100", {"spec": {"stopPolicy": "Hold"}}, _content_type=MERGE
            )
        assert ei.value.status == 403 and status_of(ei.value)["reason"] == "Forbidden"
    out = await co.patch_cluster_custom_object(
        *KUEUE, "clusterqueues", "research-h100", {"spec": {"stopPolicy": "Hold"}}, _content_type=MERGE
    )
    assert out["spec"]["stopPolicy"] == "Hold"
    patches = cell.find_requests("PATCH", "clusterqueues")
    assert [r.status for r in patches] == [403, 403, 200]
    assert patches[-1].body == {"spec": {"stopPolicy": "Hold"}}
    assert patches[-1].content_type == MERGE and patches[-1].query == {}
    cell.fail_next("*", "/api/v1/nodes", 500, reason="InternalError", message="etcd down")
    with pytest.raises(ApiException) as ei:
        await client.CoreV1Api(api).list_node()
    assert ei.value.status == 500 and status_of(ei.value)["message"] == "etcd down"
    cell.fail_next("GET", "nodes", 503)
    cell.clear_faults()
    assert (await client.CoreV1Api(api).list_node()).items


@pytest.mark.asyncio
async def test_delay_next_times_out_client(cell, api):
    co = client.CustomObjectsApi(api)
    cell.delay_next("GET", "clusterqueues", 2.0)
    with pytest.raises((asyncio.TimeoutError, aiohttp.ClientError)):
        await co.get_cluster_custom_object(*KUEUE, "clusterqueues", "research-h100", _request_timeout=0.3)
    out = await co.get_cluster_custom_object(*KUEUE, "clusterqueues", "research-h100", _request_timeout=2)
    assert out["metadata"]["name"] == "research-h100"


@pytest.mark.asyncio
async def test_two_cells_one_kubeconfig(tmp_path):
    a, b = FakeKubeCluster("cell-a"), FakeKubeCluster("cell-b")
    async with a, b:
        a.put(samples.gpu_node("node-a"))
        b.put(samples.gpu_node("node-b"))
        kc = write_kubeconfig(tmp_path / "kc", {"cell-a": a.url, "cell-b": b.url})
        for cell, node in ((a, "node-a"), (b, "node-b")):
            ac = await config.new_client_from_config(config_file=str(kc), context=cell.name)
            async with ac:
                names = [n.metadata.name for n in (await client.CoreV1Api(ac).list_node()).items]
            assert names == [node]
            assert cell.requests[-1].headers["Authorization"] == "Bearer fake-token"


# ------------------------------------------------------------------ kubectl


@needs_kubectl
@pytest.mark.asyncio
async def test_kubectl_get_and_patch_clusterqueue(cell, kubeconfig):
    rc, out, err = await kubectl(kubeconfig, cell.name, "get", "clusterqueue")
    assert rc == 0, err
    assert "research-h100" in out
    rc, out, err = await kubectl(
        kubeconfig,
        cell.name,
        "patch",
        "clusterqueue",
        "research-h100",
        "--type=merge",
        "-p",
        '{"spec":{"stopPolicy":"Hold"}}',
    )
    assert rc == 0, err
    assert cell.get("cq", "research-h100")["spec"]["stopPolicy"] == "Hold"
    rc, out, err = await kubectl(
        kubeconfig,
        cell.name,
        "patch",
        "cq",
        "research-h100",
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/spec/stopPolicy"}]',
    )
    assert rc == 0, err
    assert cell.get("cq", "research-h100")["spec"]["stopPolicy"] == "None"  # defaulted
    rc, out, err = await kubectl(
        kubeconfig,
        cell.name,
        "patch",
        "clusterqueue",
        "research-h100",
        "--type=merge",
        "-p",
        '{"spec":{"stopPolicy":"Never"}}',
    )
    assert rc != 0 and "Unsupported value" in err


@needs_kubectl
@pytest.mark.asyncio
async def test_kubectl_taint_and_label_node(cell, kubeconfig):
    for _ in range(2):  # --overwrite makes the second run idempotent
        rc, _, err = await kubectl(
            kubeconfig,
            cell.name,
            "taint",
            "nodes",
            "gpu-h100-a017",
            "gpu.corp/quarantine=xid79:NoSchedule",
            "--overwrite",
        )
        assert rc == 0, err
    rc, _, err = await kubectl(
        kubeconfig, cell.name, "label", "nodes", "gpu-h100-a017", "gpu.corp/state=quarantined", "--overwrite"
    )
    assert rc == 0, err
    node = cell.get("node", "gpu-h100-a017")
    # kubectl rebuilds the whole list (its order is kubectl's business); the pool's GPU taint stays.
    assert sorted(node["spec"]["taints"], key=lambda t: t["key"]) == [
        {"key": "gpu.corp/quarantine", "value": "xid79", "effect": "NoSchedule"},
        samples.GPU_TAINT,
    ]
    assert node["metadata"]["labels"]["gpu.corp/state"] == "quarantined"


@needs_kubectl
@pytest.mark.asyncio
async def test_kubectl_annotate_label_patch_misc(cell, kubeconfig):
    rc, _, err = await kubectl(
        kubeconfig,
        cell.name,
        "annotate",
        "scaledobject",
        "llm-70b",
        "-n",
        "serve-chat",
        "autoscaling.keda.sh/paused-replicas=3",
        "--overwrite",
    )
    assert rc == 0, err
    so = cell.get("scaledobject", "llm-70b", "serve-chat")
    assert so["metadata"]["annotations"]["autoscaling.keda.sh/paused-replicas"] == "3"
    rc, _, err = await kubectl(
        kubeconfig,
        cell.name,
        "patch",
        "jobset",
        "pretrain-405b",
        "-n",
        "train-llm",
        "--type=merge",
        "-p",
        '{"spec":{"suspend":true}}',
    )
    assert rc == 0, err
    assert cell.get("jobset", "pretrain-405b", "train-llm")["spec"]["suspend"] is True
    rc, _, err = await kubectl(
        kubeconfig, cell.name, "label", "pod", "-n", "sbx-tenant-acme", "sess-7f3a9c-0", "ir.corp/quarantine=true"
    )
    assert rc == 0, err
    pod = cell.get("pod", "sess-7f3a9c-0", "sbx-tenant-acme")
    assert pod["metadata"]["labels"]["ir.corp/quarantine"] == "true"
    rc, _, err = await kubectl(
        kubeconfig,
        cell.name,
        "patch",
        "configmap",
        "toolgw-flags",
        "-n",
        "toolgw",
        "--type=merge",
        "-p",
        '{"data":{"acme.max_side_effect":"read"}}',
    )
    assert rc == 0, err
    assert cell.get("configmap", "toolgw-flags", "toolgw")["data"] == {"acme.max_side_effect": "read"}


@needs_kubectl
@pytest.mark.asyncio
async def test_kubectl_strategic_patch_on_cr_fails_415(cell, kubeconfig):
    # kubectl patch defaults to --type=strategic; CRs reject that.
    rc, _, err = await kubectl(
        kubeconfig, cell.name, "patch", "jobset", "pretrain-405b", "-n", "train-llm", "-p", '{"spec":{"suspend":true}}'
    )
    assert rc != 0 and "not supported" in err
    assert cell.find_requests("PATCH")[-1].status == 415


@needs_kubectl
@pytest.mark.asyncio
async def test_kubectl_scale_and_json_output(cell, kubeconfig):
    rc, _, err = await kubectl(kubeconfig, cell.name, "scale", "rollout", "llm-70b", "-n", "serve-chat", "--replicas=5")
    assert rc == 0, err
    assert cell.get("rollout", "llm-70b", "serve-chat")["spec"]["replicas"] == 5
    rc, out, err = await kubectl(kubeconfig, cell.name, "get", "httproute", "chat-global", "-n", "edge", "-o", "json")
    assert rc == 0, err
    weights = [b["weight"] for b in json.loads(out)["spec"]["rules"][0]["backendRefs"]]
    assert weights == [50, 50, 0]
