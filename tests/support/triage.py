"""Fixtures for triage and what changed: a real Prometheus backfilled with exporter-shaped series
(tests/support/prometheus.py), fake cells (world/fbworld/kube), and the real app wired to both.

The clock is T0 (tests/conftest.py); every series, ReplicaSet, node and event is placed relative to
it, and objects get explicit creationTimestamps (the fake stamps wall-clock time otherwise)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from fbworld.kube import FakeKubeCluster, samples, write_kubeconfig
from tests.support.harness import T0, RunningApp, start_app
from tests.support.messages import block_texts
from tests.support.messages import say as say

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "policies"
DEGRADED, HEALTHY, DRAINED = "us-east-3", "us-east-1", "us-east-2"


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event(
    name: str,
    reason: str,
    at: float,
    *,
    kind: str = "Pod",
    obj: str = "vllm-0",
    ns: str = "serve-chat",
    type_: str = "Warning",
    count: int = 1,
    message: str = "",
) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": rfc3339(at - 60)},
        "involvedObject": {"kind": kind, "namespace": ns if kind != "Node" else None, "name": obj},
        "reason": reason,
        "message": message or f"{reason} for {obj}",
        "type": type_,
        "count": count,
        "firstTimestamp": rfc3339(at - 60),
        "lastTimestamp": rfc3339(at),
        "source": {"component": "kubelet"},
    }


def gpu_nodes(cell: FakeKubeCluster, name: str, n: int = 10, drivers: dict[int, str] | None = None) -> list[str]:
    """``n`` GPU nodes of ``name``, created a month before T0, on driver 550.127.05 unless ``drivers``
    says otherwise for a node index, all on one node image."""
    names = []
    for i in range(n):
        node = samples.gpu_node(f"gpu-{name}-{i:04d}", name)
        node["metadata"]["creationTimestamp"] = rfc3339(T0 - 30 * 86400)
        node["metadata"]["labels"]["nvidia.com/cuda.driver-version.full"] = (drivers or {}).get(i, "550.127.05")
        node["metadata"]["labels"]["node.corp/image-version"] = "gpu-2026-11-02"
        node["status"]["nodeInfo"] = {"kernelVersion": "6.8.0-1017-gcp", "kubeletVersion": "v1.33.5"}
        cell.put(node)
        names.append(node["metadata"]["name"])
    return names


@dataclass
class Cells:
    degraded: FakeKubeCluster
    healthy: FakeKubeCluster
    kubeconfig: Path


@pytest.fixture
async def cells(tmp_path: Path) -> AsyncIterator[Cells]:
    """us-east-3 and us-east-1 (GPU nodes, a ClusterQueue); us-east-2 has no kube context."""
    degraded, healthy = FakeKubeCluster(DEGRADED), FakeKubeCluster(HEALTHY)
    for c in (degraded, healthy):
        await c.start()
        c.put(samples.cluster_queue())
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", {DEGRADED: degraded.url, HEALTHY: healthy.url})
    yield Cells(degraded, healthy, kubeconfig)
    for c in (degraded, healthy):
        await c.stop()


def serve(prom):  # a module fixture's body: start, yield, stop
    asyncio.run(prom.start())
    yield prom
    asyncio.run(prom.stop())


def policy_dir(tmp: Path, extra_queries: list[dict] | None = None, **top: object) -> Path:
    """A policy directory: the shipped queries.yaml plus ``extra_queries``, top-level keys set from
    ``top`` (other files: the packaged ones)."""
    doc = yaml.safe_load((SHIPPED / "queries.yaml").read_text())
    doc["queries"] += extra_queries or []
    doc.update(top)
    d = tmp / "policies"
    d.mkdir(exist_ok=True)
    (d / "queries.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return d


@pytest.fixture
def app_settings() -> dict:
    """Overridden per module or test (prometheus_url, firebreak_policy_dir…)."""
    return {}


@pytest.fixture
async def app(slack, redis_url, clock, cells: Cells, app_settings: dict) -> AsyncIterator[RunningApp]:
    running = await start_app(slack, redis_url, clock, kubeconfig=str(cells.kubeconfig), **app_settings)
    yield running
    await running.stop()


def posted(app: RunningApp, channel: str, starts: str) -> dict:
    """The one message in ``channel`` whose fallback text starts with ``starts``."""
    found = [m for m in app.slack.messages(channel) if str(m.get("text", "")).startswith(starts)]
    assert len(found) == 1, [m.get("text") for m in app.slack.messages(channel)]
    return found[0]


def notes_of(message: dict) -> str:
    """The small print under a post (its context elements), one line each."""
    return "\n".join(
        e["text"] for b in message.get("blocks") or [] if b.get("type") == "context" for e in b.get("elements") or []
    )


def table_of(message: dict) -> dict[str, dict[str, str]]:
    """The triage table, parsed: {row title: {cell: shown value}}. Columns are joined by at least two
    spaces, and neither a title nor a value ("no data", "4.81 s") holds two in a row."""
    blocks = [t for t in block_texts(message) if t.startswith("```")]
    assert blocks, block_texts(message)
    out: dict[str, dict[str, str]] = {}
    for block in blocks:
        header, *rows = block.strip("`\n").split("\n")
        cells = re.split(r"\s{2,}", header.strip())
        for line in rows:
            title, *values = re.split(r"\s{2,}", line.strip())
            assert len(values) == len(cells), (line, cells)
            out.setdefault(title, {}).update(zip(cells, values, strict=True))
    return out
