"""A Kubernetes API emulator: the demo fleet's clusters (world/fbworld/fleet.py) and the tests' fake API
server are this one package, so the console behaves exactly as the tests check.

async with FakeKubeCluster("us-east-3") as cell:       # https, bearer token FAKE_TOKEN
    cell.put(samples.cluster_queue())
    write_kubeconfig(tmp / "kubeconfig", {cell.name: cell.url})   # embeds the test CA
    cell.allow_only(Rule(["get", "list"], ["*"], ["*"]))          # RBAC, optional
    cell.start_controller("kueue")                                # Kueue / Argo, optional
"""

from . import samples
from .auth import Rule
from .errors import ApiError
from .kubeconfig import FAKE_TOKEN, FAKE_USER, cluster_entry, write_kubeconfig
from .server import FakeKubeCluster, Recorded, default_crd_dir

__all__ = [
    "FAKE_TOKEN",
    "FAKE_USER",
    "ApiError",
    "FakeKubeCluster",
    "Recorded",
    "Rule",
    "cluster_entry",
    "default_crd_dir",
    "samples",
    "write_kubeconfig",
]
