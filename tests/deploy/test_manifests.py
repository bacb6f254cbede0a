"""deploy/ renders with kubectl's built-in kustomize, every object is valid for the pinned Kubernetes
version, the pods are locked down, no secret is embedded, and Firebreak reaches only what it must."""

from __future__ import annotations

import ipaddress
import re

import kubernetes_validate
import pytest
import yaml

from bot.config import Settings
from tests.support.deploy import (
    APPLIED,
    DEPLOY,
    KUBERNETES_VERSION,
    OVERLAYS,
    REPO,
    Obj,
    of_kind,
    one,
    pod_specs,
    policy,
    render,
)

# Kinds that are not Kubernetes' own: validated against their CRD's schema in test_monitoring.py.
CUSTOM = {"monitoring.coreos.com/v1": {"PrometheusRule", "ServiceMonitor"}}
SECRET_SETTINGS = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "ALERTMANAGER_TOKEN")
BOT = {"app.kubernetes.io/name": "firebreak", "app.kubernetes.io/component": "bot"}


def firebreak(objs: list[Obj]) -> Obj:
    return one(objs, "Deployment", "firebreak")


def container(objs: list[Obj]) -> Obj:
    [c] = firebreak(objs)["spec"]["template"]["spec"]["containers"]
    return c


# ------------------------------------------------------------------------------ schemas


@pytest.mark.parametrize("path", APPLIED)
def test_every_object_is_valid_for_the_pinned_kubernetes(path):
    objs = render(path)
    assert objs
    checked = 0
    for obj in objs:
        if obj["kind"] in CUSTOM.get(obj["apiVersion"], ()):
            continue
        # Strict: an unknown field (a typo, a field of a newer version) fails as well as a wrong type.
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            where = ".".join(str(p) for p in e.path)
            pytest.fail(f"{path}: {obj['kind']}/{obj['metadata']['name']}: {where}: {e.message}")
        checked += 1
    assert checked >= 3


