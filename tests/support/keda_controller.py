"""The real KEDA operator (github.com/kedacore/keda/v2 cmd/operator, built by .ci/build-controllers.sh)
as a child process against the session's real kube-apiserver.

`start(server, directory)` applies KEDA's CRDs of the built version, then runs keda-operator with the
server's admin kubeconfig and waits until it serves. What it is started with, and why (upstream
cmd/operator/main.go and pkg/util/env_resolver.go, watch.go):
- WATCH_NAMESPACE="" (required: unset exits "WATCH_NAMESPACE must be set"; empty is every namespace);
- KEDA_CLUSTER_OBJECT_NAMESPACE=keda (required outside a pod: else it reads the ServiceAccount's
  namespace file; only Secrets of ClusterTriggerAuthentications are read there) and POD_NAMESPACE=keda
  (the leader-election namespace; unused, as leader election is off);
- --leader-elect=false: one operator per server, nothing to elect;
- --metrics-bind-address, --health-probe-bind-address, --metrics-service-bind-address on free loopback
  ports (defaults :8080, :8081, :9666 on every interface);
- --enable-cert-rotation=false (its default: rotation writes a Secret and patches the webhook and the
  APIService of a KEDA install, none of which exists here) and --cert-dir holding ca.crt, tls.crt,
  tls.key from fbworld.tls: the gRPC metrics service (metricsservice.GrpcServer) loads them at start
  and the operator exits without them;
- --ca-dir an empty directory (default /custom/ca: scalers' extra CAs; none is needed);
- KUBECONFIG the server's admin kubeconfig: the operator's own RBAC is not under test.
No webhook server starts (the operator registers no webhook; cmd/webhooks is another binary) and
no metrics adapter runs, so the HPAs KEDA writes are never acted on: no kube-controller-manager runs.
"""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from fbworld.tls import make_tls
from tests.support.controllers import BuiltController, built
from tests.support.kube_apiserver import KubeAPIServer
from tests.support.ports import free_port
from tests.support.services import ManagedProcess

NAME = "keda"
CRDS = "config/crd/bases"
NAMESPACE = "keda"  # KEDA_CLUSTER_OBJECT_NAMESPACE / POD_NAMESPACE: a KEDA install's own namespace


@dataclass
class KedaOperator:
    """A running keda-operator; stop() ends it. Blocking."""

    controller: BuiltController
    process: ManagedProcess
    health_port: int
    metrics_port: int
    grpc_port: int
    crds: tuple[str, ...]  # the CRDs applied (metadata.name)
    ready_seconds: float = 0.0

    @property
    def version(self) -> str:
        return self.controller.version

    def alive(self) -> bool:
        return self.process.proc is not None and self.process.proc.poll() is None

    def stop(self) -> None:
        self.process.stop()

    def log_tail(self, n: int = 4000) -> str:
        return self.process.log_tail(n)


def apply_crds(server: KubeAPIServer, controller: BuiltController, timeout: float = 60.0) -> tuple[str, ...]:
    """KEDA's CRDs of the built version, server-side applied as admin, established and listing.

    The field manager is the one the session server applied world/fbworld/kube/crds with: applying
    as that manager replaces its older scaledobjects CRD whole (fields the new one lacks go too),
    where another manager would leave the old version's fields merged in. --force-conflicts takes any
    field another manager holds."""
    path = controller.data / CRDS
    docs = sorted(path.glob("*.yaml"))
    if not docs:
        raise RuntimeError(f"no CRDs under {path}: rebuild with `bash .ci/build-controllers.sh {NAME}`")
    server.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager", "test-setup", "-f", str(path))
    names = tuple(yaml.safe_load(d.read_text())["metadata"]["name"] for d in docs)
    deadline = time.monotonic() + timeout
    while True:
        waiting = [n for n in names if not _established(server.get("crd", n))]
        # Established is not yet servable: the first lists answer 429 while the watch cache fills.
        if not waiting and server.kubectl_result("get", ",".join(names), "-A", "-o", "name").returncode == 0:
            return names
        if time.monotonic() > deadline:
            raise RuntimeError(f"KEDA's CRDs not established and listing after {timeout}s: {', '.join(waiting)}")
        time.sleep(0.2)


def _established(crd: dict) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _get(url: str, timeout: float = 2.0) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def start(server: KubeAPIServer, directory: Path, timeout: float = 90.0) -> KedaOperator:
    """KEDA's CRDs applied and keda-operator running against `server`, ready: its /readyz answers 200 and
    its gRPC metrics service listens (so it loaded the certificates). It acts on every ScaledObject (no
    WATCH_LABEL_SELECTOR). Blocking; fails the test when KEDA is not built."""
    controller = built(NAME)
    t0 = time.monotonic()
    directory.mkdir(parents=True, exist_ok=True)
    crds = apply_crds(server, controller)

    certs = directory / "certs"
    tls = make_tls(certs, dns=("keda-operator", f"keda-operator.{NAMESPACE}.svc"))
    # The names KEDA's metricsservice/utils.LoadGrpcTLSCredentials reads (a Secret's keys, mounted).
    (certs / "tls.crt").write_bytes(tls.cert_file.read_bytes())
    (certs / "tls.key").write_bytes(tls.key_file.read_bytes())
    (certs / "tls.key").chmod(0o600)
    custom_ca = directory / "custom-ca"
    custom_ca.mkdir(exist_ok=True)

    health, metrics, grpc = free_port(), free_port(), free_port()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(directory),
        "KUBECONFIG": str(server.admin_kubeconfig),
        "WATCH_NAMESPACE": "",
        "KEDA_CLUSTER_OBJECT_NAMESPACE": NAMESPACE,
        "POD_NAMESPACE": NAMESPACE,
    }
    process = ManagedProcess(
        [
            str(controller.binary),
            "--leader-elect=false",
            f"--health-probe-bind-address=127.0.0.1:{health}",
            f"--metrics-bind-address=127.0.0.1:{metrics}",
            f"--metrics-service-bind-address=127.0.0.1:{grpc}",
            "--enable-cert-rotation=false",
            f"--cert-dir={certs}",
            f"--ca-dir={custom_ca}",
            "--zap-encoder=console",
            "--zap-log-level=info",
            "--zap-time-encoding=rfc3339",
        ],
        directory / "keda-operator.log",
        env=env,
    )
    process.start()
    op = KedaOperator(controller, process, health, metrics, grpc, crds)
    try:
        _wait_ready(op, timeout)
    except BaseException:
        op.stop()
        raise
    op.ready_seconds = time.monotonic() - t0
    return op


def _wait_ready(op: KedaOperator, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        if not op.alive():
            code = op.process.proc.returncode if op.process.proc else None
            raise RuntimeError(f"keda-operator exited with {code}:\n{op.log_tail()}")
        try:
            status = _get(f"http://127.0.0.1:{op.health_port}/readyz")
            last = f"/readyz {status}"
            if status == 200 and _listening(op.grpc_port):
                return
            last += f"; gRPC metrics service not listening on {op.grpc_port}"
        except OSError as e:  # refused until it binds (urllib.error.URLError is an OSError)
            last = repr(e)
        if time.monotonic() > deadline:
            raise RuntimeError(f"keda-operator not ready after {timeout}s ({last}):\n{op.log_tail()}")
        time.sleep(0.1)
