"""The node return gate: `undo` of a node-quarantine looks at the node first (Ready; no fatal XID,
ECC double-bit or row-remap failure since the quarantine, on dcgm-exporter's series in a real,
backfilled Prometheus) and says what it found. A clean node returns at once; one that reported
XID 79 since waits for the IC's approval on a card, and nothing changes until it is given. Every
test runs against dcgm-exporter writing its host label `Hostname` (its releases) and `hostname`
(its main branch since d5e5f51): the gate's queries find the node's GPUs under either."""

from __future__ import annotations

import asyncio

import pytest

from fbworld.dcgm import XID_FIELDS
from tests.support.harness import T0, audit_entries
from tests.support.levers import OPS, say
from tests.support.prometheus import (
    HOSTNAME_LABELS,
    CellTriage,
    Exporter,
    Gpu,
    PrometheusServer,
    dcgm_backfill,
    ensure_services_installed,
    ttft_scenario,
)

CELL = "us-east-3"
HOSTS = [f"gpu-a3-{i:04d}" for i in range(10)]
XID_NODE, REMAP_NODE, CLEAN = "gpu-a3-0001", "gpu-a3-0003", "gpu-a3-0002"
START, MINUTES, STEP = T0 - 3600, 180, 15  # history from an hour before the test clock to two after


@pytest.fixture(scope="module", params=HOSTNAME_LABELS)
def prometheus(request, tmp_path_factory):
    """XID 79 on gpu-a3-0001 from 5 minutes after T0 (the quarantine lands at T0; the gauge holds it
    from then on); a failed row remapping on gpu-a3-0003 from then (its gauge stays 1); every other
    GPU clean (XID 0, no ECC double-bit errors). dcgm-exporter spells its host label `request.param`."""
    ensure_services_installed()
    exporter = Exporter(hostname_label=request.param)
    triage = CellTriage(hosts=HOSTS, xid=79, xid_hosts=[XID_NODE], xid_from_minute=65, exporter=exporter)
    sc = ttft_scenario({CELL: 0.001}, start_ts=START, minutes=MINUTES, step=STEP, triage={CELL: triage})
    stamps = [START + i * STEP for i in range(MINUTES * 60 // STEP + 1)]
    gpus = [Gpu(host, 0, target={"cell": CELL}) for host in HOSTS]
    for gpu in gpus:
        if gpu.host == REMAP_NODE:
            gpu.row_remap(T0 + 300, "failed")
    # The ECC and row-remap fields of the exporter's CSV (the XID ones come with the triage series).
    sc.series += dcgm_backfill(exporter, gpus, stamps, exporter.counters - XID_FIELDS)
    prom = PrometheusServer(tmp_path_factory.mktemp("prom-gate"), sc)
    asyncio.run(prom.start())
    yield prom
    asyncio.run(prom.stop())


@pytest.fixture
def app_settings(prometheus) -> dict:
    return {"prometheus_url": prometheus.url}


def ours(cells, node: str) -> bool:
    return any(t["key"] == "gpu.corp/quarantine" for t in cells.east3.get("node", node)["spec"].get("taints", []))


async def test_a_clean_node_returns_at_once_and_says_what_was_checked(app, cells, clock):
    inc = await app.declare(roles={"ops": OPS})
    assert "applied and verified" in await say(app, f"lever node-quarantine {CLEAN} reason=xid79", OPS, inc.channel_id)
    clock.advance(600)
    out = await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert "undone by" in out and "verified" in out, out
    assert "Checked first: Ready=True (KubeletReady); no fatal XID since the quarantine at " in out, out
    assert "no ECC double-bit errors since the quarantine" in out and "no row-remap failure since" in out, out
    assert not ours(cells, CLEAN)


async def test_a_node_that_reported_xid_79_since_needs_the_ics_approval(app, cells, clock):
    inc = await app.declare(roles={"ops": OPS})
    ch = inc.channel_id
    assert "applied and verified" in await say(app, f"lever node-quarantine {XID_NODE} reason=xid79", OPS, ch)
    clock.advance(600)
    out = await say(app, "undo REQ-1", OPS, ch)
    assert out.startswith(f"REQ-1 node-quarantine {XID_NODE} (us-east-3): not returned yet."), out
    assert "XID 79 on GPU 0 (GPU-" in out and "needs the IC's approval: REQ-2 is on the approval card" in out, out
    assert ours(cells, XID_NODE)  # nothing changed
    # Asked again while it waits: the same card, not a second one.
    again = await say(app, "undo REQ-1", OPS, ch)
    assert "REQ-2 is on the approval card" in again, again
    cards = [m for m in app.slack.messages(ch) if "REQ-2 needs approval: return" in str(m.get("text", ""))]
    assert len(cards) == 1, [m.get("text") for m in app.slack.messages(ch)]
    assert "XID 79" in str(cards[0]["blocks"])

    # The requester can't approve their own; the IC does, and the node goes back as it is.
    assert "you cannot decide it" in await app.reply(await app.press("lever.approve", "REQ-2", user=OPS, channel=ch))
    said = await app.reply(await app.press("lever.approve", "REQ-2", user="U_IC", channel=ch), timeout=10)
    assert "undone by <@U0OPS>, approved by <@U_IC> over a failing check" in said, said
    assert not ours(cells, XID_NODE)
    undo = [e for e in await audit_entries(app, inc.id) if e["action"] == "lever.undo"]
    assert undo and undo[-1]["detail"]["approved_by"] == "U_IC"


async def test_a_row_remap_failure_since_needs_approval_too(app, cells, clock):
    inc = await app.declare(roles={"ops": OPS})
    assert "applied" in await say(app, f"lever node-quarantine {REMAP_NODE} reason=xid64", OPS, inc.channel_id)
    clock.advance(600)
    out = await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert "not returned yet" in out and "row-remap failure since the quarantine" in out, out
    assert ours(cells, REMAP_NODE)


async def test_a_node_that_is_not_ready_needs_approval(app, cells, clock):
    inc = await app.declare(roles={"ops": OPS})
    assert "applied" in await say(app, f"lever node-quarantine {CLEAN} reason=xid79", OPS, inc.channel_id)
    node = cells.east3.get("node", CLEAN)
    node["status"]["conditions"] = [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]
    cells.east3.put(node)
    clock.advance(600)
    out = await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert "not returned yet" in out and "not Ready: Ready=Unknown (NodeStatusUnknown)" in out, out
