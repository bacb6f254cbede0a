"""Realistic sample objects for seeding a FakeKubeCluster.

Every sample validates against the fake's schema checks (see
tests/fakes_tests/test_fake_kube.py::test_samples_are_valid). Each call
returns a fresh dict, so callers may mutate it.
"""

from __future__ import annotations

GPU_IMAGE = "registry.corp/ml/vllm-serve:0.8.4"


def cluster_queue(
    name: str = "research-h100", cohort: str = "research", gpus: int = 128, stop_policy: str = "None"
) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {"team": "research"}},
        "spec": {
            "cohortName": cohort,
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
                        "query": f'sum(vllm:num_requests_waiting{{model="{target}"}})',
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
        "spec": {"providerID": f"corp://{cell}/{name}"},
        "status": {
            "capacity": {"cpu": "192", "memory": "2063731Mi", "nvidia.com/gpu": "8"},
            "allocatable": {"cpu": "190", "memory": "2000000Mi", "nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def jobset(ns: str = "train-llm", name: str = "pretrain-405b") -> dict:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "research"}},
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


def configmap_toolgw(ns: str = "toolgw", data: dict[str, str] | None = None, name: str = "toolgw-flags") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": dict(data) if data is not None else {"acme.max_side_effect": "write"},
    }


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
}