def test_the_validator_catches_a_typo_and_a_wrong_type():
    dep = firebreak(render("overlays/example"))
    dep["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, KUBERNETES_VERSION, strict=True)
    dep = firebreak(render("overlays/example"))
    dep["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("path", APPLIED)
def test_every_object_is_labelled_part_of_firebreak(path):
    for obj in render(path):
        labels = obj["metadata"].get("labels") or {}
        assert labels.get("app.kubernetes.io/part-of") == "firebreak", (obj["kind"], obj["metadata"]["name"])


@pytest.mark.parametrize("path", OVERLAYS)
def test_everything_namespaced_lands_in_the_firebreak_namespace(path):
    """...but the Roles (and their bindings) of deploy/rbac: each in a namespace a lever acts in."""
    objs = render(path)
    assert one(objs, "Namespace", "firebreak")
    cluster_scoped = {
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    pol = policy()
    lever_namespaces = {ns for names in pol.namespaces.values() for ns in names}
    lever_namespaces.add(pol.killswitch.configmap.rpartition("/")[0])
    for obj in objs:
        if obj["kind"] in cluster_scoped:
            assert "namespace" not in obj["metadata"], (obj["kind"], obj["metadata"]["name"])
        elif obj["kind"] in ("Role", "RoleBinding"):
            assert obj["metadata"]["namespace"] in lever_namespaces, obj["metadata"]
        else:
            assert obj["metadata"].get("namespace") == "firebreak", (obj["kind"], obj["metadata"]["name"])


# ------------------------------------------------------------------------------ the Deployment


@pytest.mark.parametrize("path", OVERLAYS)
def test_the_deployment_runs_replicas_with_probes_and_resources(path):
    objs = render(path)
    dep = firebreak(objs)
    assert dep["spec"]["replicas"] >= 2
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    c = container(objs)
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["ports"] == [{"name": "http", "containerPort": 3000, "protocol": "TCP"}]
    assert c["args"] == ["--host", "0.0.0.0", "--port", "3000"]  # the image's ENTRYPOINT is `firebreak serve`
    assert re.fullmatch(r".+:[0-9][\w.-]*", c["image"]) and not c["image"].endswith(":latest"), c["image"]
    svc = one(objs, "Service", "firebreak")
    assert svc["spec"]["selector"] == BOT == dep["spec"]["selector"]["matchLabels"]
    assert [p["targetPort"] for p in svc["spec"]["ports"]] == ["http"]
    pdb = one(objs, "PodDisruptionBudget", "firebreak")
    assert pdb["spec"]["selector"]["matchLabels"] == BOT and pdb["spec"]["minAvailable"] == 1


@pytest.mark.parametrize("path", OVERLAYS)
def test_every_pod_is_locked_down(path):
    """Non-root, read-only root filesystem, no privilege escalation, no capabilities, RuntimeDefault
    seccomp, no host namespaces or paths, requests and limits: the restricted Pod Security level."""
    workloads = list(pod_specs(render(path)))
    assert {w["metadata"]["name"] for w, _ in workloads} >= {"firebreak"}
    for w, spec in workloads:
        name = f"{path}: {w['kind']}/{w['metadata']['name']}"
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] > 0, name
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert spec["automountServiceAccountToken"] is False, name
        assert not any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")), name
        assert not any("hostPath" in v for v in spec.get("volumes") or []), name
        for c in [*spec.get("initContainers", []), *spec["containers"]]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["readOnlyRootFilesystem"] is True, name
            assert sc.get("privileged") is not True, name
            assert sc["capabilities"] == {"drop": ["ALL"]}, name
            for kind in ("requests", "limits"):
                assert set(c["resources"][kind]) >= {"cpu", "memory"}, (name, kind)


def test_a_service_account_token_is_mounted_only_where_the_home_cluster_is_the_cell():
    """overlays/fleet reaches its cells through the kubeconfig Secret: no token of its own cluster at all.
    overlays/example's cell is its own cluster: one explicit, hour-long projected token, bound to the
    ClusterRole, and nothing else mounts one."""
    fleet = render("overlays/fleet")
    spec = firebreak(fleet)["spec"]["template"]["spec"]
    assert "serviceAccountToken" not in yaml.safe_dump(spec)
    kube = next(v for v in spec["volumes"] if v["name"] == "kube")
    assert kube["secret"]["secretName"] == "firebreak-kubeconfig"
    assert not of_kind(fleet, "ClusterRoleBinding") and not of_kind(fleet, "RoleBinding")
    assert one(fleet, "ServiceAccount", "firebreak")["automountServiceAccountToken"] is False

    example = render("overlays/example")
    spec = firebreak(example)["spec"]["template"]["spec"]
    kube = next(v for v in spec["volumes"] if v["name"] == "kube")
    assert "secret" not in kube
    sources = kube["projected"]["sources"]
    [token] = [s["serviceAccountToken"] for s in sources if "serviceAccountToken" in s]
    assert token["expirationSeconds"] <= 3600
    files = {token["path"]} | {i["path"] for s in sources if "configMap" in s for i in s["configMap"]["items"]}
    assert files == {"token", "ca.crt", "config"}
    [binding] = of_kind(example, "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": spec["serviceAccountName"], "namespace": "firebreak"}
    ]
    for w, pod in pod_specs(example):
        if w["metadata"]["name"] != "firebreak":
            assert "serviceAccountToken" not in yaml.safe_dump(pod), w["metadata"]["name"]


def test_the_example_kubeconfig_reads_the_projected_files_and_names_the_fleet_context():
    objs = render("overlays/example")
    spec = firebreak(objs)["spec"]["template"]["spec"]
    mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "kube")
    assert mount["readOnly"] is True
    [cm] = [o for o in of_kind(objs, "ConfigMap") if o["metadata"]["name"].startswith("firebreak-kubeconfig-")]
    config = yaml.safe_load(cm["data"]["config"])
    env = next(o for o in of_kind(objs, "ConfigMap") if o["metadata"]["name"].startswith("firebreak-env-"))
    assert env["data"]["KUBECONFIG"] == f"{mount['mountPath']}/config"
    [user] = config["users"]
    assert set(user["user"]) == {"tokenFile"} and user["user"]["tokenFile"] == f"{mount['mountPath']}/token"
    [cluster] = config["clusters"]
    assert cluster["cluster"]["certificate-authority"] == f"{mount['mountPath']}/ca.crt"
    fleet_context = yaml.safe_load((REPO / "policies" / "levers.yaml").read_text())["fleet_context"]
    assert fleet_context in {c["name"] for c in config["contexts"]}


