"""The real Kueue controller-manager (sigs.k8s.io/kueue, the version .ci/controllers/kueue/go.mod pins)
against the session's real kube-apiserver, its webhooks reached on loopback.

What `start` does, as Kueue's own install (config/default) would, but with no Service in between:
- applies that version's CRDs (config/components/crd/bases) over the world's, server-side, so the
  server stores and prunes what the real controller serves;
- writes a Configuration (CONFIG below: why each setting) and runs `kueue --config` as admin;
- serves the webhooks with a throwaway certificate for 127.0.0.1 (fbworld.tls) and registers them
  from config/components/webhook/manifests.yaml with `clientConfig.url: https://127.0.0.1:<port><path>`
  and the CA bundle: Kueue's own kinds' webhooks and those of the integrations enabled here (an
  integration left off serves no handler, and its Pod/Deployment/StatefulSet webhooks with
  failurePolicy Fail would refuse every such write on the shared server);
- points the CRDs' conversion at the same server (config/components/crd/patches/webhook_in_*.yaml,
  those upstream's crd/kustomization.yaml applies): this version serves v1beta1 beside the v1beta2
  it stores, and converts between them in its webhook.
`stop` removes the webhook configurations and the conversion (the server would refuse every write
they cover once nothing answers), then stops the process.

The metrics server. With internal certificate management off (it would mint a certificate for
kueue-webhook-service.kueue-system.svc, which a webhook URL on 127.0.0.1 does not match), Kueue's
main.go reads the metrics certificate from the fixed path /etc/kueue/metrics/certs and exits when it
is missing. The process runs in its own mount namespace (unshare) with a read-only overlay of /etc
that adds that directory, so nothing is written to the machine's /etc.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fbworld.tls import make_tls
from tests.support.controllers import BuiltController, built
from tests.support.kube_apiserver import KubeAPIServer
from tests.support.ports import free_port
from tests.support.services import ManagedProcess

CRD_BASES = "config/components/crd/bases"
CRD_PATCHES = "config/components/crd"  # kustomization.yaml and patches/
WEBHOOKS = "config/components/webhook/manifests.yaml"
# config/default's namePrefix, so the objects read as in an installed cluster.
PREFIX = "kueue-"
MUTATING, VALIDATING = f"{PREFIX}mutating-webhook-configuration", f"{PREFIX}validating-webhook-configuration"
KUEUE_GROUP = "kueue.x-k8s.io"
_QUEUE = "kueue.x-k8s.io/queue-name"
# integrations.frameworks, and the (group, resource) each one's webhooks act on.
INTEGRATIONS = {"batch/job": ("batch", "jobs"), "jobset.x-k8s.io/jobset": ("jobset.x-k8s.io", "jobsets")}
METRICS_CERTS = Path("kueue") / "metrics" / "certs"  # under /etc: main.go's metricsCertPath


def config(webhook_port: int, health_port: int, metrics_port: int, cert_dir: Path) -> dict[str, Any]:
    """The Configuration (config.kueue.x-k8s.io/v1beta2) the controller-manager runs with: upstream's
    config/components/manager/controller_manager_config.yaml, with what a loopback test run needs."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        # The default; named so the managedJobsNamespaceSelector default (not kube-system, not this) is plain.
        "namespace": "kueue-system",
        # One replica; no Lease to win before the controllers start.
        "leaderElection": {"leaderElect": False},
        # Loopback, free ports: the defaults (:8081, :8443, :9443) listen on every interface and collide.
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        # The certificate is ours (for 127.0.0.1, from fbworld.tls); see the module docstring.
        "internalCertManagement": {"enable": False},
        # Upstream's figures (the binary's defaults are 20/30): the tests create bursts of objects.
        "clientConnection": {"qps": 50, "burst": 100},
        # The job kinds the levers act on through Kueue: JobSets, and batch Jobs (Kueue's default one).
        "integrations": {"frameworks": list(INTEGRATIONS)},
        # Only jobs that name a queue (the default): other tests' JobSets on the shared server stay theirs.
        "manageJobsWithoutQueueName": False,
        # The on-demand visibility API is an aggregated API server (an APIService behind a Service,
        # listening on 0.0.0.0:8082 by default); no lever reads it and this server cannot route to it.
        "featureGates": {"VisibilityOnDemand": False},
    }


