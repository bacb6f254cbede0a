"""The real Argo Rollouts controller (`rollouts-controller`, built from its upstream Go module by
`.ci/build-controllers.sh argo-rollouts`) running against the session's real kube-apiserver.

`start(server, directory)` applies the CRDs of the controller's own version (the module's
manifests/crds, over the older Rollout CRD world/fbworld/kube/crds put there at bootstrap) and runs
the controller as a child process with the server's admin kubeconfig, until `.stop()`.

No ReplicaSet controller or kubelet runs here: Argo creates and scales ReplicaSets, but nothing
starts their pods or reports them available. A test that needs a ReplicaSet available does what
those two would (`report_available`, or `follow_replica_sets` for a while), as kube_apiserver.py
does for nodes.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.controllers import BuiltController, built
from tests.support.kube_apiserver import KubeAPIServer
from tests.support.ports import free_port
from tests.support.services import ManagedProcess

NAME = "argo-rollouts"  # the wrapper module in .ci/controllers/
CRDS = Path("manifests") / "crds"  # inside the built controller's data/
# controller.Manager logs this once its informer caches have synced and the workers run
# (controller/controller.go startLeading); /healthz answers 200 from the first second, before that.
STARTED = "Started controller"
HASH_LABEL = "rollouts-pod-template-hash"


@dataclass
class ArgoController:
    """A running rollouts-controller; stop() ends it (blocking)."""

    controller: BuiltController
    process: ManagedProcess
    metrics_port: int
    healthz_port: int
    ready_seconds: float = 0.0

    @property
    def version(self) -> str:
        return self.controller.version

    def stop(self) -> None:
        self.process.stop()

    def log_tail(self, n: int = 4000) -> str:
        return self.process.log_tail(n)

    def alive(self) -> bool:
        return self.process.proc is not None and self.process.proc.poll() is None


def apply_crds(server: KubeAPIServer, controller: BuiltController) -> list[str]:
    """The controller's own CRDs, server-side applied as admin; their names, once each lists.

    Field manager `test-setup` with --force-conflicts, the manager kube_apiserver.py's bootstrap
    applied the older Rollout CRD with: the same manager's new apply replaces its old one, so a field
    the older schema had and this one dropped goes too (a second manager would leave it owned)."""
    files = sorted((controller.data / CRDS).glob("*-crd.yaml"))  # not kustomization.yaml
    if not files:
        raise RuntimeError(
            f"no CRDs under {controller.data / CRDS}: rebuild with `bash .ci/build-controllers.sh {NAME}`"
        )
    args = ["apply", "--server-side", "--force-conflicts", "--field-manager", "test-setup"]
    for f in files:
        args += ["-f", str(f)]
    out = server.kubectl(*args, "-o", "name")
    names = [line.partition("/")[2] for line in out.split()]
    # Established, then servable: the first lists of a CRD answer 429 while its watch cache fills.
    deadline = time.monotonic() + 60
    while True:
        done = server.kubectl_result("get", ",".join(names), "-A", "-o", "name")
        if done.returncode == 0:
            return names
        if time.monotonic() > deadline:
            raise RuntimeError(f"Argo Rollouts' CRDs do not list after 60s: {done.stderr}")
        time.sleep(0.2)


def start(server: KubeAPIServer, directory: Path, timeout: float = 120.0) -> ArgoController:
    """Apply the CRDs and run the controller until it has synced its caches. Blocking.

    Flags (rollouts-controller, cmd/rollouts-controller/main.go):
      --kubeconfig          the server's admin kubeconfig (system:masters: Argo's own RBAC is not
                            under test here; the bot's is)
      --leader-elect=false  one instance, no Lease to win first (upstream's default is true)
      --metricsPort, --healthzPort  free ports: upstream binds 0.0.0.0:8090 and :8080 by default,
                            which other tests' servers (or a second controller) may hold
      --loglevel info, --logformat text  what log_tail() shows on a failure
    POD_NAMESPACE names the namespace it reads its notification ConfigMap from (defaults.Namespace):
    set, so nothing of the environment (a service-account file) decides it."""
    controller = built(NAME)
    directory.mkdir(parents=True, exist_ok=True)
    apply_crds(server, controller)
    metrics_port, healthz_port = free_port(), free_port()
    argv = [
        str(controller.binary),
        "--kubeconfig", str(server.admin_kubeconfig),
        "--leader-elect=false",
        "--metricsPort", str(metrics_port),
        "--healthzPort", str(healthz_port),
        "--loglevel", "info",
        "--logformat", "text",
    ]  # fmt: skip
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(directory), "POD_NAMESPACE": "argo-rollouts"}
    process = ManagedProcess(argv, directory / "rollouts-controller.log", cwd=directory, env=env)
    t0 = time.monotonic()
    process.start()
    running = ArgoController(controller, process, metrics_port, healthz_port)
    try:
        _wait_started(running, timeout)
    except BaseException:
        running.stop()
        raise
    running.ready_seconds = time.monotonic() - t0
    return running


def _wait_started(ctl: ArgoController, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    url = f"http://127.0.0.1:{ctl.healthz_port}/healthz"
    healthy = False
    while True:
        if not ctl.alive():
            code = ctl.process.proc.returncode if ctl.process.proc else None
            raise RuntimeError(f"rollouts-controller exited with {code}:\n{ctl.log_tail()}")
        if not healthy:
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    healthy = resp.status == 200
            except (urllib.error.URLError, OSError):
                pass
        if healthy and STARTED in ctl.log_tail(1_000_000):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"rollouts-controller not started after {timeout}s (healthz {'ok' if healthy else 'not answering'}):\n"
                f"{ctl.log_tail()}"
            )
        time.sleep(0.2)


# ---------------------------------------------------------------------- what a ReplicaSet controller does


def replica_sets(server: KubeAPIServer, namespace: str, selector: str) -> list[dict[str, Any]]:
    """The ReplicaSets matching a label selector, as admin (blocking)."""
    out = server.kubectl("get", "replicasets.apps", "-n", namespace, "-l", selector, "-o", "json")
    return list(json.loads(out)["items"])


def _available_status(rs: dict[str, Any]) -> dict[str, Any]:
    n = (rs.get("spec") or {}).get("replicas", 1)
    return {
        "replicas": n,
        "fullyLabeledReplicas": n,
        "readyReplicas": n,
        "availableReplicas": n,
        "observedGeneration": rs["metadata"].get("generation", 1),
    }


def report_available(server: KubeAPIServer, rs: dict[str, Any]) -> bool:
    """What the ReplicaSet controller writes once the kubelet reports its pods Ready: spec.replicas
    pods, all available, for the generation it saw. A no-op (False) when it says so already.
    Guarded by resourceVersion, so a scale by Argo since the read is never reported as done."""
    want = _available_status(rs)
    have = {k: (rs.get("status") or {}).get(k, 0) for k in want}
    if have == want:
        return False
    meta = rs["metadata"]
    patch = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": want}
    done = server.kubectl_result(
        "patch", "replicasets.apps", meta["name"], "-n", meta["namespace"],
        "--subresource", "status", "--type", "merge", "-p", json.dumps(patch),
    )  # fmt: skip
    if done.returncode != 0 and "the object has been modified" not in done.stderr:
        raise RuntimeError(f"patching {meta['name']}'s status failed: {done.stderr}")
    return done.returncode == 0


@asynccontextmanager
async def follow_replica_sets(server: KubeAPIServer, namespace: str, selector: str) -> AsyncIterator[None]:
    """While open: every ReplicaSet matching ``selector`` reported fully available at whatever size
    Argo scales it to, as a ReplicaSet controller and kubelets whose pods start at once would."""

    async def loop() -> None:
        while True:
            for rs in await asyncio.to_thread(replica_sets, server, namespace, selector):
                await asyncio.to_thread(report_available, server, rs)
            await asyncio.sleep(0.2)

    task = asyncio.get_running_loop().create_task(loop())
    try:
        yield
    finally:
        crashed = task.done() and not task.cancelled() and task.exception()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception:  # noqa: BLE001 - re-raised just below
            pass
        if crashed:
            raise crashed
