"""The session's real kube-apiserver is what the lever suite assumes: the bot's token authenticates as
its ServiceAccount, RBAC (not an allow-all authorizer) decides, the upstream CRDs are served, and the
stand-ins for the missing controllers (namespace, node) leave objects as a real cluster has them."""

from __future__ import annotations

import json

import pytest

from fbworld.kube import samples
from tests.support.kube_apiserver import BOT_NS, BOT_SA, NOT_READY_TAINT, KubeAPIServer, KubeBinariesMissing, binaries


def test_the_bot_token_is_its_serviceaccount_and_rbac_decides(kube_apiserver: KubeAPIServer):
    s = kube_apiserver
    review = json.loads(s.kubectl("auth", "whoami", "-o", "json", kubeconfig=s.bot_kubeconfig))
    assert review["status"]["userInfo"]["username"] == f"system:serviceaccount:{BOT_NS}:{BOT_SA}"
    # No RoleBinding names it here: the server's RBAC refuses, with the API's 403 wording.
    out = s.kubectl("get", "secrets", "-n", BOT_NS, kubeconfig=s.bot_kubeconfig, check=False)
    assert out == ""
    err = s.kubectl_result("get", "secrets", "-n", BOT_NS, kubeconfig=s.bot_kubeconfig).stderr
    assert f'User "system:serviceaccount:{BOT_NS}:{BOT_SA}" cannot list resource "secrets"' in err, err


def test_the_upstream_crds_are_served(kube_apiserver: KubeAPIServer):
    names = set(kube_apiserver.kubectl("get", "crd", "-o", "name").split())
    want = [
        "rollouts.argoproj.io",
        "httproutes.gateway.networking.k8s.io",
        "jobsets.jobset.x-k8s.io",
        "scaledobjects.keda.sh",
        "clusterqueues.kueue.x-k8s.io",
        "workloads.kueue.x-k8s.io",
    ]
    assert {f"customresourcedefinition.apiextensions.k8s.io/{n}" for n in want} <= names


def test_a_node_is_created_as_a_kubelet_registers_it_and_made_ready(kube_apiserver: KubeAPIServer):
    s = kube_apiserver
    node = samples.gpu_node("gpu-realkube-0001", "us-east-3")
    s.apply({k: v for k, v in node.items() if k != "status"})
    # The trap: TaintNodesByCondition taints every new Node not-ready; no controller here lifts it.
    assert NOT_READY_TAINT in [t["key"] for t in s.get("node", "gpu-realkube-0001")["spec"].get("taints") or []]
    created = s.put_node(node)
    # TaintNodesByCondition tainted it at create; put_node lifted that taint as the controller would.
    assert NOT_READY_TAINT not in [t["key"] for t in created["spec"].get("taints") or []]
    assert node["metadata"]["labels"].items() <= created["metadata"]["labels"].items()
    ready = [c for c in created["status"].get("conditions") or [] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True"
    s.delete("node", "gpu-realkube-0001")


def test_a_pod_is_admitted_in_a_namespace_made_here(kube_apiserver: KubeAPIServer):
    s = kube_apiserver
    s.namespace("realkube-pods")
    pod = samples.pod(ns="realkube-pods", name="p-0")
    s.apply(pod)
    got = s.get("pod", "p-0", "realkube-pods")
    assert got["spec"]["serviceAccountName"] == "default"  # the ServiceAccount admission plugin's default
    s.delete("pod", "p-0", namespace="realkube-pods")


def test_without_the_binaries_the_fixture_says_how_to_build_them(tmp_path, monkeypatch):
    """The fixture fails (never skips) with one line naming the build script."""
    monkeypatch.setenv("FIREBREAK_KUBE_BIN", str(tmp_path))
    with pytest.raises(KubeBinariesMissing) as e:
        binaries()
    want = f"{tmp_path}/kube-apiserver is missing: run `bash .ci/build-kube.sh`"
    assert str(e.value) == want + " (or set FIREBREAK_KUBE_BIN to its output)"
