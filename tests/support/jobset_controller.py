"""The real JobSet controller (sigs.k8s.io/jobset, built by `.ci/build-controllers.sh jobset`) running
against the session's real kube-apiserver, with its webhooks served to that API server on loopback.

What a cluster install (config/default) does, done here as admin, with what differs and why:
- the JobSet CRD of the controller's own version (its module's config/components/crd), server-side
  applied with --force-conflicts;
- the controller runs with an admin kubeconfig (its ClusterRole is not under test), leader election
  off (one replica), its health probe, metrics and webhook server on free loopback ports;
- internal cert management off (it would write a Secret and patch the webhook configurations' caBundle
  for a Service the API server cannot reach here): the webhook server gets a certificate for
  127.0.0.1 from fbworld.tls, and the module's webhook manifests (config/components/webhook, with its
  kustomize patches) are registered under config/default's `jobset-` name prefix with
  `clientConfig.url: https://127.0.0.1:<port><path>` and that CA as caBundle. stop() removes them
  first: their failurePolicy is Fail, so a stopped controller would otherwise refuse every JobSet.

Ready means the readyz probe answers (certificates loaded, webhook server started) and the API server
calls the mutating webhook (a dry-run JobSet comes back defaulted).
"""

from __future__ import annotations

import base64
import copy
import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from fbworld.tls import make_tls
from tests.support.controllers import BuiltController, built
from tests.support.kube_apiserver import KubeAPIServer
from tests.support.ports import free_port
from tests.support.services import ManagedProcess

NAME = "jobset"
CRD = "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"
WEBHOOKS = "config/components/webhook"
NAME_PREFIX = "jobset-"  # config/default/kustomization.yaml namePrefix
FIELD_MANAGER = "jobset-install"


