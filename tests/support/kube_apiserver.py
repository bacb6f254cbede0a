"""A real kube-apiserver (and its etcd) on loopback, one per test session (per pytest-xdist worker).

The binaries come from `.ci/build-kube.sh` (upstream k8s.io/kubernetes and go.etcd.io/etcd, versions
pinned in .ci/kube/*/go.mod); .ci/run builds them and exports FIREBREAK_KUBE_BIN. Without them the
fixture fails (never skips): a lever suite that quietly did not run proves nothing.

What the server is set up with, as a cluster's control plane would be:
- TLS on 127.0.0.1 with a throwaway CA (fbworld.tls); an admin token (group system:masters) in a
  --token-auth-file; `--authorization-mode=Node,RBAC`; admission with ValidatingAdmissionPolicy;
- ServiceAccount signing keys and an issuer, so the TokenRequest API mints real, bound tokens;
- the upstream CRDs of what the levers act on (world/fbworld/kube/crds), applied with kubectl.

No kube-controller-manager, scheduler or kubelet runs, so what they would do the tests do themselves:
the namespace firebreak and ServiceAccount firebreak (the token's subject) are created here; every
namespace that gets pods needs its `default` ServiceAccount (the ServiceAccount admission plugin
refuses a pod without it; `namespace()` makes both); a Node is created with the `not-ready` taint
the TaintNodesByCondition plugin adds, which the node lifecycle controller would lift once the
kubelet reports Ready (`put_node()` does both); nothing garbage-collects or finalizes namespaces.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from fbworld.tls import make_tls
from tests.support.ports import free_port
from tests.support.services import ManagedProcess

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "world" / "fbworld" / "kube" / "crds"
BUILD = ".ci/build-kube.sh"
BOT_NS, BOT_SA = "firebreak", "firebreak"
# The bot's kubeconfig names these contexts, all this one server: overlays/example's topology (one
# cluster is Firebreak's home, its cell and the fleet context), under the lever tests' cell names.
BOT_CONTEXTS = ("us-east-3", "us-east-1", "global")
ADMIN_CONTEXT = "admin"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


def _required(module_dir: Path, module: str) -> str:
    for line in (module_dir / "go.mod").read_text().splitlines():
        words = line.split()
        if words[:2] == ["require", module] or (words[:1] == [module] and "indirect" not in line):
            return words[-1] if words[0] == module else words[2]
    raise RuntimeError(f"{module} is not required in {module_dir / 'go.mod'}")


def bin_dir() -> Path:
    """Where .ci/build-kube.sh puts the binaries: $FIREBREAK_KUBE_BIN, or its cache for the pinned versions."""
    if os.environ.get("FIREBREAK_KUBE_BIN"):
        return Path(os.environ["FIREBREAK_KUBE_BIN"])
    k8s = _required(REPO / ".ci" / "kube" / "apiserver", "k8s.io/kubernetes")
    etcd = _required(REPO / ".ci" / "kube" / "etcd", "go.etcd.io/etcd/server/v3")
    cache = Path(os.environ.get("FIREBREAK_KUBE_CACHE") or Path.home() / ".cache" / "firebreak" / "kube")
    return cache / f"{k8s}-{etcd}" / "bin"


class KubeBinariesMissing(RuntimeError):
    pass


def binaries() -> tuple[Path, Path]:
    d = bin_dir()
    apiserver, etcd = d / "kube-apiserver", d / "etcd"
    for b in (apiserver, etcd):
        if not os.access(b, os.X_OK):
            raise KubeBinariesMissing(f"{b} is missing: run `bash {BUILD}` (or set FIREBREAK_KUBE_BIN to its output)")
    return apiserver, etcd


def resource_name(obj: dict[str, Any]) -> str:
    """kubectl's kind.group for an object (`pod`, `deployment.apps`, `rollout.argoproj.io`)."""
    group = obj["apiVersion"].rpartition("/")[0]
    return f"{obj['kind'].lower()}.{group}" if group else obj["kind"].lower()


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed:\n{done.stderr[-2000:]}")


