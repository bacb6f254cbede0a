"""Realistic sample objects for seeding a FakeKubeCluster.

Every sample validates against the fake's schema checks (see
world/tests/kube/test_kube_api.py::test_samples_are_valid). Each call
returns a fresh dict, so callers may mutate it.
"""

from __future__ import annotations

import copy

from .controllers import POD_TEMPLATE_HASH, QUEUE_LABEL, REVISION_ANNOTATION, admit, build_workload

GPU_IMAGE = "registry.corp/ml/vllm-serve:0.8.4"
# The taint GPU node pools carry (GKE, EKS and AKS GPU pools; the NVIDIA GPU operator's default).
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def cluster_queue(
    name: str = "research-h100",
    cohort: str = "research",
    gpus: int = 128,
    stop_policy: str = "None",
    version: str = "v1beta2",
) -> dict:
    """version "v1beta1" gives the older API's shape (spec.cohort), for clusters serving only v1beta1."""
    cohort_field = "cohort" if version == "v1beta1" else "cohortName"
    return {
        "apiVersion": f"kueue.x-k8s.io/{version}",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {"team": "research"}},
        "spec": {
            cohort_field: cohort,
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "stopPolicy": stop_policy,
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "h100-80gb",
                            "resources": [
                                {"name": "cpu", "nominalQuota": gpus * 12},
                                {"name": "memory", "nominalQuota": f"{gpus * 120}Gi"},
                                {"name": "nvidia.com/gpu", "nominalQuota": gpus},
                            ],
                        }
                    ],
                }
            ],
        },
        "status": {"pendingWorkloads": 3, "reservingWorkloads": 5, "admittedWorkloads": 5},
    }


def scaled_object(ns: str = "serve-chat", name: str = "llm-70b", target: str = "llm-70b") -> dict:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": target}},
        "spec": {
            "scaleTargetRef": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": target},
            "minReplicaCount": 4,
            "maxReplicaCount": 32,
            "pollingInterval": 15,
            "cooldownPeriod": 300,
            "triggers": [
                {
                    "type": "prometheus",
                    "metadata": {
                        "serverAddress": "http://prometheus.monitoring:9090",
                        "query": f'sum(vllm:num_requests_waiting{{model_name="{target}"}})',
                        "threshold": "20",
                    },
                }
            ],
        },
    }


def deployment(ns: str = "serve-chat", name: str = "chat-router", replicas: int = 3) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {"name": name, "image": f"registry.corp/ml/{name}:1.4.2", "ports": [{"containerPort": 8080}]}
                    ]
                },
            },
        },
        "status": {
            "replicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "updatedReplicas": replicas,
            "observedGeneration": 1,
        },
    }


