"""kubeconfig writer: one context per fake cluster, usable by kubectl and
kubernetes_asyncio alike."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from . import tls

FAKE_TOKEN = "fake-token"
FAKE_USER = "fake-user"


def cluster_entry(url: str) -> dict:
    """A kubeconfig `cluster:` for a fake server URL: https servers get the fake CA as
    certificate-authority-data, as a real kubeconfig carries its cluster's CA."""
    entry: dict = {"server": url}
    if url.startswith("https://"):
        entry["certificate-authority-data"] = base64.b64encode(tls.pki().ca_pem).decode()
    return entry


def write_kubeconfig(path: Path, clusters: dict[str, str], token: str = FAKE_TOKEN) -> Path:
    """clusters: {cluster/context name: server URL}. First entry is current-context. ``token``: the
    bearer token the servers accept (the demo fleet makes one per run)."""
    path = Path(path)
    names = list(clusters)
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": n, "cluster": cluster_entry(url)} for n, url in clusters.items()],
        "users": [{"name": FAKE_USER, "user": {"token": token}}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": FAKE_USER}} for n in names],
        "current-context": names[0] if names else "",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path