def _rss_mb(pid: int | None) -> float:
    if pid is None:
        return 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class KubeAPIServer:
    """Start with start(); stop with stop(). Blocking (a session fixture's setup and teardown)."""

    dir: Path
    port: int = field(default_factory=free_port)
    etcd_port: int = field(default_factory=free_port)
    etcd_peer_port: int = field(default_factory=free_port)
    admin_token: str = field(default_factory=lambda: base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("="))
    bot_token: str = ""
    ready_seconds: float = 0.0  # from starting etcd to CRDs established and the bot's token minted
    _etcd: ManagedProcess | None = None
    _apiserver: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.dir / "tls" / "ca.crt"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.dir / "admin.kubeconfig"

    @property
    def bot_kubeconfig(self) -> Path:
        """The bot's credential: a TokenRequest token of ServiceAccount firebreak/firebreak."""
        return self.dir / "bot.kubeconfig"

    def rss_mb(self) -> dict[str, float]:
        return {
            "kube-apiserver": _rss_mb(self._apiserver.pid if self._apiserver else None),
            "etcd": _rss_mb(self._etcd.pid if self._etcd else None),
        }

    # ------------------------------------------------------------------------------ start / stop

    def start(self) -> KubeAPIServer:
        apiserver, etcd = binaries()
        t0 = time.monotonic()
        self.dir.mkdir(parents=True, exist_ok=True)
        tls = make_tls(self.dir / "tls", dns=("localhost", "kubernetes", "kubernetes.default.svc"))
        _openssl(
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            "sa.key",
            cwd=tls.ca_file.parent,
        )
        _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=tls.ca_file.parent)
        tokens = self.dir / "tokens.csv"
        tokens.write_text(f'{self.admin_token},kube-admin,kube-admin,"system:masters"\n')
        tokens.chmod(0o600)

        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        client = f"http://127.0.0.1:{self.etcd_port}"
        self._etcd = ManagedProcess(
            [
                str(etcd), "--name", "default", "--data-dir", str(self.dir / "etcd"),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"default={peer}", "--initial-cluster-state", "new",
                "--unsafe-no-fsync",  # throwaway data: no fsync per write
                "--log-level", "warn",
            ],
            self.dir / "etcd.log",
        )  # fmt: skip
        self._etcd.start()
        self._apiserver = ManagedProcess(
            [
                str(apiserver),
                "--etcd-servers", client,
                "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
                "--secure-port", str(self.port),
                "--tls-cert-file", str(tls.cert_file), "--tls-private-key-file", str(tls.key_file),
                "--cert-dir", str(self.dir / "certs"),
                "--token-auth-file", str(tokens),
                "--authorization-mode", "Node,RBAC",
                "--enable-admission-plugins", "ValidatingAdmissionPolicy,NodeRestriction",
                "--service-account-issuer", "https://kubernetes.default.svc",
                "--service-account-key-file", str(tls.ca_file.parent / "sa.pub"),
                "--service-account-signing-key-file", str(tls.ca_file.parent / "sa.key"),
                "--api-audiences", "https://kubernetes.default.svc",
                "--service-cluster-ip-range", "10.96.0.0/16",
                "--profiling=false",
                "-v", "1",
            ],
            self.dir / "kube-apiserver.log",
        )  # fmt: skip
        self._apiserver.start()
        try:
            self._write_kubeconfig(self.admin_kubeconfig, {ADMIN_CONTEXT: self.admin_token})
            self._wait_ready(timeout=60)
            self._bootstrap()
        except BaseException:
            self.stop()
            raise
        self.ready_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        for p in (self._apiserver, self._etcd):
            if p is not None:
                p.stop()
        self._apiserver = self._etcd = None

    def log_tail(self, n: int = 3000) -> str:
        parts = []
        for p in (self._etcd, self._apiserver):
            if p is not None:
                parts.append(f"--- {p.log_path.name}\n{p.log_tail(n)}")
        return "\n".join(parts)

    def _wait_ready(self, timeout: float) -> None:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        req = urllib.request.Request(f"{self.url}/readyz", headers={"Authorization": f"Bearer {self.admin_token}"})
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for p in (self._etcd, self._apiserver):
                if p is not None and p.proc is not None and p.proc.poll() is not None:
                    raise RuntimeError(f"{p.argv[0]} exited with {p.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(req, context=ctx, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except urllib.error.HTTPError as e:
                last = f"{e.code} {e.read()[-500:]!r}"
            except (OSError, ssl.SSLError) as e:
                last = repr(e)
            time.sleep(0.1)
        raise RuntimeError(f"kube-apiserver not ready after {timeout}s ({last}):\n{self.log_tail()}")

    def _bootstrap(self) -> None:
        # Server-side apply: the upstream CRDs' schemas are too large for kubectl's last-applied annotation.
        self.kubectl("apply", "--server-side", "--field-manager", "test-setup", "-f", str(CRDS))
        self._wait_established(timeout=60)
        # Established is not yet servable: the first lists answer 429 "storage is (re)initializing"
        # while the CRD's watch cache fills. Ready when every CRD lists.
        names = self.kubectl("get", "crd", "-o", "jsonpath={.items[*].metadata.name}").split()
        deadline = time.monotonic() + 30
        while names:
            done = self.kubectl_result("get", ",".join(names), "-A", "-o", "name")
            if done.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the CRDs do not list after 30s: {done.stderr}")
            time.sleep(0.1)
        self.namespace(BOT_NS)
        self.kubectl("-n", BOT_NS, "create", "serviceaccount", BOT_SA)
        self.bot_token = self.kubectl("-n", BOT_NS, "create", "token", BOT_SA, "--duration", "24h").strip()
        self._write_kubeconfig(self.bot_kubeconfig, dict.fromkeys(BOT_CONTEXTS, self.bot_token))

    def _wait_established(self, timeout: float) -> None:
        # Not `kubectl wait --for condition=Established crd --all` nor a jsonpath filter: both fail at
        # once ("<nil> is not array") on a CRD whose status has no conditions yet, as a busy server shows.
        deadline = time.monotonic() + timeout
        while True:
            items = json.loads(self.kubectl("get", "crd", "-o", "json"))["items"]
            waiting = [
                crd["metadata"]["name"]
                for crd in items
                if not any(
                    c.get("type") == "Established" and c.get("status") == "True"
                    for c in (crd.get("status") or {}).get("conditions") or []
                )
            ]
            if items and not waiting:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"CRDs not Established after {timeout}s: {', '.join(waiting) or 'none listed'}")
            time.sleep(0.2)

    def _write_kubeconfig(self, path: Path, contexts: dict[str, str]) -> None:
        ca = base64.b64encode(self.ca_file.read_bytes()).decode()
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "real", "cluster": {"server": self.url, "certificate-authority-data": ca}}],
            "users": [{"name": name, "user": {"token": token}} for name, token in contexts.items()],
            "contexts": [{"name": name, "context": {"cluster": "real", "user": name}} for name in contexts],
            "current-context": next(iter(contexts)),
        }
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        path.chmod(0o600)

    # ------------------------------------------------------------------------------ as admin

    def kubectl(self, *args: str, kubeconfig: Path | None = None, input: str | None = None, check: bool = True) -> str:
        """kubectl against this server, as admin unless ``kubeconfig`` says otherwise; its stdout. Blocking."""
        done = self.kubectl_result(*args, kubeconfig=kubeconfig, input=input)
        if check and done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        return done.stdout

    def kubectl_result(
        self, *args: str, kubeconfig: Path | None = None, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """kubectl's exit code, stdout and stderr (for refusals the test asserts on)."""
        kc = kubeconfig or self.admin_kubeconfig
        found = shutil.which("kubectl")
        if found is None:
            raise RuntimeError("kubectl is required (it is on the machine image; see .ci/run)")
        return subprocess.run(
            # Discovery cached per kubeconfig: another test server on a reused port would poison ~/.kube/cache.
            [found, "--kubeconfig", str(kc), "--cache-dir", str(self.dir / f".kube-cache-{kc.stem}"), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def apply_k(self, path: Path) -> str:
        """`kubectl apply -k <path>` as admin: how a platform team installs deploy/."""
        return self.kubectl("apply", "-k", str(path))

    def apply(self, *objs: dict[str, Any], server_side: bool = True) -> None:
        """Create or update objects as admin (server-side apply, field manager `test-setup`)."""
        docs = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objs)})  # kubectl expands a List
        args = ["apply", "--server-side", "--force-conflicts", "--field-manager", "test-setup", "-f", "-"]
        self.kubectl(*(args if server_side else ["apply", "-f", "-"]), input=docs)

    def put(self, *objs: dict[str, Any]) -> None:
        """Seed objects as admin with their status: the objects by one server-side apply (which ignores
        status), then each status through the status subresource, as its controller would write it;
        a Node's `not-ready` taint lifted as in put_node. The follow-ups run a few at a time."""
        if not objs:
            return
        self.apply(*({k: v for k, v in o.items() if k != "status"} for o in objs))
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(self._after_create, objs))

    def _after_create(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        ns = ["-n", meta["namespace"]] if meta.get("namespace") else []
        if obj.get("status"):
            patch = json.dumps({"status": obj["status"]})
            self.kubectl(
                "patch",
                resource_name(obj),
                meta["name"],
                *ns,
                "--subresource",
                "status",
                "--type",
                "merge",
                "-p",
                patch,
            )
        if obj["kind"] == "Node":
            self._node_ready(meta["name"])

    def put_node(self, node: dict[str, Any]) -> dict[str, Any]:
        """Create a Node as a kubelet registers one, then do what the node lifecycle controller does once
        that kubelet reports Ready: lift the `not-ready` taint TaintNodesByCondition added at create.
        The node's own spec.taints and status (conditions, capacity) are kept."""
        self.put(node)
        return self.get("node", node["metadata"]["name"])

    def _node_ready(self, name: str) -> None:
        now = self.get("node", name)
        wanted = [t for t in now["spec"].get("taints") or [] if t["key"] != NOT_READY_TAINT]
        if wanted != (now["spec"].get("taints") or []):
            # A JSON patch with a test op: never drops a taint someone added since the read.
            ops = [
                {"op": "test", "path": "/metadata/resourceVersion", "value": now["metadata"]["resourceVersion"]},
                {"op": "replace", "path": "/spec/taints", "value": wanted},
            ]
            self.kubectl("patch", "node", name, "--type", "json", "-p", json.dumps(ops))

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """An object read back as admin (kubectl get -o json, managedFields included)."""
        ns = ["-n", namespace] if namespace else []
        return json.loads(self.kubectl("get", resource, name, *ns, "-o", "json", "--show-managed-fields"))

    def namespace(self, name: str) -> None:
        """A namespace and its `default` ServiceAccount (kube-controller-manager's job; none runs here)."""
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": name}}
        self.apply(ns)
        self.apply(sa)

    def delete(self, resource: str, *names: str, namespace: str | None = None) -> None:
        ns = ["-n", namespace] if namespace else []
        self.kubectl("delete", resource, *names, *ns, "--ignore-not-found", "--wait=false")


def cond(obj: dict[str, Any], ctype: str) -> dict[str, Any]:
    """The object's status condition of this type, as its controller wrote it ({}: none)."""
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == ctype), {})


