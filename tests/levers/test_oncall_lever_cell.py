"""Issue 35 item 4 for levers: with `oncall` in a lever seat's eligibility (roles.yaml), being on call
for one of the incident's cells made a pull in any of its cells eligible. Now the on-call counts
only in the cell the lever acts in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fbworld.kube import FakeKubeCluster, samples, write_kubeconfig
from tests.support.harness import RunningApp, start_app
from tests.support.signals import policy_dir

ONCALL_A = "UONCALLA"  # in no user group: eligible for Ops only as us-east-1's on-call
CELL_A, CELL_C = "us-east-1", "us-east-3"
CQ = r"/clusterqueues/research-h100$"


@pytest.fixture
async def world(
    slack, redis_url, clock, tmp_path: Path
) -> AsyncIterator[tuple[RunningApp, FakeKubeCluster, FakeKubeCluster]]:
    d = policy_dir(tmp_path, {CELL_A: ONCALL_A, CELL_C: None})
    roles = (d / "roles.yaml").read_text()
    assert 'ops: ["@ml-oncall"]' in roles
    (d / "roles.yaml").write_text(roles.replace('ops: ["@ml-oncall"]', 'ops: ["@ml-oncall", oncall]'))
    async with FakeKubeCluster(CELL_A) as a, FakeKubeCluster(CELL_C) as c:
        a.put(samples.cluster_queue())
        c.put(samples.cluster_queue())
        kc = str(write_kubeconfig(tmp_path / "kubeconfig", {CELL_A: a.url, CELL_C: c.url}))
        app = await start_app(slack, redis_url, clock, kubeconfig=kc, firebreak_policy_dir=d)
        try:
            yield app, a, c
        finally:
            await app.stop()


def _patches(cluster: FakeKubeCluster) -> list:
    return [r for r in cluster.find_requests("PATCH", CQ) if r.query.get("dryRun") != "All"]


async def test_an_on_call_pulls_only_in_their_own_cell(world):
    app, a, c = world
    inc = await app.declare("Queues starving", sev=2, user="U_IC", cells=(CELL_A, CELL_C), roles={"ops": ONCALL_A})
    ch = inc.channel_id

    out = await app.run(f"lever kueue-hold research-h100 --cell {CELL_C}", user=ONCALL_A, channel=ch)
    assert out.startswith("Not pulled:") and f"isn't in @ml-oncall or the on-call for {CELL_C}" in out, out
    assert _patches(c) == []

    out = await app.run(f"lever kueue-hold research-h100 --cell {CELL_A}", user=ONCALL_A, channel=ch)
    assert not out.startswith("Not pulled"), out
    assert len(_patches(a)) == 1 and _patches(c) == []
