"""Fake Kubernetes API server for Firebreak tests.

    async with FakeKubeCluster("us-east-3") as cell:
        cell.put(samples.cluster_queue())
        write_kubeconfig(tmp / "kubeconfig", {cell.name: cell.url})
"""

from . import samples
from .errors import ApiError
from .kubeconfig import FAKE_TOKEN, write_kubeconfig
from .server import FakeKubeCluster, Recorded, default_crd_dir

__all__ = ["FakeKubeCluster", "Recorded", "write_kubeconfig", "samples", "ApiError",
           "FAKE_TOKEN", "default_crd_dir"]
