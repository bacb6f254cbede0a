"""Least privilege on a REAL kube-apiserver: deploy/cell (RBAC and admission policies) applied with
`kubectl apply -k`, then writes sent as Firebreak's own ServiceAccount with kubectl.

- Every lever's exact patches (its plan, built by the lever from the object it reads as the bot, each
  call's own `kubectl` line) pass, dry run and real, and read back; so do their undo patches (but
  killswitch's: restoring a wider level is a widening, refused by design).
- Every forbidden variant is refused by the API server with the rule's message, the same with
  `--dry-run=server`, and leaves the object as it was.
- The admin identity is not restricted by the policies (their binding matches only Firebreak).
- Should RBAC ever grant Firebreak more (cluster-admin, for the test), the policies still refuse
  other fields, other namespaces, creates and deletes.
"""

from __future__ import annotations

import copy
import json
import shlex
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.clusters import KubeError
from fbworld.kube import samples
from levers.base import Ctx, Lever, Target, params_of, version_of
from levers.catalogue import LEVERS
from levers.plan import MERGE, ApiCall, Plan, read
from tests.support.catalogue import assert_every_lever
from tests.support.deploy import DEPLOY, policy
from tests.support.harness import RunningApp, start_app
from tests.support.kube_apiserver import KubeAPIServer

CELL = "us-east-3"  # the bot's kubeconfig context (a cell) and the fleet context, both this server
FLEET = "global"
USER = "system:serviceaccount:firebreak:firebreak"


# ----------------------------------------------------------------------------------- the cluster


