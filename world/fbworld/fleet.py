"""The demo fleet: three cells and the fleet context, each a Kubernetes API emulator seeded with
the objects every lever acts on, dcgm-exporter on every GPU node (fbworld/dcgm.py: what happens to
a GPU, and the series it shows), and (when no Prometheus is configured) a simulated Prometheus
answering the policy's queries for a healthy fleet, its DCGM rows from those GPUs.

Names are the ones docs/operating.md's console table and the README's lever lines use, so they work as typed:
`research-h100`, `serve-chat/llm-70b`, `edge/chat-global`, GPU nodes `gpu-a3-01xx`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import re
import secrets
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot import logs
from bot.policy import Policy
from fbworld.dcgm import FIGURES as DCGM_FIGURES
from fbworld.dcgm import DcgmFleet, Exporter
from fbworld.kube import FakeKubeCluster, samples, write_kubeconfig
from fbworld.metrics import FleetMetrics
from fbworld.prometheus import DemoPrometheus

log = logs.get(__name__)

CELLS = ("us-east-1", "us-east-2", "us-east-3")
# GPU nodes per cell: gpu-a3-0101 … gpu-a3-0140. With the default budget (at most 10% of a cell's
# GPU nodes quarantined) four may be quarantined, so the hourly rate budget (3) is what stops a
# storm first: the xid-storm drill's fourth quarantine is refused by it.
NODES_PER_CELL = 40
DRIVER = "550.127.08"
NODE_IMAGE = "cos-gpu-2026-11-03"
# What a healthy route looks like: every cell takes an equal share.
ROUTE_WEIGHT = 100
# The cell whose GPU nodes a Medik8s NodeHealthCheck watches (the xid-storm drill's cell), and its name.
NHC_CELL, NHC_NAME = "us-east-3", "gpu-nodes"
# The pretraining JobSet's trainer wrote its last checkpoint this long before the fleet started, in
# the annotation the default policy reads (price.checkpoint_annotation): jobset-suspend's price is
# then 512 GPUs x 40 min = 341 GPU-hours, growing by the minute as a real one would.
CHECKPOINT_AGE_S = 40 * 60
# Its Jobs (this attempt) started this long before the fleet: the run is older than its checkpoint.
JOBS_STARTED_AGO_S = 6 * 3600
TOOLGW_FLAGS = {"default.max_side_effect": "write", "acme.max_side_effect": "write", "globex.max_side_effect": "money"}


# The XID class a triage row counts: its err_code=~ matcher (policies/queries.yaml xid_gpus, xid_app).
_ERR_CODES = re.compile(r'err_code=~"([0-9|]+)"')


def xid_codes(policy: Policy, name: str) -> frozenset[int] | None:
    """The XIDs the policy's triage row ``name`` counts, or None when its query names no class the
    model can read (a custom policy's row: its figure is then set by hand, as any other)."""
    q = next((q for q in policy.queries.queries if q.name == name), None)
    m = _ERR_CODES.search(q.query) if q is not None else None
    return frozenset(int(c) for c in m.group(1).split("|") if c) if m else None


def node_name(n: int) -> str:
    """The n-th GPU node of a cell, from 1: gpu-a3-0101."""
    return f"gpu-a3-{100 + n:04d}"


def gpu_node(cell: str, n: int, policy: Policy) -> dict[str, Any]:
    node = samples.gpu_node(node_name(n), cell)
    labels = node["metadata"]["labels"]
    labels[policy.queries.changed.driver_label] = DRIVER
    for key in policy.queries.changed.node_image_labels[:1]:
        labels[key] = NODE_IMAGE
    return node


def trigger_query(cell: str, target: str = "llm-70b") -> str:
    """The 70B model's ScaledObject trigger in ``cell``: vLLM's queue, summed. In a real cluster the
    trigger asks the cell's own Prometheus; the demo's one Prometheus serves every cell, so the
    query names the cell (the label a scrape config adds)."""
    return f'sum(vllm:num_requests_waiting{{cell="{cell}",model_name="{target}"}})'


def cell_objects(cell: str, policy: Policy, now: float) -> list[dict[str, Any]]:
    """What one cell serves: a Kueue ClusterQueue with a Kueue-managed JobSet, the 70B model's Argo
    Rollout (KEDA scales it) with its ReplicaSets, a router Deployment KEDA scales, the tool
    gateway's flags, an agent sandbox pod with its namespace's quarantine deny-all, and the GPU nodes
    with the GPU taint they carry."""
    rollout = samples.rollout("serve-chat", "llm-70b")
    cm_ns, cm_name = policy.levers.killswitch.configmap.split("/", 1)
    jobset = samples.kueue_jobset("train-llm", "pretrain-405b", queue="research-h100")
    if policy.levers.price.checkpoint_annotation:
        at = datetime.fromtimestamp(now - CHECKPOINT_AGE_S, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        jobset["metadata"].setdefault("annotations", {})[policy.levers.price.checkpoint_annotation] = at
    # Seeded with its uid so its Jobs can name it as their owner; they started well before the
    # checkpoint, so the price runs from the checkpoint (the later of the two).
    jobset["metadata"]["uid"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"firebreak-demo/{cell}/jobset"))
    started = datetime.fromtimestamp(now - JOBS_STARTED_AGO_S, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    scaled = samples.scaled_object("serve-chat", "llm-70b", target="llm-70b")
    scaled["spec"]["triggers"][0]["metadata"]["query"] = trigger_query(cell)
    return [
        samples.cluster_queue("research-h100"),
        jobset,
        *samples.jobset_jobs(jobset, started),
        rollout,
        *samples.rollout_replica_sets(rollout),
        scaled,
        samples.deployment("serve-chat", "chat-router", replicas=3),
        _scaled_deployment("serve-chat", "chat-router"),
        samples.configmap_toolgw(cm_ns, dict(TOOLGW_FLAGS), name=cm_name),
        samples.pod("sbx-tenant-acme", "sess-7f3a9c-0"),
        samples.quarantine_network_policy("sbx-tenant-acme"),  # the deny-all sandbox-quarantine's label needs
        *(gpu_node(cell, n, policy) for n in range(1, NODES_PER_CELL + 1)),
        *([node_health_check(policy)] if cell == NHC_CELL else []),
    ]


def node_health_check(policy: Policy) -> dict[str, Any]:
    """The cell's Medik8s NodeHealthCheck (upstream's CRD at v0.9.0): it watches the GPU nodes
    Firebreak counts (node_quarantine.gpu_node_selector) and starts Self Node Remediation on a node
    whose kubelet is not Ready, or on which NVSentinel set GpuXidCritical, for five minutes. Enabled and
    unpaused, so `remediation-pause` has something to pause in the demo."""
    nhc = samples.node_health_check(NHC_NAME)
    key, _, value = policy.levers.node_quarantine.gpu_node_selector.partition("=")
    nhc["spec"]["selector"] = {"matchLabels": {key: value}}
    nhc["spec"]["minHealthy"] = "40%"  # too low: the xid-storm drill's bad exporter lets it take half the cell
    nhc["spec"]["unhealthyConditions"] = [
        *nhc["spec"]["unhealthyConditions"],
        {"type": "GpuXidCritical", "status": "True", "duration": "300s"},
    ]
    nhc["status"] = {"phase": "Enabled", "observedNodes": NODES_PER_CELL, "healthyNodes": NODES_PER_CELL}
    return nhc


def _scaled_deployment(ns: str, name: str) -> dict[str, Any]:
    so = samples.scaled_object(ns, name, target=name)
    so["spec"]["scaleTargetRef"] = {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
    so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"] = 2, 12
    return so


def fleet_objects(policy: Policy) -> list[dict[str, Any]]:
    """The fleet context: the global route, one backend per cell at an equal weight."""
    prefix = policy.levers.route_weight.backend_prefix
    backends = {f"{prefix}{cell}": ROUTE_WEIGHT for cell in CELLS}
    return [samples.http_route("edge", "chat-global", backends)]


@dataclass
class DemoFleet:
    """The running demo: one API emulator per context, the kubeconfig naming them, and the figures
    the simulated Prometheus answers with (None when a real PROMETHEUS_URL is used)."""

    clusters: dict[str, FakeKubeCluster]
    kubeconfig: Path
    metrics: FleetMetrics
    prometheus: DemoPrometheus | None = None
    token: str = field(default="", repr=False)
    # dcgm-exporter on the GPU nodes: the drills' XIDs land here, triage's DCGM rows are read from it.
    dcgm: DcgmFleet | None = None

    @property
    def cells(self) -> tuple[str, ...]:
        return CELLS

    def quarantined_fraction(self, cell: str, policy: Policy) -> float | None:
        """The cell's GPU nodes that can't take work, over its GPU nodes (what the `quarantined`
        query measures over kube-state-metrics, and the quarantine budget counts: cordoned, or a
        NoSchedule/NoExecute taint other than node_quarantine.dedicated_taints, whoever set it),
        read from the emulator itself."""
        cluster = self.clusters.get(policy.levers.cells.get(cell, cell))
        if cluster is None:
            return None
        key, value = policy.levers.node_quarantine.gpu_node_selector.split("=", 1)
        gpu = [n for n in cluster.list("nodes") if (n["metadata"].get("labels") or {}).get(key) == value]
        if not gpu:
            return None
        dedicated = set(policy.levers.node_quarantine.dedicated_taints)

        def out(spec: dict[str, Any]) -> bool:
            fences = [t for t in spec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
            return spec.get("unschedulable") is True or any(t.get("key") not in dedicated for t in fences)

        return sum(1 for n in gpu if out(n.get("spec") or {})) / len(gpu)


def _seeded(name: str, objects: list[dict[str, Any]], token: str) -> FakeKubeCluster:
    """A cluster holding ``objects``: CRD parsing and schema checks, ~0.1 s a cell, so it runs in a
    worker thread (nothing else sees the cluster until it starts serving)."""
    cluster = FakeKubeCluster(name)
    cluster.set_tokens(token)
    # The console runs for hours: keep no request log (the tests read it; nobody here does).
    cluster.record_requests = False
    for obj in objects:
        cluster.put(copy.deepcopy(obj))
    return cluster


async def _start_cluster(name: str, objects: list[dict[str, Any]], token: str) -> FakeKubeCluster:
    cluster = await asyncio.to_thread(_seeded, name, objects, token)
    cluster.start_controller("kueue", interval=0.5)
    cluster.start_controller("argo", interval=0.5)
    await cluster.start()
    return cluster


def demo_unavailable() -> str | None:
    """Why the demo fleet can't start here, or None. Its API servers speak https (kubectl sends a
    token only over https) with a throwaway CA made by the openssl CLI."""
    if shutil.which("openssl") is None:
        return "the openssl CLI is not installed (Debian: apt install openssl)"
    return None


def model_dcgm(fleet: DemoFleet, policy: Policy, exporter: Exporter) -> DcgmFleet:
    """dcgm-exporter on the fleet's GPU nodes, and triage's DCGM figures read from it."""
    nodes = {cell: [node_name(n) for n in range(1, NODES_PER_CELL + 1)] for cell in CELLS}
    gpus = fleet.dcgm = DcgmFleet(exporter, nodes)

    def figure(name: str, codes: frozenset[int]) -> Callable[[str, float], float | None]:
        return lambda cell, at: gpus.figure(cell, name, at, codes)

    for name in DCGM_FIGURES:
        codes = xid_codes(policy, name) if name in ("xid_gpus", "xid_app") else frozenset[int]()
        if codes is not None:
            fleet.metrics.model(name, figure(name, codes))
    return gpus


@contextlib.asynccontextmanager
async def demo_fleet(
    policy: Policy, workdir: Path, *, prometheus: bool, exporter: Exporter | None = None
) -> AsyncIterator[DemoFleet]:
    """Start the demo fleet's emulators (and, with ``prometheus``, the simulated Prometheus); the
    kubeconfig is written into ``workdir`` with a token made for this run. ``exporter`` says how
    dcgm-exporter runs on the GPU nodes (default: the last release's labels, triage's CSV fields)."""
    token = secrets.token_urlsafe(24)
    now = time.time()
    contexts = {policy.levers.cells.get(cell, cell): cell_objects(cell, policy, now) for cell in CELLS}
    contexts[policy.levers.fleet_context] = fleet_objects(policy)
    clusters: dict[str, FakeKubeCluster] = {}
    fleet: DemoFleet | None = None
    try:
        for name, objects in contexts.items():
            clusters[name] = await _start_cluster(name, objects, token)
        urls = {name: str(c.url) for name, c in clusters.items()}
        kubeconfig = await asyncio.to_thread(write_kubeconfig, workdir / "kubeconfig", urls, token)
        fleet = DemoFleet(clusters, kubeconfig, FleetMetrics(CELLS), token=token)
        fleet.metrics.derive("quarantined", lambda cell: fleet.quarantined_fraction(cell, policy) if fleet else None)
        model_dcgm(fleet, policy, exporter or Exporter())
        if prometheus:
            fleet.prometheus = DemoPrometheus(fleet.metrics, policy)
            for cell in CELLS:  # what keda-pause's price reads: the ScaledObject's own trigger
                fleet.prometheus.register(trigger_query(cell), cell, "waiting", by_cell=False)
            await fleet.prometheus.start()
            # The ScaledObject's trigger asks the Prometheus KEDA would: here, the simulated one.
            for cell in CELLS:
                cluster = clusters[policy.levers.cells.get(cell, cell)]
                so = cluster.get("scaledobject", "llm-70b", "serve-chat")
                if so is not None:
                    so["spec"]["triggers"][0]["metadata"]["serverAddress"] = fleet.prometheus.url
                    cluster.put(so)
        log.info("demo_fleet_started", contexts=sorted(clusters), prometheus=prometheus)
        yield fleet
    finally:
        if fleet is not None and fleet.prometheus is not None:
            await fleet.prometheus.stop()
        for cluster in clusters.values():
            await cluster.stop()