def stateful_set(ns: str = "serve-chat", name: str = "llm-shards", replicas: int = 3) -> dict:
    """A sharded model server (what KEDA scales when each replica owns a cache volume)."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "vllm", "image": GPU_IMAGE}]},
            },
        },
        "status": {"replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas},
    }


def rollout(ns: str = "serve-chat", name: str = "llm-70b") -> dict:
    """Canary at step 1 (20% weight, paused) of a 70B model server."""
    labels = {"app": name}
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "replicas": 8,
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "vllm",
                            "image": GPU_IMAGE,
                            "args": ["--model", "/models/llama-70b", "--tensor-parallel-size", "4"],
                            "resources": {"limits": {"nvidia.com/gpu": 4}},
                        }
                    ]
                },
            },
            "strategy": {
                "canary": {
                    "canaryService": f"{name}-canary",
                    "stableService": f"{name}-stable",
                    "steps": [
                        {"setWeight": 20},
                        {"pause": {}},
                        {"setWeight": 50},
                        {"pause": {"duration": "10m"}},
                    ],
                }
            },
        },
        "status": {
            "phase": "Paused",
            "message": "CanaryPauseStep",
            "currentStepIndex": 1,
            "currentStepHash": "5c9f6d7b8",
            "currentPodHash": "7b8c9d6f4",
            "stableRS": "6d9f7c8b5",
            "replicas": 10,
            "updatedReplicas": 2,
            "readyReplicas": 10,
            "availableReplicas": 10,
            "HPAReplicas": 10,
            "selector": f"app={name}",
            "observedGeneration": "3",
            "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2025-01-01T00:00:00Z"}],
            "canary": {
                "weights": {
                    "canary": {"weight": 20, "podTemplateHash": "7b8c9d6f4", "serviceName": f"{name}-canary"},
                    "stable": {"weight": 80, "podTemplateHash": "6d9f7c8b5", "serviceName": f"{name}-stable"},
                }
            },
        },
    }


def http_route(ns: str = "edge", name: str = "chat-global", backends: dict[str, int] | None = None) -> dict:
    if backends is None:
        backends = {"cell-us-east-1": 50, "cell-us-east-2": 50, "cell-us-east-3": 0}
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "global-gw"}],
            "hostnames": ["chat.corp.example"],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [
                        {"group": "", "kind": "Service", "name": svc, "port": 443, "weight": w}
                        for svc, w in backends.items()
                    ],
                }
            ],
        },
    }


def gpu_node(name: str = "gpu-h100-a017", cell: str = "us-east-3") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "topology.corp/cell": cell,
                "kubernetes.io/hostname": name,
            },
        },
        "spec": {"providerID": f"corp://{cell}/{name}", "taints": [dict(GPU_TAINT)]},
        "status": {
            "capacity": {"cpu": "192", "memory": "2063731Mi", "nvidia.com/gpu": "8"},
            "allocatable": {"cpu": "190", "memory": "2000000Mi", "nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def jobset(ns: str = "train-llm", name: str = "pretrain-405b") -> dict:
    """A JobSet nothing else manages (see kueue_jobset for one Kueue admits)."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": ns, "labels": {"team": "research"}},
        "spec": {
            "suspend": False,
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": 64,
                            "completions": 64,
                            "backoffLimit": 0,
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [
                                        {
                                            "name": "trainer",
                                            "image": "registry.corp/ml/megatron:24.09",
                                            "resources": {"limits": {"nvidia.com/gpu": 8}},
                                        }
                                    ],
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


def jobset_jobs(jobset: dict, started: str, restarts: int = 0) -> list[dict]:
    """The batch/v1 Jobs the JobSet controller runs for `jobset` (which must carry a uid) in attempt
    `restarts`, started at `started` (RFC 3339): one per replicatedJob replica, named
    <jobset>-<replicatedJob>-<index>, with the labels and controller reference JobSet v0.12.0 sets
    (pkg/controllers/jobset_controller.go constructJob)."""
    meta = jobset["metadata"]
    if not meta.get("uid"):
        raise ValueError("the JobSet has no metadata.uid: give it one before building its Jobs")
    jobs = []
    for rj in jobset["spec"]["replicatedJobs"]:
        for i in range(rj.get("replicas", 1)):
            labels = {
                "jobset.sigs.k8s.io/jobset-name": meta["name"],
                "jobset.sigs.k8s.io/replicatedjob-name": rj["name"],
                "jobset.sigs.k8s.io/job-index": str(i),
                "jobset.sigs.k8s.io/restart-attempt": str(restarts),
            }
            jobs.append(
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {
                        "name": f"{meta['name']}-{rj['name']}-{i}",
                        "namespace": meta.get("namespace", "default"),
                        "labels": labels,
                        "ownerReferences": [
                            {
                                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                                "kind": "JobSet",
                                "name": meta["name"],
                                "uid": meta["uid"],
                                "controller": True,
                                "blockOwnerDeletion": True,
                            }
                        ],
                    },
                    "spec": copy.deepcopy(rj["template"]["spec"]),
                    "status": {"startTime": started, "active": rj["template"]["spec"].get("parallelism", 1)},
                }
            )
    return jobs


def pod(ns: str = "sbx-tenant-acme", name: str = "sess-7f3a9c-0") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "agent-sandbox", "tenant": "acme"}},
        "spec": {
            "containers": [{"name": "sandbox", "image": "registry.corp/agents/sandbox:2.3"}],
            "restartPolicy": "Never",
        },
        "status": {"phase": "Running"},
    }


