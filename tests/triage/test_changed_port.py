"""`changed` reads the cells through the Kubernetes port (bot/clusters.py) alone: any implementation the
runtime hands over as ``Services.clusters`` serves it, not only levers/kube.py's (docs/contributing.md,
"Add an outbound integration"). Against a fake cell through the real app; no Prometheus."""

from __future__ import annotations

from typing import Any, cast

import pytest

from bot.clusters import Cluster, Clusters
from tests.support.triage import HEALTHY, SHIPPED, block_texts, gpu_nodes, posted, say


class Relay:
    """Another implementation of the port: every call passed on to the one it wraps."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class RelayedClusters(Relay):
    async def client(self, context: str) -> Cluster:
        return cast(Cluster, Relay(await self._inner.client(context)))


@pytest.fixture
def app_settings() -> dict:
    return {"firebreak_policy_dir": str(SHIPPED)}


async def test_changed_reads_a_cell_through_any_implementation_of_the_port(app, cells, monkeypatch):
    gpu_nodes(cells.healthy, HEALTHY)
    monkeypatch.setattr(app.services, "clusters", cast(Clusters, RelayedClusters(app.services.clusters)))
    inc = await app.declare(cells=(HEALTHY,))
    out = await say(app, "changed", "U_ANYONE", inc.channel_id)
    assert out.endswith("(1 stream couldn't be read)."), out  # demand alone: no PROMETHEUS_URL
    text = "\n".join(block_texts(posted(app, inc.channel_id, "What changed")))
    assert "    ◦ driver 550.127.05 on all 10 GPU nodes" in text, text