def _patched(doc: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """The kustomize JSON 6902 patches the module ships (only `replace` of a list index is used)."""
    out = copy.deepcopy(doc)
    for op in patch:
        if op["op"] != "replace":
            raise RuntimeError(f"unexpected op in JobSet's webhook patch: {op}")
        *parents, last = op["path"].strip("/").split("/")
        node: Any = out
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        node[int(last) if isinstance(node, list) else last] = op["value"]
    return out


def webhook_configurations(data: Path, port: int, ca_file: Path) -> list[dict[str, Any]]:
    """The module's webhook configurations, patched as its kustomization does, reached by URL."""
    docs = [d for d in yaml.safe_load_all((data / WEBHOOKS / "manifests.yaml").read_text()) if d]
    kustomization = yaml.safe_load((data / WEBHOOKS / "kustomization.yaml").read_text())
    for entry in kustomization.get("patches") or []:
        target = entry["target"]
        patch = yaml.safe_load((data / WEBHOOKS / entry["path"]).read_text())
        docs = [
            _patched(d, patch) if (d["kind"], d["metadata"]["name"]) == (target["kind"], target["name"]) else d
            for d in docs
        ]
    ca = base64.b64encode(ca_file.read_bytes()).decode()
    for d in docs:
        d["metadata"]["name"] = NAME_PREFIX + d["metadata"]["name"]
        for hook in d["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
    return docs


def _probe_jobset() -> dict[str, Any]:
    """A JobSet for a dry-run create: the mutating webhook defaults spec.network.enableDNSHostnames."""
    container = {"name": "c", "image": "registry.invalid/probe:1"}
    job = {"spec": {"template": {"spec": {"containers": [container]}}}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "webhook-probe", "namespace": "default"},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": job}]},
    }


@dataclass
class JobSetController:
    server: KubeAPIServer
    dir: Path
    build: BuiltController = field(default_factory=lambda: built(NAME))
    webhook_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    ready_seconds: float = 0.0
    _proc: ManagedProcess | None = None
    _webhooks: list[tuple[str, str]] = field(default_factory=list)

    def start(self, timeout: float = 120.0) -> JobSetController:
        t0 = time.monotonic()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.server.kubectl(
            "apply", "--server-side", "--force-conflicts", "--field-manager", FIELD_MANAGER,
            "-f", str(self.build.data / CRD),
        )  # fmt: skip
        tls = make_tls(self.dir / "tls", host="127.0.0.1")
        certs = self.dir / "certs"  # controller-runtime's default names in a CertDir
        certs.mkdir(exist_ok=True)
        (certs / "tls.crt").write_bytes(tls.cert_file.read_bytes())
        (certs / "tls.key").write_bytes(tls.key_file.read_bytes())
        config = {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"port": self.webhook_port, "host": "127.0.0.1", "certDir": str(certs)},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}", "certDir": str(certs)},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
        }
        (self.dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        env = {**os.environ, "KUBECONFIG": str(self.server.admin_kubeconfig)}
        self._proc = ManagedProcess(
            [str(self.build.binary), "--config", str(self.dir / "config.yaml"), "--zap-log-level", "2"],
            self.dir / "jobset-controller.log",
            env=env,
        )
        self._proc.start()
        try:
            self._wait_ready(f"http://127.0.0.1:{self.health_port}/readyz", t0 + timeout)
            for doc in webhook_configurations(self.build.data, self.webhook_port, tls.ca_file):
                self._webhooks.append((doc["kind"], doc["metadata"]["name"]))
                self.server.apply(doc)
            self._wait_webhooks_called(t0 + timeout)
        except BaseException:
            self.stop()
            raise
        self.ready_seconds = time.monotonic() - t0
        return self

    def alive(self) -> bool:
        p = self._proc
        return p is not None and p.proc is not None and p.proc.poll() is None

    def _alive(self) -> None:
        p = self._proc
        if not self.alive():
            code = p.proc.returncode if p is not None and p.proc is not None else None
            raise RuntimeError(f"jobset-controller exited ({code}):\n{self.log_tail()}")

    def _wait_ready(self, url: str, deadline: float) -> None:
        last = ""
        while time.monotonic() < deadline:
            self._alive()
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except urllib.error.HTTPError as e:
                last = f"{e.code} {e.read()[-300:]!r}"
            except OSError as e:
                last = repr(e)
            time.sleep(0.2)
        raise RuntimeError(f"jobset-controller not ready ({url}: {last}):\n{self.log_tail()}")

    def _wait_webhooks_called(self, deadline: float) -> None:
        """The API server picks up new webhook configurations a moment later: until then a JobSet
        would be stored undefaulted. A dry run shows when the mutating webhook is called."""
        last = ""
        while time.monotonic() < deadline:
            self._alive()
            done = self.server.kubectl_result(
                "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(_probe_jobset())
            )
            if done.returncode == 0:
                net = (json.loads(done.stdout).get("spec") or {}).get("network") or {}
                if net.get("enableDNSHostnames") is True:
                    return
                last = "not defaulted yet"
            else:
                last = done.stderr.strip()
            time.sleep(0.2)
        raise RuntimeError(f"the API server does not call JobSet's webhooks ({last}):\n{self.log_tail()}")

    def stop(self) -> None:
        for kind, name in reversed(self._webhooks):
            resource = f"{kind.lower()}.admissionregistration.k8s.io"
            self.server.kubectl("delete", resource, name, "--ignore-not-found", check=False)
        self._webhooks.clear()
        if self._proc is not None:
            self._proc.stop()
            self._proc = None

    def log_tail(self, n: int = 4000) -> str:
        path = self.dir / "jobset-controller.log"
        try:
            return path.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def start(server: KubeAPIServer, directory: Path) -> JobSetController:
    """The real JobSet controller on `server`, ready (webhooks registered and called). Blocking."""
    return JobSetController(server, Path(directory)).start()


# ---------------------------------------------------------------------- what a Job controller does

NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"  # on every Job a JobSet makes


def jobs_of(server: KubeAPIServer, ns: str, name: str) -> list[dict[str, Any]]:
    """The child Jobs of JobSet `name`, by name, managedFields included (blocking)."""
    out = server.kubectl(
        "get", "jobs.batch", "-n", ns, "-l", f"{NAME_LABEL}={name}", "-o", "json", "--show-managed-fields"
    )
    return sorted(json.loads(out)["items"], key=lambda j: j["metadata"]["name"])


def complete_job(server: KubeAPIServer, ns: str, job: dict[str, Any]) -> None:
    """What the Job controller writes when an Indexed Job's pods all succeeded (none runs here)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    n = job["spec"]["completions"]
    reached = {"reason": "CompletionsReached", "message": "Reached expected number of succeeded pods"}
    conditions = [
        {"type": t, "status": "True", "lastTransitionTime": now, "lastProbeTime": now, **reached}
        for t in ("SuccessCriteriaMet", "Complete")
    ]
    status = {
        "startTime": now,
        "completionTime": now,
        "succeeded": n,
        "completedIndexes": "0" if n == 1 else f"0-{n - 1}",
        "conditions": conditions,
    }
    server.kubectl(
        "patch", "job", job["metadata"]["name"], "-n", ns, "--subresource", "status", "--type", "merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip


def delete_children(server: KubeAPIServer, ns: str, *names: str) -> None:
    """What the garbage collector would delete after JobSets `names` (none runs here): their Jobs and
    the headless Service named after each (spec.network's default subdomain)."""
    if not names:
        return
    server.kubectl(
        "delete", "jobs.batch", "-n", ns, "-l", f"{NAME_LABEL} in ({','.join(names)})", "--ignore-not-found",
        "--wait=false",
    )  # fmt: skip
    server.delete("service", *names, namespace=ns)