def quarantine_network_policy(ns: str = "sbx-tenant-acme", name: str = "quarantine-deny-all") -> dict:
    """The deny-all a sandbox namespace keeps for sandbox-quarantine's label: it selects
    ir.corp/quarantine=true and, with both policyTypes and no rules, allows no traffic either way."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "podSelector": {"matchLabels": {"ir.corp/quarantine": "true"}},
            "policyTypes": ["Ingress", "Egress"],
        },
    }


def configmap_toolgw(ns: str = "toolgw", data: dict[str, str] | None = None, name: str = "toolgw-flags") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": dict(data) if data is not None else {"acme.max_side_effect": "write"},
    }


def node_health_check(name: str = "nhc-gpu", pause_requests: list[str] | None = None) -> dict:
    """A Medik8s NodeHealthCheck watching the GPU nodes (shaped like upstream's config/samples at v0.9.0,
    with the Self Node Remediation template), as its controller reports it while enabled."""
    spec: dict = {
        "selector": {"matchLabels": {"nvidia.com/gpu.present": "true"}},
        "minHealthy": "51%",
        "unhealthyConditions": [
            {"type": "Ready", "status": "False", "duration": "300s"},
            {"type": "Ready", "status": "Unknown", "duration": "300s"},
        ],
        "remediationTemplate": {
            "apiVersion": "self-node-remediation.medik8s.io/v1alpha1",
            "kind": "SelfNodeRemediationTemplate",
            "name": "self-node-remediation-automatic-strategy-template",
            "namespace": "medik8s",
        },
    }
    if pause_requests is not None:
        spec["pauseRequests"] = list(pause_requests)
    return {
        "apiVersion": "remediation.medik8s.io/v1alpha1",
        "kind": "NodeHealthCheck",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"phase": "Enabled", "observedNodes": 10, "healthyNodes": 10},
    }


def kueue_jobset(
    ns: str = "train-llm", name: str = "pretrain-405b", queue: str = "research", suspend: bool = False
) -> dict:
    """A JobSet Kueue manages (kueue.x-k8s.io/queue-name). Kueue's webhook creates such jobs
    suspended; once admitted they run (suspend false)."""
    js = jobset(ns, name)
    js["metadata"]["labels"] = {**js["metadata"]["labels"], QUEUE_LABEL: queue}
    js["spec"]["suspend"] = suspend
    return js


def workload_for(
    jobset: dict,
    *,
    active: bool | None = None,
    admitted: bool = True,
    cluster_queue: str = "research-h100",
    version: str = "v1beta2",
) -> dict:
    """The Workload Kueue v0.19 creates for `jobset` (which must already carry a uid, i.e. be the
    object cluster.put returned): same name hash, owner reference and podSets as the kueue
    controller; admitted to `cluster_queue` unless admitted=False; spec.active only when given."""
    wl = build_workload(jobset, version)
    if active is not None:
        wl["spec"]["active"] = active
    if admitted:
        wl["metadata"]["generation"] = 1  # what the stored object will have; conditions observe it
        admit(wl, cluster_queue)
    return wl


_CANARY_STABLE, _CANARY_NEW = "6d9f7c8b5", "7b8c9d6f4"
_BG_STABLE, _BG_NEW = "5f6d7c8b9", "8c7b6d5f4"


def rollout_canary(ns: str = "serve-chat", name: str = "llm-13b", traffic_routing: bool = False) -> dict:
    """A canary paused at step 1 (25% of 4 replicas), revision 2. With traffic_routing, the Gateway API
    plugin shifts traffic and status.canary.weights exists; without it (basic canary) the weight is
    only the replica ratio and there are no weights in status."""
    labels = {"app": name}
    canary: dict = {
        "canaryService": f"{name}-canary",
        "stableService": f"{name}-stable",
        "steps": [{"setWeight": 25}, {"pause": {}}, {"setWeight": 50}, {"pause": {"duration": "10m"}}],
    }
    status: dict = {
        "phase": "Paused",
        "message": "CanaryPauseStep",
        "currentStepIndex": 1,
        "currentStepHash": "5c9f6d7b8",
        "currentPodHash": _CANARY_NEW,
        "stableRS": _CANARY_STABLE,
        "replicas": 4,
        "updatedReplicas": 1,
        "readyReplicas": 4,
        "availableReplicas": 4,
        "HPAReplicas": 4,
        "selector": f"app={name}",
        "observedGeneration": "2",
        "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2025-01-01T00:00:00Z"}],
        "conditions": [
            {
                "type": "Progressing",
                "status": "Unknown",
                "reason": "RolloutPaused",
                "message": "Rollout is paused",
                "lastUpdateTime": "2025-01-01T00:00:00Z",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            }
        ],
    }
    if traffic_routing:
        canary["trafficRouting"] = {
            "plugins": {"argoproj-labs/gatewayAPI": {"httpRoute": name, "namespace": ns}},
        }
        status["canary"] = {
            "weights": {
                "canary": {"weight": 25, "podTemplateHash": _CANARY_NEW, "serviceName": f"{name}-canary"},
                "stable": {"weight": 75, "podTemplateHash": _CANARY_STABLE, "serviceName": f"{name}-stable"},
            }
        }
    return _rollout(ns, name, labels, 4, {"canary": canary}, status)


def rollout_bluegreen(ns: str = "serve-chat", name: str = "llm-embed") -> dict:
    """A blue-green rollout paused before promotion: the preview ReplicaSet is up, the active service
    still selects the stable one."""
    labels = {"app": name}
    strategy = {
        "blueGreen": {
            "activeService": f"{name}-active",
            "previewService": f"{name}-preview",
            "autoPromotionEnabled": False,
        }
    }
    status = {
        "phase": "Paused",
        "message": "BlueGreenPause",
        "currentPodHash": _BG_NEW,
        "stableRS": _BG_STABLE,
        "replicas": 6,
        "updatedReplicas": 3,
        "readyReplicas": 6,
        "availableReplicas": 3,
        "HPAReplicas": 6,
        "selector": f"app={name},{POD_TEMPLATE_HASH}={_BG_STABLE}",
        "observedGeneration": "2",
        "pauseConditions": [{"reason": "BlueGreenPause", "startTime": "2025-01-01T00:00:00Z"}],
        "blueGreen": {"activeSelector": _BG_STABLE, "previewSelector": _BG_NEW},
    }
    return _rollout(ns, name, labels, 3, strategy, status)


def _rollout(ns: str, name: str, labels: dict, replicas: int, strategy: dict, status: dict) -> dict:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": dict(labels),
            "annotations": {REVISION_ANNOTATION: "2"},
        },
        "spec": {
            "replicas": replicas,
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "containers": [{"name": "vllm", "image": GPU_IMAGE, "resources": {"limits": {"nvidia.com/gpu": 1}}}]
                },
            },
            "strategy": strategy,
        },
        "status": status,
    }


def replica_set(
    rollout: dict | None = None, pod_hash: str = _CANARY_STABLE, replicas: int = 3, revision: str = "1"
) -> dict:
    """A ReplicaSet of `rollout` (default rollout_canary()) for one pod-template hash, its pods all
    available. Owned by the rollout when it has a uid (seed the rollout first)."""
    ro = rollout if rollout is not None else rollout_canary()
    meta = ro["metadata"]
    labels = {**(ro["spec"]["selector"].get("matchLabels") or {}), POD_TEMPLATE_HASH: pod_hash}
    template = copy.deepcopy(ro["spec"]["template"])
    template.setdefault("metadata", {})["labels"] = dict(labels)
    rs_meta: dict = {
        "name": f"{meta['name']}-{pod_hash}",
        "namespace": meta.get("namespace", "default"),
        "labels": dict(labels),
        "annotations": {REVISION_ANNOTATION: revision},
    }
    if meta.get("uid"):
        rs_meta["ownerReferences"] = [
            {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "Rollout",
                "name": meta["name"],
                "uid": meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": rs_meta,
        "spec": {"replicas": replicas, "selector": {"matchLabels": dict(labels)}, "template": template},
        "status": {
            "replicas": replicas,
            "fullyLabeledReplicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "observedGeneration": 1,
        },
    }


def rollout_replica_sets(rollout: dict) -> list[dict]:
    """The stable and new ReplicaSets a rollout sample's status describes (stable first)."""
    st = rollout["status"]
    total, updated = rollout["spec"]["replicas"], st["updatedReplicas"]
    if "blueGreen" in rollout["spec"]["strategy"]:
        return [
            replica_set(rollout, st["stableRS"], total, "1"),
            replica_set(rollout, st["currentPodHash"], total, "2"),
        ]
    return [
        replica_set(rollout, st["stableRS"], total - updated, "1"),
        replica_set(rollout, st["currentPodHash"], updated, "2"),
    ]


def _seeded(obj: dict) -> dict:
    """`obj` as cluster.put would return it (a uid), for samples that need an owner."""
    obj["metadata"]["uid"] = "00000000-0000-4000-8000-000000000001"
    return obj


ALL = {
    "cluster_queue": cluster_queue,
    "scaled_object": scaled_object,
    "deployment": deployment,
    "rollout": rollout,
    "http_route": http_route,
    "gpu_node": gpu_node,
    "jobset": jobset,
    "pod": pod,
    "configmap_toolgw": configmap_toolgw,
    "node_health_check": node_health_check,
    "kueue_jobset": lambda: kueue_jobset(name="finetune-70b"),
    "workload_for": lambda: workload_for(_seeded(kueue_jobset(name="finetune-70b"))),
    "rollout_canary": rollout_canary,
    "rollout_canary_traffic_routing": lambda: rollout_canary(name="llm-13b-tr", traffic_routing=True),
    "rollout_bluegreen": rollout_bluegreen,
    "replica_set": replica_set,
}