@dataclass
class Cluster:
    server: KubeAPIServer

    @property
    def admin(self) -> Path:
        return self.server.admin_kubeconfig

    @property
    def bot(self) -> Path:
        """Firebreak's: contexts us-east-3, us-east-1 and global, the ServiceAccount's token."""
        return self.server.bot_kubeconfig

    def run(self, kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return self.server.kubectl_result(*args, kubeconfig=kubeconfig, input=stdin)

    def admin_ok(self, *args: str, stdin: str | None = None) -> str:
        return self.server.kubectl(*args, input=stdin)

    def bot_run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(self.bot, "--context", CELL, *args)

    def get(self, resource: str, name: str, ns: str | None = None) -> dict[str, Any]:
        return self.server.get(resource, name, ns)


def _namespaces() -> set[str]:
    pol = policy()
    out = {ns for names in pol.namespaces.values() for ns in names}
    out.add(pol.killswitch.configmap.rpartition("/")[0])
    return out


def _fresh(obj: dict[str, Any]) -> dict[str, Any]:
    """A sample as a person would create it: no status, nothing the server sets."""
    obj = copy.deepcopy(obj)
    obj.pop("status", None)
    for key in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
        obj["metadata"].pop(key, None)
    return obj


@pytest.fixture(scope="module")
def cluster(kube_apiserver: KubeAPIServer, no_controllers: None) -> Iterator[Cluster]:
    """deploy/cell applied as a platform team would (`kubectl apply -k`) to the session's server, whose
    lever namespaces exist first. It stays applied: the session's other bot tests get the same RBAC
    and policies a cell has (`kubectl delete -k` would delete the namespace firebreak and the bot's
    ServiceAccount with it). The objects this module seeds are deleted at the end.

    No controller runs meanwhile (`no_controllers`): what is under test is the API server's admission
    of each write, on objects exactly as seeded (the queued JobSet's Workload written as Kueue would),
    every refused write checked by an unchanged resourceVersion."""
    for ns in sorted(_namespaces() | {"other-tenant"}):
        kube_apiserver.namespace(ns)
    kube_apiserver.apply_k(DEPLOY / "cell")
    c = Cluster(kube_apiserver)
    yield c
    unseed(c)


@pytest.fixture
async def app(slack, redis_url, clock, cluster: Cluster, tmp_path: Path) -> AsyncIterator[RunningApp]:
    """The app with the bot's kubeconfig: the levers plan with its client, as the bot."""
    running = await start_app(slack, redis_url, clock, kubeconfig=str(cluster.bot))
    yield running
    await running.stop()


# --------------------------------------------------------------------------------- the objects


def objects() -> list[dict[str, Any]]:
    """One object per lever, as a person would create it (the Workload comes later: it needs the uid)."""
    deployment = samples.deployment(name="llm-70b", replicas=6)
    so = samples.scaled_object()
    so["spec"]["scaleTargetRef"] = {"name": "llm-70b"}  # KEDA's default target: an apps/v1 Deployment
    objs = [
        samples.cluster_queue(),
        deployment,
        so,
        samples.rollout(),
        samples.http_route(backends={"cell-us-east-1": 50, "cell-us-east-2": 50, "cell-us-east-3": 0}),
        samples.gpu_node("gpu-a3-0001", CELL),
        samples.jobset(),
        samples.kueue_jobset(name="finetune-8b"),
        samples.pod(),
        samples.pod(ns="other-tenant", name="sess-other"),
        samples.configmap_toolgw(data={"acme.max_side_effect": "write", "default.max_side_effect": "write"}),
        samples.configmap_toolgw(ns="serve-chat", data={"acme.max_side_effect": "write"}),  # same name elsewhere
        samples.node_health_check(pause_requests=["maintenance-window-42"]),  # another party's pause entry
    ]
    return [_fresh(o) for o in objs]


def unseed(c: Cluster) -> None:
    docs = yaml.safe_dump_all(objects())
    c.admin_ok("delete", "workloads.kueue.x-k8s.io", "--all", "-n", "train-llm", "--ignore-not-found")
    c.admin_ok("delete", "-f", "-", "--ignore-not-found", "--wait", "--grace-period=0", "--force", stdin=docs)


def seed(c: Cluster) -> None:
    """Every object deleted and created again: each test starts from the same objects."""
    unseed(c)
    c.admin_ok("create", "-f", "-", stdin=yaml.safe_dump_all(objects()))
    # The Kueue-queued JobSet's Workload, as Kueue would create it (owned by the JobSet's uid).
    js = next(o for o in objects() if o["metadata"]["name"] == "finetune-8b")
    js["metadata"]["uid"] = c.get("jobsets.jobset.x-k8s.io", "finetune-8b", "train-llm")["metadata"]["uid"]
    wl = _fresh(samples.workload_for(js))
    wl["metadata"]["ownerReferences"] = samples.workload_for(js)["metadata"]["ownerReferences"]
    c.admin_ok("create", "-f", "-", stdin=yaml.safe_dump(wl))


@pytest.fixture
def seeded(cluster: Cluster) -> Cluster:
    """Fresh objects for a test that changes them."""
    seed(cluster)
    return cluster


@pytest.fixture(scope="module")
def seeded_once(cluster: Cluster) -> Cluster:
    """Fresh objects for the tests that only send refused writes (each checks nothing changed)."""
    seed(cluster)
    return cluster


# ---------------------------------------------------------------------------------- lever plans


async def plan_of(
    app: RunningApp, lever_name: str, target: str, params: dict[str, Any], context: str
) -> tuple[Ctx, Plan]:
    """The lever's own plan for the object as the bot reads it (what a pull would send)."""
    lever: Lever = LEVERS[lever_name]
    client = await app.services.clusters.client(context)
    ctx = Ctx(
        svc=app.services,
        kube=client,
        req_id="REQ-7",
        incident="INC-7",
        cell=CELL if context == CELL else "fleet",
        context=context,
        target=Target.parse(target, lever.kind.namespaced, lever.kind.kind),
        params=params_of(lever, params),
        requester="U_OPS",
        version=await version_of(lever.kind, client),
    )
    return ctx, await lever.plan(ctx, await client.get(lever.path(ctx)))


def kubectl_of(c: Cluster, line: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """Run a plan call's own kubectl line (`kubectl --context C patch ...`) with the bot's kubeconfig."""
    argv = shlex.split(line, comments=True)
    assert argv[0] == "kubectl"
    return c.run(c.bot, *argv[1:], *extra)


async def send(c: Cluster, ctx: Ctx, plan: Plan, dry_run: bool) -> None:
    for call in plan.calls:
        if call.path.endswith("/status"):
            # `kubectl patch --subresource=status` reads rollouts/status first, which RBAC does not grant:
            # the bot (and `kubectl argo rollouts abort`) send the PATCH alone, as here.
            await ctx.kube.send(call, dry_run=dry_run)
        else:
            done = kubectl_of(c, call.kubectl, *(["--dry-run=server"] if dry_run else []))
            assert done.returncode == 0, f"{call.kubectl}\n{done.stderr}"


PULLS = [
    ("kueue-hold", "research-h100", {}, CELL),
    ("kueue-hold-drain", "research-h100", {}, CELL),
    ("keda-pause", "serve-chat/llm-70b", {}, CELL),
    ("node-quarantine", "gpu-a3-0001", {"reason": "xid79"}, CELL),
    ("jobset-suspend", "train-llm/pretrain-405b", {}, CELL),
    ("jobset-suspend", "train-llm/finetune-8b", {}, CELL),  # Kueue-queued: through its Workload
    ("killswitch", "toolgw/toolgw-flags", {"tenant": "acme", "level": "read"}, CELL),
    ("killswitch", "toolgw/toolgw-flags", {"tenant": "newco", "level": "read"}, CELL),  # no key: default's
    ("sandbox-quarantine", "sbx-tenant-acme/sess-7f3a9c-0", {}, CELL),
    ("route-weight", "edge/chat-global", {"backend": "cell-us-east-1"}, FLEET),
    ("rollout-abort", "serve-chat/llm-70b", {}, CELL),
    ("remediation-pause", "nhc-gpu", {}, CELL),
]


def test_the_pulls_name_every_lever():
    assert_every_lever((pull[0] for pull in PULLS), "tests/realkube/test_admission.py PULLS")


@pytest.mark.parametrize(("lever", "target", "params", "context"), PULLS, ids=[f"{p[0]}:{p[1]}" for p in PULLS])
async def test_every_lever_write_passes_as_the_bot(app, seeded, lever, target, params, context):
    c = seeded
    ctx, plan = await plan_of(app, lever, target, params, context)
    assert plan.calls and plan.changes
    path = LEVERS[lever].object_path(ctx, plan)
    before = await ctx.kube.get(path)
    await send(c, ctx, plan, dry_run=True)
    assert (await ctx.kube.get(path))["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    await send(c, ctx, plan, dry_run=False)
    after = await ctx.kube.get(path)
    assert {p: read(after, p) for p in plan.changes} == plan.changes

    ops = LEVERS[lever].undo_ops(plan.changes, plan.pre_state, after)
    if lever == "killswitch":
        # Why it has no Firebreak undo: putting back the wider level it narrowed is a widening, which
        # Firebreak's identity may not do. A person runs the line undo's refusal gives.
        assert not LEVERS[lever].reversible
        done = c.bot_run("patch", *_where(path), "--type=json", "-p", json.dumps(ops))
        assert done.returncode != 0
        assert "firebreak-configmaps: Firebreak may change only a tenant's level" in done.stderr, done.stderr
        assert "widen" in done.stderr, done.stderr
        return
    if not LEVERS[lever].reversible:
        return
    done = c.bot_run("patch", *_where(path), "--type=json", "-p", json.dumps(ops))
    assert done.returncode == 0, f"undo {ops}\n{done.stderr}"
    restored = await ctx.kube.get(path)
    assert LEVERS[lever].not_restored(plan.changes, plan.pre_state, restored) == []


def _where(api_path: str) -> list[str]:
    """kubectl's resource arguments for an API path (/api/v1/namespaces/ns/pods/name, /apis/g/v/...)."""
    parts = api_path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    ns = None
    if rest[0] == "namespaces":
        ns, rest = rest[1], rest[2:]
    resource = f"{rest[0]}.{group}" if group else rest[0]
    return [resource, rest[1], *(["-n", ns] if ns else [])]


# ------------------------------------------------------------------------------ forbidden variants


@dataclass(frozen=True)
class Variant:
    id: str
    args: tuple[str, ...]  # kubectl arguments after `--context us-east-3`
    refused: str  # the start of the message the API server answers with (the rule names itself)
    rbac: bool = False  # refused by RBAC (403 Forbidden, User ... cannot ...), not by a policy


def _patch(resource: str, name: str, ns: str | None, kind: str, body: Any) -> tuple[str, ...]:
    return (*(["-n", ns] if ns else []), "patch", resource, name, f"--type={kind}", "-p", json.dumps(body))


POD = ("pods", "sess-7f3a9c-0", "sbx-tenant-acme")
NODE = ("nodes", "gpu-a3-0001", None)
ROUTE = ("httproutes.gateway.networking.k8s.io", "chat-global", "edge")
SO = ("scaledobjects.keda.sh", "llm-70b", "serve-chat")
CQ = ("clusterqueues.kueue.x-k8s.io", "research-h100", None)
FLAGS = ("configmaps", "toolgw-flags", "toolgw")
JOBSET = ("jobsets.jobset.x-k8s.io", "pretrain-405b", "train-llm")
ROLLOUT = ("rollouts.argoproj.io", "llm-70b", "serve-chat")
NHC = ("nodehealthchecks.remediation.medik8s.io", "nhc-gpu", None)

VARIANTS = [
    Variant(
        "pod-image",
        _patch(*POD, "json", [{"op": "replace", "path": "/spec/containers/0/image", "value": "evil.example/miner:1"}]),
        "firebreak-pods: Firebreak may change only the pod label ir.corp/quarantine; this request changes spec",
    ),
    Variant(
        "pod-other-label",
        _patch(*POD, "merge", {"metadata": {"labels": {"app": "evil"}}}),
        "firebreak-pods: Firebreak may change only the pod label ir.corp/quarantine; this request changes label app",
    ),
    Variant(
        "node-other-taint",
        _patch(
            *NODE, "json", [{"op": "add", "path": "/spec/taints/-", "value": {"key": "evil", "effect": "NoExecute"}}]
        ),
        "firebreak-nodes: Firebreak may change only its taint gpu.corp/quarantine:NoSchedule",
    ),
    Variant(
        "node-own-taint-noexecute",
        _patch(
            *NODE,
            "json",
            [{"op": "add", "path": "/spec/taints/-", "value": {"key": "gpu.corp/quarantine", "effect": "NoExecute"}}],
        ),
        "firebreak-nodes: Firebreak may change only its taint gpu.corp/quarantine:NoSchedule",
    ),
    Variant(
        "node-cordon",
        _patch(*NODE, "merge", {"spec": {"unschedulable": True}}),
        "firebreak-nodes: Firebreak may change only its taint gpu.corp/quarantine:NoSchedule and the labels "
        "gpu.corp/quarantine-reason and gpu.corp/quarantine-ticket; this request changes spec.unschedulable",
    ),
    Variant(
        "node-other-label",
        _patch(*NODE, "merge", {"metadata": {"labels": {"gpu.corp/pool": "attacker"}}}),
        "firebreak-nodes: Firebreak may change only its taint gpu.corp/quarantine:NoSchedule and the labels "
        "gpu.corp/quarantine-reason and gpu.corp/quarantine-ticket; this request changes label gpu.corp/pool",
    ),
    Variant(
        "route-backend-added",
        _patch(
            *ROUTE,
            "json",
            [
                {
                    "op": "add",
                    "path": "/spec/rules/0/backendRefs/-",
                    "value": {"name": "evil", "port": 443, "weight": 50},
                }
            ],
        ),
        "firebreak-httproutes: Firebreak may change only the weights of a route's existing backendRefs; "
        "this request adds or removes a backendRef",
    ),
    Variant(
        "route-backend-renamed",
        _patch(*ROUTE, "json", [{"op": "replace", "path": "/spec/rules/0/backendRefs/2/name", "value": "evil"}]),
        "firebreak-httproutes: Firebreak may change only the weights of a route's existing backendRefs; "
        "this request changes a backendRef's name",
    ),
    Variant(
        "route-mirror-filter",
        _patch(
            *ROUTE,
            "json",
            [
                {
                    "op": "add",
                    "path": "/spec/rules/0/filters",
                    "value": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "evil", "port": 80}}}],
                }
            ],
        ),
        "firebreak-httproutes: Firebreak may change only the weights of a route's existing backendRefs; "
        "this request changes a rule's matches, filters",
    ),
    Variant(
        "route-rule-added",
        _patch(
            *ROUTE,
            "json",
            [{"op": "add", "path": "/spec/rules/-", "value": {"backendRefs": [{"name": "evil", "port": 443}]}}],
        ),
        "firebreak-httproutes: Firebreak may change only the weights of a route's existing backendRefs; "
        "this request adds or removes a rule",
    ),
    Variant(
        "scaledobject-trigger",
        _patch(
            *SO,
            "json",
            [{"op": "replace", "path": "/spec/triggers/0/metadata/serverAddress", "value": "https://evil.example"}],
        ),
        "firebreak-scaledobjects: Firebreak may change only KEDA's pause annotations autoscaling.keda.sh/paused, "
        "autoscaling.keda.sh/paused-replicas and autoscaling.keda.sh/paused-scale-in; this request changes spec",
    ),
    Variant(
        "scaledobject-other-annotation",
        _patch(*SO, "merge", {"metadata": {"annotations": {"autoscaling.keda.sh/transfer-hpa-ownership": "true"}}}),
        "firebreak-scaledobjects: Firebreak may change only KEDA's pause annotations",
    ),
    Variant(
        "clusterqueue-quota",
        _patch(
            *CQ,
            "json",
            [{"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota", "value": 100000}],
        ),
        "firebreak-clusterqueues: Firebreak may change only spec.stopPolicy; this request changes spec.resourceGroups",
    ),
    Variant(
        "killswitch-widened",
        _patch(*FLAGS, "merge", {"data": {"acme.max_side_effect": "money"}}),
        "firebreak-configmaps: Firebreak may change only a tenant's level in the kill-switch ConfigMap "
        "toolgw/toolgw-flags, and only narrowing it: the kill switch only narrows (levels none, read, write, money, "
        "narrowest first); this widens acme.max_side_effect write -> money",
    ),
    Variant(
        "killswitch-new-tenant-wider-than-default",
        _patch(*FLAGS, "merge", {"data": {"newco.max_side_effect": "money"}}),
        "firebreak-configmaps: Firebreak may change only a tenant's level in the kill-switch ConfigMap "
        "toolgw/toolgw-flags, and only narrowing it: the kill switch only narrows",
    ),
    Variant(
        "killswitch-key-removed",
        _patch(*FLAGS, "json", [{"op": "remove", "path": "/data/acme.max_side_effect"}]),
        "firebreak-configmaps: Firebreak may change only a tenant's level in the kill-switch ConfigMap "
        "toolgw/toolgw-flags, and only narrowing it; removing a tenant's key widens it to the default",
    ),
    Variant(
        "killswitch-other-key",
        _patch(*FLAGS, "merge", {"data": {"upstream_url": "https://evil.example"}}),
        "firebreak-configmaps: Firebreak may change only a tenant's level in the kill-switch ConfigMap "
        "toolgw/toolgw-flags, and only narrowing it; this request changes upstream_url",
    ),
    Variant(
        "jobset-other-field",
        _patch(*JOBSET, "merge", {"spec": {"ttlSecondsAfterFinished": 1}}),
        "firebreak-jobsets: Firebreak may change only spec.suspend; this request changes spec.ttlSecondsAfterFinished",
    ),
    Variant(
        "rollout-spec",
        _patch(*ROLLOUT, "merge", {"spec": {"replicas": 0}}),
        "firebreak-rollouts: Firebreak may change only its own annotations on a Rollout; this request changes spec",
    ),
    Variant(
        "nhc-other-entry-removed",
        _patch(*NHC, "merge", {"spec": {"pauseRequests": ["firebreak:INC-1"]}}),
        "firebreak-nodehealthchecks: Firebreak may change only its own pauseRequests entries (firebreak:<INC-n>); "
        "this request changes another entry",
    ),
    Variant(
        "nhc-min-healthy",
        _patch(*NHC, "merge", {"spec": {"minHealthy": "0%"}}),
        "firebreak-nodehealthchecks: Firebreak may change only its own pauseRequests entries (firebreak:<INC-n>); "
        "this request changes spec.minHealthy",
    ),
    Variant(
        "second-namespace",
        _patch("pods", "sess-other", "other-tenant", "merge", {"metadata": {"labels": {"ir.corp/quarantine": "true"}}}),
        'pods "sess-other" is forbidden: User "system:serviceaccount:firebreak:firebreak" cannot get resource "pods" '
        'in API group "" in the namespace "other-tenant"',
        rbac=True,
    ),
    Variant(
        "configmap-in-second-namespace",
        _patch("configmaps", "toolgw-flags", "serve-chat", "merge", {"data": {"acme.max_side_effect": "none"}}),
        'configmaps "toolgw-flags" is forbidden: User "system:serviceaccount:firebreak:firebreak" cannot get resource '
        '"configmaps" in API group "" in the namespace "serve-chat"',
        rbac=True,
    ),
]


