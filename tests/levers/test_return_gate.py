"""The node return gate: `undo` of a node-quarantine looks at the node first (Ready; no fatal XID
since the quarantine, ECC double-bit errors since, no row remap pending or failed, on dcgm-exporter's
series in a real, backfilled Prometheus) and says what it found. A clean node returns at once; one
that failed a check waits for the IC's approval on a card, and nothing changes until it is given.

The quarantine lands at T0. Most nodes were quarantined for the XID they reported just before it:
that XID is no reason to keep them out (the gauge still holds it; the count's window still holds
it for five minutes), a fatal XID after it is, a repeat of the same code included where the
exporter counts XIDs (DCGM_EXP_XID_ERRORS_COUNT). Every test runs against dcgm-exporter with and
without that count, writing its host label `Hostname` (its releases) and `hostname` (its main
branch since d5e5f51): the gate's queries find the node's GPUs under either."""

from __future__ import annotations

import asyncio
import re

import pytest

from bot.policy.levers import ReturnGatePolicy
from fbworld.dcgm import XID_COUNT, Exporter, Gpu
from tests.support.harness import T0, audit_entries
from tests.support.levers import OPS, say
from tests.support.prometheus import (
    HOSTNAME_LABELS,
    PrometheusServer,
    dcgm_backfill,
    ensure_services_installed,
    ttft_scenario,
)

CELL = "us-east-3"
START, MINUTES, STEP = T0 - 3600, 180, 15  # history from an hour before the test clock to two after
SWAP, OTHER, CLEAN, PENDING, CAUSED, REPEAT, FAILED, AGAIN, DBE_NEW, DBE_OLD = (f"gpu-a3-{i:04d}" for i in range(10))
FATAL = set(ReturnGatePolicy().fatal_xids)
assert {79, 48} <= FATAL, "these tests use XID 79 and 48 as node-fatal: pick codes of return_gate.fatal_xids"


def history() -> list[Gpu]:
    """What each node's GPU 0 went through (its GPU 1 is clean throughout)."""
    gpus = {host: Gpu(host, 0, target={"cell": CELL}) for host in (f"gpu-a3-{i:04d}" for i in range(10))}
    gpus[CAUSED].xid(T0 - 120, 79)  # what it was quarantined for, nothing since
    gpus[REPEAT].xid(T0 - 120, 79).xid(T0 + 60, 79)  # the same code again: the gauge can't show it
    # The same again, while the one before leaves the count's window in the same scrape interval.
    gpus[SWAP].xid(T0 - 245, 79).xid(T0 + 60, 79)
    gpus[OTHER].xid(T0 - 120, 79).xid(T0 + 200, 48)
    gpus[AGAIN].xid(T0 - 120, 79).reload(T0 + 300).xid(T0 + 900, 79)  # rebooted, then off the bus again
    gpus[DBE_OLD].xid(T0 - 120, 48).dbe(T0 - 120)
    gpus[DBE_NEW].xid(T0 - 120, 48).dbe(T0 - 120).dbe(T0 + 120)
    gpus[PENDING].row_remap(T0 - 120, "uncorrectable")  # waits for a GPU reset
    gpus[FAILED].row_remap(T0 - 3000, "failed")  # long before the quarantine: the gauge stays 1
    return [*gpus.values(), *(Gpu(host, 1, target={"cell": CELL}) for host in gpus)]


MODES = [(label, counts) for counts in (True, False) for label in HOSTNAME_LABELS]


@pytest.fixture(scope="module", params=MODES, ids=[f"{label}-{'count' if c else 'gauge'}" for label, c in MODES])
def exporter(request) -> Exporter:
    label, counts = request.param
    exporter = Exporter(hostname_label=label)  # the XID gauge, ECC and row-remap fields
    return exporter.with_counters(XID_COUNT) if counts else exporter