@dataclass
class KueueController:
    """Start with start(); stop with stop(). Blocking (a session fixture's setup and teardown)."""

    server: KubeAPIServer
    dir: Path
    controller: BuiltController = field(default_factory=lambda: built("kueue"))
    webhook_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    ready_seconds: float = 0.0  # from applying the CRDs to the webhooks called
    _ca: str = ""  # the webhook server's CA, base64 (caBundle)
    _proc: ManagedProcess | None = None
    _conversions: list[str] = field(default_factory=list)  # the CRDs whose conversion points here

    @property
    def version(self) -> str:
        return self.controller.version

    @property
    def webhook_url(self) -> str:
        return f"https://127.0.0.1:{self.webhook_port}"

    def alive(self) -> bool:
        return self._proc is not None and self._proc.proc is not None and self._proc.proc.poll() is None

    def log_tail(self, n: int = 4000) -> str:
        return self._proc.log_tail(n) if self._proc else ""

    # ------------------------------------------------------------------------------ start / stop

    def start(self, timeout: float = 90.0) -> KueueController:
        t0 = time.monotonic()
        self.dir.mkdir(parents=True, exist_ok=True)
        data = self.controller.data
        # The same field manager as the session's CRDs (tests/support/kube_apiserver.py): this version's
        # schemas replace the world's whole, fields it does not have included.
        self.server.kubectl(
            "apply", "--server-side", "--force-conflicts", "--field-manager", "test-setup", "-f", str(data / CRD_BASES)
        )
        self._wait_crds_list(timeout=60)
        tls = make_tls(self.dir / "tls")
        certs = self.dir / "webhook-certs"  # controller-runtime's names in certDir: tls.crt, tls.key
        overlay = self.dir / "etc-overlay"  # the lower layer over /etc: kueue/metrics/certs/
        for d in (certs, overlay / METRICS_CERTS):
            d.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tls.cert_file, d / "tls.crt")
            shutil.copyfile(tls.key_file, d / "tls.key")
        self._ca = base64.b64encode(tls.ca_file.read_bytes()).decode()
        cfg = self.dir / "config.yaml"
        cfg.write_text(
            yaml.safe_dump(config(self.webhook_port, self.health_port, self.metrics_port, certs), sort_keys=False)
        )
        self._proc = ManagedProcess(
            [*_in_mount_namespace(overlay), str(self.controller.binary), "--config", str(cfg), "--zap-log-level=2"],
            self.dir / "kueue.log",
            cwd=self.dir,
            env={**os.environ, "KUBECONFIG": str(self.server.admin_kubeconfig)},
        )
        self._proc.start()
        try:
            self._wait_ready(timeout)
            self._register_webhooks()
            self._wait_webhooks(timeout=30)
        except BaseException:
            self.stop()
            raise
        self.ready_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        """Webhooks first (nothing calls a stopped server), then the process. Safe to call twice."""
        try:
            self.server.kubectl("delete", "mutatingwebhookconfiguration", MUTATING, "--ignore-not-found")
            self.server.kubectl("delete", "validatingwebhookconfiguration", VALIDATING, "--ignore-not-found")
            for crd in self._conversions:
                body = {"spec": {"conversion": {"strategy": "None", "webhook": None}}}
                self.server.kubectl("patch", "crd", crd, "--type", "merge", "-p", json.dumps(body))
            self._conversions = []
        finally:
            if self._proc is not None:
                self._proc.stop()
                self._proc = None

    # ------------------------------------------------------------------------------ the steps

    def _wait_crds_list(self, timeout: float) -> None:
        # A CRD applied anew answers 429 "storage is (re)initializing" for a moment (kube_apiserver.py).
        names = [
            yaml.safe_load(p.read_text())["metadata"]["name"]
            for p in sorted((self.controller.data / CRD_BASES).glob("*.yaml"))
        ]
        deadline = time.monotonic() + timeout
        while True:
            done = self.server.kubectl_result("get", ",".join(names), "-A", "-o", "name")
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kueue's CRDs do not list after {timeout}s: {done.stderr}")
            time.sleep(0.2)

    def _wait_ready(self, timeout: float) -> None:
        """Kueue's readyz: the certificates loaded and the webhook server listening (main.go)."""
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            assert self._proc is not None and self._proc.proc is not None
            if self._proc.proc.poll() is not None:
                raise RuntimeError(f"kueue exited with {self._proc.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except urllib.error.HTTPError as e:
                last = f"{e.code} {e.read()[-300:]!r}"
            except OSError as e:
                last = repr(e)
            if time.monotonic() > deadline:
                raise RuntimeError(f"kueue not ready after {timeout}s ({last}):\n{self.log_tail()}")
            time.sleep(0.2)

    def _register_webhooks(self) -> None:
        data = self.controller.data
        docs = [d for d in yaml.safe_load_all((data / WEBHOOKS).read_text()) if d]
        wanted = {(KUEUE_GROUP, None), *INTEGRATIONS.values()}
        objs = []
        for doc in docs:
            kept = []
            for hook in doc["webhooks"]:
                if not any(_acts_on(rule, wanted) for rule in hook.get("rules") or []):
                    continue
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {"url": f"{self.webhook_url}{path}", "caBundle": self._ca}
                kept.append(hook)
            name = PREFIX + doc["metadata"]["name"]
            objs.append({**doc, "metadata": {"name": name}, "webhooks": kept})
        self.server.apply(*objs)
        kust = yaml.safe_load((data / CRD_PATCHES / "kustomization.yaml").read_text())
        for entry in kust.get("patches") or []:
            patch = yaml.safe_load((data / CRD_PATCHES / entry["path"]).read_text())
            conv = patch["spec"]["conversion"]
            path = conv["webhook"]["clientConfig"]["service"]["path"]
            conv["webhook"]["clientConfig"] = {"url": f"{self.webhook_url}{path}", "caBundle": self._ca}
            crd = patch["metadata"]["name"]
            self.server.kubectl(
                "patch", "crd", crd, "--type", "merge", "-p", json.dumps({"spec": {"conversion": conv}})
            )
            self._conversions.append(crd)

    def _wait_webhooks(self, timeout: float) -> None:
        """Until the server calls them: its webhook informer picks new configurations up a moment later.
        A server-side dry run of a queued Job answers suspended only once Kueue's job webhook defaulted
        it (over TLS the CA bundle vouches for: a certificate the server rejects fails the call)."""
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "kueue-webhook-probe", "namespace": "default", "labels": {_QUEUE: "probe"}},
            "spec": {
                "suspend": False,
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.corp/probe:1"}]}
                },
            },
        }
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            done = self.server.kubectl_result(
                "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(job)
            )
            if done.returncode == 0 and json.loads(done.stdout)["spec"].get("suspend") is True:
                break
            last = done.stderr or done.stdout[-300:]
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kueue's job webhook is not called after {timeout}s: {last}\n{self.log_tail()}")
            time.sleep(0.2)


def _acts_on(rule: dict[str, Any], wanted: set[tuple[str, str | None]]) -> bool:
    groups, resources = rule.get("apiGroups") or [], rule.get("resources") or []
    return any((g, None) in wanted or any((g, r.partition("/")[0]) in wanted for r in resources) for g in groups)


def _in_mount_namespace(overlay: Path) -> list[str]:
    """argv prefix: the command in a private mount namespace whose /etc is `overlay` over the real /etc
    (read-only, nothing written to either). As root a mount namespace suffices; otherwise a user
    namespace maps the caller to root in it (unprivileged user namespaces, Linux >= 5.11 for overlayfs)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        raise RuntimeError("unshare (util-linux) is needed to give Kueue its metrics certificate under /etc/kueue")
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    script = 'mount -t overlay overlay -o "lowerdir=$1:/etc" /etc && shift && exec "$@"'
    return [unshare, "--mount", "--propagation", "private", *user, "sh", "-c", script, "sh", str(overlay)]


def start(server: KubeAPIServer, directory: Path) -> KueueController:
    """Kueue running against `server`, ready and its webhooks called. Blocking."""
    return KueueController(server, Path(directory)).start()