def test_the_fleet_kubeconfig_example_uses_exec_plugins_or_token_files_only():
    config = yaml.safe_load((DEPLOY / "overlays/fleet/kubeconfig.example.yaml").read_text())
    for user in config["users"]:
        assert set(user["user"]) in ({"exec"}, {"tokenFile"}), user
        if "exec" in user["user"]:
            assert user["user"]["exec"]["apiVersion"] == "client.authentication.k8s.io/v1beta1"
    names = {c["name"] for c in config["contexts"]}
    assert "global" in names and {c["context"]["user"] for c in config["contexts"]} == {
        u["name"] for u in config["users"]
    }


@pytest.mark.parametrize("path", OVERLAYS)
def test_every_setting_is_one_firebreak_reads(path):
    """A misspelt variable would be ignored silently (pydantic-settings ignores extras)."""
    objs = render(path)
    known = {name.upper() for name in Settings.model_fields}
    entries = container(objs).get("env") or []
    # A variable that only feeds another's $(NAME) (REDIS_PASSWORD into REDIS_URL) is Kubernetes', not ours.
    feeds = {e["name"] for e in entries if any(f"$({e['name']})" in str(o.get("value", "")) for o in entries)}
    env = {e["name"] for e in entries} - feeds
    [cm] = [o for o in of_kind(objs, "ConfigMap") if o["metadata"]["name"].startswith("firebreak-env-")]
    assert env | set(cm["data"]) <= known, (env | set(cm["data"])) - known
    assert {"REDIS_URL", "KUBECONFIG", "FIREBREAK_POLICY_DIR", "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"} <= env | set(
        cm["data"]
    )


# ------------------------------------------------------------------------------ secrets


@pytest.mark.parametrize("path", APPLIED)
def test_no_secret_is_embedded(path):
    objs = render(path)
    assert not of_kind(objs, "Secret"), "Secrets are created by hand (README), never rendered from the repo"
    for _, spec in pod_specs(objs):
        for c in spec["containers"]:
            for e in c.get("env") or []:
                if e["name"] in SECRET_SETTINGS:
                    assert set(e) == {"name", "valueFrom"} and "secretKeyRef" in e["valueFrom"], e
                if e["name"] == "REDIS_URL" and "value" in e:
                    # A password in REDIS_URL is a reference to a Secret's value, never the value itself.
                    userinfo = e["value"].split("@", 1)[0] if "@" in e["value"] else ""
                    assert not userinfo or userinfo.endswith(":$(REDIS_PASSWORD)"), e
    text = yaml.safe_dump_all(objs)
    for pattern in (
        r"xox[abpr]-[0-9A-Za-z-]{8,}",
        r"xapp-[0-9A-Za-z-]{8,}",
        r"(?m)^\s*(token|password|client-key-data):",
    ):
        assert not re.search(pattern, text), pattern


def secret_refs(objs: list[Obj]) -> set[tuple[str, str]]:
    """(Secret, key) of every Secret a pod needs: its env's secretKeyRefs and its Secret volumes."""
    refs = set()
    for _, spec in pod_specs(objs):
        for c in spec["containers"]:
            for e in c.get("env") or []:
                ref = (e.get("valueFrom") or {}).get("secretKeyRef")
                if ref and not ref.get("optional"):  # SLACK_APP_TOKEN: Socket Mode only
                    refs.add((ref["name"], ref["key"]))
        for v in spec.get("volumes") or []:
            if "secret" in v:  # the kubeconfig's `config`, or the keys the volume names (the audit key)
                keys = [i["key"] for i in v["secret"].get("items") or []] or ["config"]
                refs |= {(v["secret"]["secretName"], key) for key in keys}
    return refs


def undocumented(refs: set[tuple[str, str]], section: str) -> set[tuple[str, str]]:
    """The (Secret, key)s `section` creates no `kubectl create secret generic` line for."""
    return {
        (name, key)
        for name, key in refs
        if not re.search(rf"create secret generic {name}\b[^`]*--from-(literal|file)={key}=", section)
    }