@pytest.fixture(scope="module")
def prometheus(exporter, tmp_path_factory):
    ensure_services_installed()
    sc = ttft_scenario({CELL: 0.001}, start_ts=START, minutes=MINUTES, step=STEP)
    stamps = [START + i * STEP for i in range(MINUTES * 60 // STEP + 1)]
    sc.series += dcgm_backfill(exporter, history(), stamps)
    prom = PrometheusServer(tmp_path_factory.mktemp("prom-gate"), sc)
    asyncio.run(prom.start())
    yield prom
    asyncio.run(prom.stop())


@pytest.fixture
def app_settings(prometheus) -> dict:
    return {"prometheus_url": prometheus.url}


def counts(exporter: Exporter) -> bool:
    return XID_COUNT in exporter.counters


def ours(cells, node: str) -> bool:
    return any(t["key"] == "gpu.corp/quarantine" for t in cells.east3.get("node", node)["spec"].get("taints", []))


async def undo_after(app, clock, node: str, seconds: float) -> str:
    """Quarantine ``node`` at T0, let ``seconds`` pass, and ask for the undo."""
    inc = await app.declare(roles={"ops": OPS})
    assert "applied and verified" in await say(app, f"lever node-quarantine {node} reason=xid", OPS, inc.channel_id)
    clock.advance(seconds)
    return await say(app, "undo REQ-1", OPS, inc.channel_id)


def returned(out: str) -> bool:
    return "undone by" in out and "verified" in out


async def test_a_clean_node_returns_at_once_and_says_what_was_checked(app, cells, clock):
    out = await undo_after(app, clock, CLEAN, 600)
    assert returned(out), out
    assert "Checked first: Ready=True (KubeletReady); no fatal XID since the quarantine at " in out, out
    assert "no ECC double-bit errors since the quarantine" in out and "no row remap pending or failed" in out, out
    assert not ours(cells, CLEAN)


@pytest.mark.parametrize("seconds", [120, 900], ids=["in-the-counts-window", "after-it"])
async def test_the_xid_a_node_was_quarantined_for_does_not_keep_it_out(app, cells, clock, exporter, seconds):
    out = await undo_after(app, clock, CAUSED, seconds)
    assert returned(out), out
    assert "no fatal XID since the quarantine at " in out, out
    # It says what it saw before the quarantine, so nobody wonders whether the XID was looked at.
    assert "XID 79 on GPU 0 (GPU-" in out and "before the quarantine" in out, out
    if not counts(exporter):
        assert "a repeat of XID 79 can't be seen on DCGM_FI_DEV_XID_ERRORS" in out, out
    assert not ours(cells, CAUSED)


@pytest.mark.parametrize("node", [REPEAT, SWAP])
async def test_the_same_fatal_xid_again_is_caught_where_the_exporter_counts_xids(app, cells, clock, exporter, node):
    out = await undo_after(app, clock, node, 900)
    if counts(exporter):
        assert "not returned yet" in out and "XID 79 on GPU 0 (GPU-" in out, out
        assert "again since the quarantine" in out, out
        assert ours(cells, node)
    else:  # the gauge already held 79: the repeat is invisible, and the gate says so
        assert returned(out), out
        assert "a repeat of XID 79 can't be seen on DCGM_FI_DEV_XID_ERRORS" in out, out


async def test_a_repeat_within_the_counts_window_is_caught_too(app, cells, clock, exporter):
    out = await undo_after(app, clock, REPEAT, 120)
    if counts(exporter):
        assert "not returned yet" in out and "XID 79 on GPU 0 (GPU-" in out and "again since the quarantine" in out, out
    else:  # gauge only: the repeat is invisible there too, and the gate says so rather than pass silently
        assert returned(out), out
        assert "a repeat of XID 79 can't be seen on DCGM_FI_DEV_XID_ERRORS" in out, out


async def test_a_node_rebooted_since_and_clean_returns(app, cells, clock):
    # Rebooted after the quarantine (the gauge reads 0 again) and clean so far.
    assert returned(out := await undo_after(app, clock, AGAIN, 600)), out


async def test_a_fatal_xid_after_a_reboot_is_caught_when_it_comes_back(app, cells, clock):
    out = await undo_after(app, clock, AGAIN, 1200)
    assert "not returned yet" in out and "XID 79 on GPU 0 (GPU-" in out, out
    assert ours(cells, AGAIN)


async def test_a_new_fatal_xid_since_needs_the_ics_approval(app, cells, clock):
    inc = await app.declare(roles={"ops": OPS})
    ch = inc.channel_id
    assert "applied and verified" in await say(app, f"lever node-quarantine {OTHER} reason=xid79", OPS, ch)
    clock.advance(600)
    out = await say(app, "undo REQ-1", OPS, ch)
    assert out.startswith(f"REQ-1 node-quarantine {OTHER} (us-east-3): not returned yet."), out
    assert "XID 48 on GPU 0 (GPU-" in out and "needs the IC's approval: REQ-2 is on the approval card" in out, out
    assert not re.search(r"XID 79 on GPU 0 \([^)]*\) (again )?since", out), out  # what it was quarantined for
    assert ours(cells, OTHER)  # nothing changed
    # Asked again while it waits: the same card, not a second one.
    again = await say(app, "undo REQ-1", OPS, ch)
    assert "REQ-2 is on the approval card" in again, again
    cards = [m for m in app.slack.messages(ch) if "REQ-2 needs approval: return" in str(m.get("text", ""))]
    assert len(cards) == 1, [m.get("text") for m in app.slack.messages(ch)]
    assert "XID 48" in str(cards[0]["blocks"])

    # The requester can't approve their own; the IC does, and the node goes back as it is.
    assert "you cannot decide it" in await app.reply(await app.press("lever.approve", "REQ-2", user=OPS, channel=ch))
    said = await app.reply(await app.press("lever.approve", "REQ-2", user="U_IC", channel=ch), timeout=10)
    assert "undone by <@U0OPS>, approved by <@U_IC> over a failing check" in said, said
    assert not ours(cells, OTHER)
    undo = [e for e in await audit_entries(app, inc.id) if e["action"] == "lever.undo"]
    assert undo and undo[-1]["detail"]["approved_by"] == "U_IC"


async def test_ecc_double_bit_errors_before_the_quarantine_do_not_keep_a_node_out(app, cells, clock):
    out = await undo_after(app, clock, DBE_OLD, 600)
    assert returned(out), out
    assert "no ECC double-bit errors since the quarantine" in out, out


async def test_ecc_double_bit_errors_since_need_approval(app, cells, clock):
    out = await undo_after(app, clock, DBE_NEW, 600)
    assert "not returned yet" in out and "ECC double-bit errors since the quarantine" in out, out
    assert "no fatal XID since the quarantine" in out, out  # the XID 48 it was quarantined for is not new
    assert ours(cells, DBE_NEW)


async def test_a_row_remap_pending_needs_approval(app, cells, clock):
    out = await undo_after(app, clock, PENDING, 600)
    assert "not returned yet" in out and "row remap pending on GPU 0 (GPU-" in out and "GPU reset" in out, out
    assert ours(cells, PENDING)


async def test_a_row_remap_failure_needs_approval_and_is_not_called_new(app, cells, clock):
    out = await undo_after(app, clock, FAILED, 600)
    assert "not returned yet" in out and "row-remap failure on GPU 0 (GPU-" in out, out
    assert "stays 1 once a remapping failed" in out and "row-remap failure since" not in out, out
    assert ours(cells, FAILED)


async def test_a_node_that_is_not_ready_needs_approval(app, cells, clock):
    inc = await app.declare(roles={"ops": OPS})
    assert "applied" in await say(app, f"lever node-quarantine {CLEAN} reason=xid79", OPS, inc.channel_id)
    node = cells.east3.get("node", CLEAN)
    node["status"]["conditions"] = [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]
    cells.east3.put(node)
    clock.advance(600)
    out = await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert "not returned yet" in out and "not Ready: Ready=Unknown (NodeStatusUnknown)" in out, out
