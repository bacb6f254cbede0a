"""Fake Kubernetes API server for Firebreak tests.

async with FakeKubeCluster("us-east-3") as cell:
    cell.put(samples.cluster_queue())
    write_kubeconfig(tmp / "kubeconfig", {cell.name: cell.url})
"""

from . import samples
from .errors import ApiError
from .kubeconfig import FAKE_TOKEN, write_kubeconfig
from .server import FakeKubeCluster, Recorded, default_crd_dir

__all__ = [
    "FAKE_TOKEN",
    "ApiError",
    "FakeKubeCluster",
    "Recorded",
    "default_crd_dir",
    "samples",
    "write_kubeconfig",
]