def test_the_docs_create_every_secret_the_deployment_references():
    """A stranger follows docs/operating.md "Deploying to a cluster": every Secret and key a pod needs
    is created there, with kubectl create secret."""
    readme = (REPO / "docs" / "operating.md").read_text()
    section = readme.split("## Deploying to a cluster", 1)[1].split("\n## ", 1)[0]
    for path in OVERLAYS:
        refs = secret_refs(render(path))
        # The Slack credentials at least: an empty set would make the check below pass on nothing.
        assert ("firebreak-slack", "bot-token") in refs, (path, refs)
        assert not undocumented(refs, section), (path, undocumented(refs, section))
    # The check itself: a Secret the docs never create is caught.
    objs = render("overlays/example")
    ref = {"secretKeyRef": {"name": "firebreak-undocumented", "key": "token"}}
    container(objs)["env"].append({"name": "SLACK_BOT_TOKEN", "valueFrom": ref})
    assert undocumented(secret_refs(objs), section) == {("firebreak-undocumented", "token")}


# ------------------------------------------------------------------------------ policies


def test_the_policy_configmap_is_the_shipped_policy():
    shipped = {p.name: p.read_text() for p in (REPO / "policies").glob("*.yaml")}
    copies = {p.name: p.read_text() for p in (DEPLOY / "base" / "policies").glob("*.yaml")}
    stale = sorted(n for n in shipped.keys() | copies.keys() if shipped.get(n) != copies.get(n))
    assert not stale, (
        f"deploy/base/policies differs from policies/ in {stale}: cp policies/*.yaml deploy/base/policies/"
    )
    objs = render("overlays/example")
    [cm] = [o for o in of_kind(objs, "ConfigMap") if o["metadata"]["name"].startswith("firebreak-policies-")]
    assert cm["data"] == shipped
    vol = next(v for v in firebreak(objs)["spec"]["template"]["spec"]["volumes"] if v["name"] == "policies")
    assert vol["configMap"]["name"] == cm["metadata"]["name"]  # the hash suffix rolls the pods on a change
    mount = next(m for m in container(objs)["volumeMounts"] if m["name"] == "policies")
    env = next(o for o in of_kind(objs, "ConfigMap") if o["metadata"]["name"].startswith("firebreak-env-"))
    assert env["data"]["FIREBREAK_POLICY_DIR"] == mount["mountPath"]


# ------------------------------------------------------------------------------ Redis


def test_the_example_runs_redis_with_aof_on_a_volume_and_points_firebreak_at_it():
    objs = render("overlays/example")
    sts = one(objs, "StatefulSet", "firebreak-redis")
    [redis] = sts["spec"]["template"]["spec"]["containers"]
    args = redis["args"]
    assert args[args.index("--appendonly") + 1] == "yes"
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction"
    data = args[args.index("--dir") + 1]
    [claim] = sts["spec"]["volumeClaimTemplates"]
    assert {"name": claim["metadata"]["name"], "mountPath": data} in redis["volumeMounts"]
    assert "--protected-mode" not in args  # its default: on
    svc = one(objs, "Service", "firebreak-redis")
    env = container(objs)["env"]
    names = [e["name"] for e in env]
    [url] = [e for e in env if e["name"] == "REDIS_URL"]
    assert url == {
        "name": "REDIS_URL",
        "value": f"redis://firebreak:$(REDIS_PASSWORD)@{svc['metadata']['name']}:{svc['spec']['ports'][0]['port']}/0",
    }
    # $(VAR) expands only a variable defined earlier in the list.
    assert names.index("REDIS_PASSWORD") < names.index("REDIS_URL")
    secret = {"secretKeyRef": {"name": "firebreak-redis-auth", "key": "password"}}
    assert next(e for e in env if e["name"] == "REDIS_PASSWORD")["valueFrom"] == secret
    assert next(e for e in redis["env"] if e["name"] == "REDIS_PASSWORD")["valueFrom"] == secret