async def until_read(
    read: Callable[[], Any], ok: Callable[[Any], Any], what: str = "", seconds: float = 20.0, every: float = 0.1
) -> Any:
    """Poll a blocking `read` (kubectl, in a thread) until `ok` holds: the realkube tests' wait for a
    controller's reaction. Fails with what was awaited and the last read."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        got = await asyncio.to_thread(read)
        if ok(got):
            return got
        if loop.time() > deadline:
            shown = json.dumps(got, indent=1, default=str)[-3000:]
            raise AssertionError(f"after {seconds:g}s, not {what or 'as awaited'}:\n{shown}")
        await asyncio.sleep(every)


def start_kube_apiserver(directory: Path) -> KubeAPIServer:
    return KubeAPIServer(directory).start()


def can_i(server: KubeAPIServer, *args: Sequence[str] | str) -> bool:
    """`kubectl auth can-i` as the bot (a SelfSubjectAccessReview answered by the server's RBAC)."""
    out = server.kubectl("auth", "can-i", *map(str, args), kubeconfig=server.bot_kubeconfig, check=False)
    return out.strip() == "yes"


@pytest.fixture(scope="session")
def kube_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeAPIServer]:
    """One real kube-apiserver per session (per xdist worker), ready with the CRDs and the bot's token.
    Tests share it: each one seeds and cleans up its own objects (namespaces cannot be deleted here)."""
    try:
        server = start_kube_apiserver(tmp_path_factory.mktemp("kube-apiserver"))
    except KubeBinariesMissing as e:
        pytest.fail(str(e), pytrace=False)
    yield server
    server.stop()