def _refused(done: subprocess.CompletedProcess[str], refused: str, rbac: bool = False) -> None:
    """kubectl shows the API server's 403: RBAC's `User ... cannot ...`, or the policy, its binding and the
    rule's own message."""
    assert done.returncode != 0, f"the API server accepted it:\n{done.stdout}"
    # `kubectl patch` prints "Error from server (Forbidden): ...", `kubectl create` "error: failed to create".
    assert "Error from server (Forbidden): " in done.stderr or " is forbidden: " in done.stderr, done.stderr
    if rbac:
        assert refused in done.stderr, done.stderr
    else:
        rule = refused.split(":", 1)[0]
        said = f"is forbidden: ValidatingAdmissionPolicy '{rule}' with binding '{rule}' denied request: {refused}"
        assert said in done.stderr, done.stderr


def _target(v: Variant) -> tuple[str, str, str | None]:
    args = list(v.args)
    ns = args[args.index("-n") + 1] if "-n" in args else None
    i = args.index("patch")
    return args[i + 1], args[i + 2], ns


@pytest.mark.parametrize("dry_run", [False, True], ids=["real", "dry-run"])
@pytest.mark.parametrize("v", VARIANTS, ids=[v.id for v in VARIANTS])
def test_every_forbidden_variant_is_refused_by_the_api_server(seeded_once, v, dry_run):
    c = seeded_once
    resource, name, ns = _target(v)
    before = c.get(resource, name, ns)
    done = c.bot_run(*v.args, *(["--dry-run=server"] if dry_run else []))
    _refused(done, v.refused, v.rbac)
    assert c.get(resource, name, ns)["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


@pytest.mark.parametrize("v", [v for v in VARIANTS if not v.rbac], ids=[v.id for v in VARIANTS if not v.rbac])
def test_the_admin_is_not_restricted_by_the_policies(seeded_once, v):
    """The same write as a cluster admin passes (dry run: the policies run on dry runs too, as shown above)."""
    done = seeded_once.run(seeded_once.admin, *v.args, "--dry-run=server")
    assert done.returncode == 0, done.stderr


def test_the_workload_only_spec_active(seeded):
    c = seeded
    [wl] = json.loads(c.admin_ok("get", "workloads.kueue.x-k8s.io", "-n", "train-llm", "-o", "json"))["items"]
    name = wl["metadata"]["name"]
    done = c.bot_run(*_patch("workloads.kueue.x-k8s.io", name, "train-llm", "merge", {"spec": {"priority": 1000000}}))
    _refused(done, "firebreak-workloads: Firebreak may change only spec.active; this request changes spec.priority")
    ok = c.bot_run(*_patch("workloads.kueue.x-k8s.io", name, "train-llm", "merge", {"spec": {"active": False}}))
    assert ok.returncode == 0, ok.stderr


async def test_the_rollout_status_only_abort_and_only_to_true(app, seeded):
    ctx, _ = await plan_of(app, "rollout-abort", "serve-chat/llm-70b", {}, CELL)
    path = LEVERS["rollout-abort"].path(ctx, "status")

    for body, said in (
        ({"status": {"abort": True, "phase": "Healthy"}}, "this request changes status.phase"),
        ({"status": {"abort": False}}, "it never clears an abort"),
    ):
        with pytest.raises(KubeError) as err:
            await ctx.kube.send(ApiCall("PATCH", path, MERGE, body, ""))
        assert err.value.code == 403
        assert "firebreak-rollouts-status: Firebreak may change only a Rollout's status.abort, and only to true" in str(
            err.value.message
        )
        assert said in str(err.value.message)


# -------------------------------------------------------------------- with RBAC widened by mistake


@pytest.fixture
def widened(seeded_once: Cluster) -> Iterator[Cluster]:
    """Firebreak's ServiceAccount bound to cluster-admin (a mistake a platform team could make)."""
    c = seeded_once
    c.admin_ok(
        "create",
        "clusterrolebinding",
        "firebreak-oops",
        "--clusterrole=cluster-admin",
        "--serviceaccount=firebreak:firebreak",
    )
    try:
        yield c
    finally:
        c.admin_ok("delete", "clusterrolebinding", "firebreak-oops")


WIDENED = [
    (
        (
            "-n",
            "other-tenant",
            "patch",
            "pods",
            "sess-other",
            "--type=merge",
            "-p",
            '{"metadata":{"labels":{"ir.corp/quarantine":"true"}}}',
        ),
        "firebreak-pods: sandbox-quarantine acts only in the namespaces policies/levers.yaml names for it "
        "(sbx-tenant-acme); this is namespace other-tenant",
    ),
    (
        ("-n", "sbx-tenant-acme", "delete", "pod", "sess-7f3a9c-0", "--dry-run=server"),
        "firebreak-writes: Firebreak may change only the objects its levers patch: it never creates, deletes or "
        "connects; refused: DELETE /pods",
    ),
    (
        ("-n", "other-tenant", "create", "configmap", "evil", "--from-literal=a=b"),
        "firebreak-writes: Firebreak may change only the objects its levers patch: it never creates, deletes or "
        "connects; refused: CREATE /configmaps",
    ),
    (
        ("-n", "kube-system", "create", "serviceaccount", "evil"),
        "firebreak-writes: Firebreak may change only the objects its levers patch: it never creates, deletes or "
        "connects; refused: CREATE /serviceaccounts",
    ),
    (
        ("-n", "firebreak", "create", "rolebinding", "evil", "--clusterrole=admin", "--user=evil"),
        "firebreak-writes: Firebreak may change only the objects its levers patch: it never creates, deletes or "
        "connects; refused: CREATE rbac.authorization.k8s.io/rolebindings",
    ),
    (
        _patch(*POD, "json", [{"op": "replace", "path": "/spec/containers/0/image", "value": "evil.example/miner:1"}]),
        "firebreak-pods: Firebreak may change only the pod label ir.corp/quarantine; this request changes spec",
    ),
]


@pytest.mark.parametrize(
    ("args", "refused"), WIDENED, ids=["other-namespace", "delete", "create", "create-sa", "rolebinding", "image"]
)
def test_with_cluster_admin_by_mistake_the_policies_still_refuse(widened, args, refused):
    _refused(widened.bot_run(*args), refused)


def test_admission_objects_are_exempt_from_the_policies(widened):
    """The limit of the second layer: the API server runs no admission policy on admission objects
    (so a policy can't lock everyone out). With cluster-admin, this identity could delete a binding."""
    done = widened.bot_run("delete", "validatingadmissionpolicybinding", "firebreak-pods", "--dry-run=server")
    assert done.returncode == 0 and "deleted (server dry run)" in done.stdout, done.stderr


def test_rbac_forbids_reading_secrets(cluster):
    for args in (("get", "secrets", "-A"), ("-n", "toolgw", "get", "secrets"), ("-n", "firebreak", "get", "secrets")):
        done = cluster.bot_run(*args)
        assert (
            done.returncode != 0
            and "Forbidden" in done.stderr
            and f'User "{USER}" cannot list resource "secrets"' in done.stderr
        ), done.stderr


def test_the_policies_are_the_generated_ones_and_all_bound(cluster):
    served = json.loads(cluster.admin_ok("get", "validatingadmissionpolicies", "-o", "json"))["items"]
    shipped = [d for d in yaml.safe_load_all((DEPLOY / "admission" / "policies.yaml").read_text()) if d]
    assert {p["metadata"]["name"] for p in served} >= {p["metadata"]["name"] for p in shipped}
    bindings = json.loads(cluster.admin_ok("get", "validatingadmissionpolicybindings", "-o", "json"))["items"]
    assert {b["spec"]["policyName"] for b in bindings} >= {p["metadata"]["name"] for p in shipped}