def test_the_fleet_uses_an_external_redis_from_a_secret():
    objs = render("overlays/fleet")
    assert not of_kind(objs, "StatefulSet")
    [url] = [e for e in container(objs)["env"] if e["name"] == "REDIS_URL"]
    assert url["valueFrom"]["secretKeyRef"] == {"name": "firebreak-redis", "key": "url"}


# ------------------------------------------------------------------------------ NetworkPolicy

PRIVATE = [ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16")]
PLACEHOLDER = ipaddress.ip_network("192.0.2.0/24")  # base's API-server address, replaced by every overlay


def _selects(np: Obj, labels: dict[str, str]) -> bool:
    want = np["spec"]["podSelector"].get("matchLabels") or {}
    return all(labels.get(k) == v for k, v in want.items())


def _ports(rule: Obj) -> frozenset[tuple[str, int]]:
    return frozenset((p.get("protocol", "TCP"), p["port"]) for p in rule.get("ports") or [])


def _purpose(rule: Obj) -> str:
    """What an egress rule of Firebreak's is for, or fail: every rule names its ports and peers."""
    ports, peers = _ports(rule), rule.get("to") or []
    assert ports and peers, f"an egress rule open to every port or every peer: {rule}"
    blocks = [ipaddress.ip_network(p["ipBlock"]["cidr"]) for p in peers if "ipBlock" in p]
    if ports == {("UDP", 53), ("TCP", 53)}:
        assert peers == [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
            }
        ], peers
        return "dns"
    if ports == {("TCP", 9090)}:
        assert all("podSelector" in p and "ipBlock" not in p for p in peers), peers
        return "prometheus"
    if ports <= {("TCP", 6379), ("TCP", 6380)}:
        assert all(
            p.get("podSelector") == {"matchLabels": {"app.kubernetes.io/name": "firebreak-redis"}} for p in peers
        ) or (blocks and all(b.prefixlen >= 16 for b in blocks)), peers
        return "redis"
    if ports == {("TCP", 443), ("TCP", 6443)}:
        assert len(blocks) == len(peers) and all(b.prefixlen >= 8 for b in blocks), peers
        assert PLACEHOLDER not in blocks, "the overlay kept base's placeholder API-server address"
        return "apiservers"
    if ports == {("TCP", 443)}:
        # Slack: public addresses only, never the cluster's private ranges or the metadata server.
        [peer] = peers
        assert peer["ipBlock"]["cidr"] == "0.0.0.0/0"
        excepted = [ipaddress.ip_network(n) for n in peer["ipBlock"]["except"]]
        for net in PRIVATE:
            assert any(net.subnet_of(e) for e in excepted), net
        return "slack"
    raise AssertionError(f"an egress rule for something Firebreak does not talk to: {rule}")


@pytest.mark.parametrize("path", OVERLAYS)
def test_firebreak_reaches_only_dns_redis_prometheus_the_api_servers_and_slack(path):
    objs = render(path)
    labels = firebreak(objs)["spec"]["template"]["metadata"]["labels"]
    policies = [np for np in of_kind(objs, "NetworkPolicy") if _selects(np, labels)]
    assert any("Egress" in np["spec"]["policyTypes"] for np in policies)  # egress is isolated at all
    purposes = [_purpose(rule) for np in policies for rule in np["spec"].get("egress") or []]
    assert sorted(purposes) == sorted(["dns", "redis", "prometheus", "apiservers", "slack"]), purposes
    ingress = [
        rule for np in policies if "Ingress" in np["spec"]["policyTypes"] for rule in np["spec"].get("ingress") or []
    ]
    assert ingress and all(_ports(rule) == {("TCP", 3000)} for rule in ingress), ingress


def test_only_firebreak_reaches_redis_and_redis_reaches_nothing():
    objs = render("overlays/example")
    labels = one(objs, "StatefulSet", "firebreak-redis")["spec"]["template"]["metadata"]["labels"]
    [np] = [np for np in of_kind(objs, "NetworkPolicy") if _selects(np, labels)]
    assert set(np["spec"]["policyTypes"]) == {"Ingress", "Egress"} and np["spec"]["egress"] == []
    [rule] = np["spec"]["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": BOT}}] and _ports(rule) == {("TCP", 6379)}
