"""Triage's XID rows and its quarantine row on a real Prometheus backfilled (promtool) with the series
the exporters would have stored: dcgm-exporter's (world/fbworld/dcgm.py) and kube-state-metrics'.

XID rows: a GPU counts when it reported an XID of the class in the hour, by dcgm-exporter's XID count
(DCGM_EXP_XID_ERRORS_COUNT, one series per `xid` over a sliding window) when it publishes it, so a
fatal XID that repeats the held one, or one a follow-on code replaced within a scrape (48 then 45,
119 then 154), still counts; without that series, by the change of the XID gauge. The classes are
NVIDIA's XID catalog's immediate action ("resolution bucket"): fatal needs a GPU reset or a
reboot, application needs the application restarted, and IGNORE or "follow the other XID" is neither.

Quarantine row: every GPU node that can't take work, whoever made it so, counted as the
quarantine budget's floor counts it (levers/outofservice.py), from kube-state-metrics."""

from __future__ import annotations

import copy
import re

import pytest

from bot.policy import load_policy
from bot.policy.queries import Unit
from bot.triage import rules
from fbworld.dcgm import XID_COUNT, XID_FIELDS, Exporter, Gpu, scrape_times
from fbworld.kube import samples
from levers import outofservice
from tests.support.harness import T0
from tests.support.prometheus import PrometheusServer, Series, dcgm_backfill, ensure_services_installed
from tests.support.triage import DEGRADED, HEALTHY, SHIPPED, block_texts, posted, say, serve, table_of

START, END, STEP = T0 - 7200, T0 + 1800, 15
COUNTED, GAUGE_ONLY = DEGRADED, HEALTHY  # the first cell's exporter publishes the XID count, the second's not


def minute(m: int, s: int = 0) -> float:
    """``m`` minutes (and ``s`` seconds) after START: T0 is minute 120, the rows look at the hour before."""
    return START + m * 60 + s


# What each GPU's driver reported. Scrapes are every 15 s from START: two XIDs 5 s apart between
# two scrapes leave only the second on the gauge.
XIDS: dict[str, list[tuple[float, int]]] = {
    "repeat": [(minute(0), 79), (minute(110), 79)],  # off the bus two hours ago (held), and again
    "masked": [(minute(105, 20), 48), (minute(105, 25), 45)],  # double-bit ECC, then its follow-on 45
    "gsp": [(minute(110, 20), 119), (minute(110, 25), 154)],  # GSP timeout, then 154 (recovery action)
    "remap": [(minute(110), 63)],  # a row remap recorded: IGNORE
    "contained": [(minute(110), 94)],  # contained ECC: RESTART_APP
    "uncontained": [(minute(110), 95)],  # RESET_GPU
    "gsp-error": [(minute(110), 120)],  # RESET_GPU
    "escape": [(minute(110), 140)],  # unrecovered ECC escape: RESET_GPU
    "app": [(minute(110), 13)],  # RESTART_APP
    "stopped": [(minute(110), 43)],  # IGNORE
    "fine": [],
}

# NVIDIA's XID catalog, "Resolution Bucket (Immediate Action)", for the codes above and the other
# codes the policy lists (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, as NVIDIA's
# NVSentinel carries it: distros/kubernetes/nvsentinel/charts/gpu-health-monitor/xiderrorsmapping.csv).
CATALOG = {
    13: "RESTART_APP",
    31: "RESTART_APP",
    43: "IGNORE",
    45: "WORKFLOW_XID_45",  # follows another XID: act on that one
    46: "RESET_GPU",
    48: "WORKFLOW_XID_48",  # reset the GPU (with 63/64: drain and reset)
    62: "RESET_GPU",
    63: "IGNORE",
    64: "RESET_GPU",
    74: "WORKFLOW_NVLINK_ERR",
    79: "RESTART_BM",
    92: "IGNORE",
    94: "RESTART_APP",
    95: "RESET_GPU",
    109: "RESET_GPU",
    110: "RESET_GPU",
    119: "RESET_GPU",
    120: "RESET_GPU",
    136: "RESET_GPU",
    140: "RESET_GPU",
    143: "RESET_GPU",
    154: "XID_154",  # the recovery action of another XID: act on that one
    155: "RESET_GPU",
    156: "RESET_GPU",
    158: "RESET_GPU",
    160: "RESTART_BM",
}
FATAL_ACTIONS = {"RESET_GPU", "RESTART_BM", "WORKFLOW_XID_48", "WORKFLOW_NVLINK_ERR"}


def _gpus(cell: str) -> list[Gpu]:
    out = []
    for name, events in XIDS.items():
        gpu = Gpu(f"gpu-{cell}-{name}", 0, target={"cell": cell})
        for at, code in events:
            gpu.xid(at, code)
        out.append(gpu)
    return out


# ------------------------------------------------------------------------------ GPU nodes and KSM

FIREBREAK_TAINT = {"key": "gpu.corp/quarantine", "value": "xid-79", "effect": "NoSchedule"}


def _nodes(cell: str, n: int) -> list[dict]:
    nodes = [samples.gpu_node(f"gpu-{cell}-{i:02d}", cell) for i in range(n)]
    cpu = samples.gpu_node(f"cpu-{cell}-00", cell)  # not a GPU node: never counted
    del cpu["metadata"]["labels"]["nvidia.com/gpu.present"]
    cpu["spec"]["taints"], cpu["spec"]["unschedulable"] = [], True
    return [*nodes, cpu]


def _degraded_nodes() -> list[dict]:
    """Ten GPU nodes: four can't take work, each made so by someone else; two carry taints that
    don't fence (the GPU pool's own dedicated taint on all, a PreferNoSchedule on one)."""
    nodes = _nodes(COUNTED, 10)
    nodes[0]["spec"]["taints"].append(dict(FIREBREAK_TAINT))  # Firebreak's node-quarantine
    nodes[1]["spec"]["taints"].append({"key": "remediation.medik8s.io/self-node-remediation", "effect": "NoSchedule"})
    nodes[2]["spec"]["unschedulable"] = True  # kubectl cordon, and the node controller's mirror taint
    nodes[2]["spec"]["taints"].append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    nodes[3]["spec"]["taints"].append(
        {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}
    )
    nodes[4]["spec"]["taints"].append({"key": "example.com/maintenance-soon", "effect": "PreferNoSchedule"})
    return nodes


NODES = {COUNTED: _degraded_nodes(), GAUGE_ONLY: _nodes(GAUGE_ONLY, 2)}


def ksm_node_series(cell: str, nodes: list[dict], times: list[float]) -> list[Series]:
    """kube-state-metrics' node series (internal/store/node.go): kube_node_labels with the labels
    --metric-labels-allowlist names (here nodes=[nvidia.com/gpu.present]) as label_<key, each
    character outside [a-zA-Z0-9_] an underscore>, kube_node_spec_unschedulable (1 when cordoned,
    else 0) and kube_node_spec_taint{key, value, effect} (1 per taint); `cell` is the scrape's."""
    out = []
    for node in nodes:
        name, labels = node["metadata"]["name"], node["metadata"]["labels"]
        allowed = {
            f"label_{re.sub('[^a-zA-Z0-9_]', '_', k)}": v for k, v in labels.items() if k == "nvidia.com/gpu.present"
        }
        base = {"cell": cell, "node": name}
        out.append(Series("kube_node_labels", "gauge", {**base, **allowed}, [(t, 1) for t in times]))
        cordoned = 1 if node["spec"].get("unschedulable") else 0
        out.append(Series("kube_node_spec_unschedulable", "gauge", base, [(t, cordoned) for t in times]))
        for taint in node["spec"].get("taints") or []:
            taint_labels = {"key": taint["key"], "value": taint.get("value", ""), "effect": taint["effect"]}
            out.append(Series("kube_node_spec_taint", "gauge", {**base, **taint_labels}, [(t, 1) for t in times]))
    return out


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    ensure_services_installed()
    times = scrape_times(START, END, STEP)
    counted = Exporter(hostname_label="hostname").with_counters(XID_COUNT)
    gauge_only = Exporter(hostname_label="Hostname")
    assert XID_COUNT not in gauge_only.counters
    series = dcgm_backfill(counted, _gpus(COUNTED), times, XID_FIELDS)
    series += dcgm_backfill(gauge_only, _gpus(GAUGE_ONLY), times, XID_FIELDS)
    for cell, nodes in NODES.items():
        series += ksm_node_series(cell, nodes, times)
    yield from serve(PrometheusServer(tmp_path_factory.mktemp("prom"), series))


@pytest.fixture
def app_settings(prometheus) -> dict:
    return {"prometheus_url": prometheus.url, "firebreak_policy_dir": str(SHIPPED)}


async def _triage(app, cells) -> dict:
    for cell, nodes in NODES.items():
        for node in nodes:
            (cells.degraded if cell == COUNTED else cells.healthy).put(copy.deepcopy(node))
    inc = await app.declare(cells=(COUNTED, GAUGE_ONLY))
    out = await say(app, "triage", "U_ANYONE", inc.channel_id)
    assert "posted in the channel" in out, out
    return posted(app, inc.channel_id, f"Triage for {inc.id}")


# ------------------------------------------------------------------------------ the tests


async def test_the_xid_rows_count_repeats_and_masked_codes_by_the_xid_count(app, cells):
    table = table_of(await _triage(app, cells))
    # With the count: repeat (79 again), masked (48 under its 45), gsp (119 under 154), uncontained
    # (95), gsp-error (120), escape (140). Without it, by the gauge: only the last three (a repeat
    # and a code replaced within a scrape are invisible to it).
    assert table["GPUs, fatal XID 1h"] == {COUNTED: "6", GAUGE_ONLY: "3"}, table["GPUs, fatal XID 1h"]
    # RESTART_APP: app (13) and contained (94); 43 (IGNORE) and 45 (follows the 48) are neither.
    assert table["GPUs, app XID 1h"] == {COUNTED: "2", GAUGE_ONLY: "2"}, table["GPUs, app XID 1h"]


def _classes(query: str) -> set[int]:
    """The XIDs a row counts; its count (`xid=~`) and gauge (`err_code=~`) forms name the same."""
    found = {
        label: m.group(1)
        for label, m in ((lb, re.search(rf'{lb}=~"([0-9|]+)"', query)) for lb in ("xid", "err_code"))
        if m
    }
    assert set(found) == {"xid", "err_code"} and found["xid"] == found["err_code"], found
    return {int(c) for c in found["xid"].split("|")}


def test_the_classes_are_the_catalogs_and_the_return_gate_shares_the_fatal_one():
    pol = load_policy(SHIPPED)
    rows = {q.name: q.query for q in pol.queries.queries}
    fatal, app = _classes(rows["xid_gpus"]), _classes(rows["xid_app"])
    assert 63 not in fatal and {95, 119, 120, 140} <= fatal and 94 in app and 154 not in fatal | app
    for code, action in CATALOG.items():
        assert (code in fatal) is (action in FATAL_ACTIONS), (code, action)
        assert (code in app) is (action == "RESTART_APP"), (code, action)
    assert set(pol.levers.node_quarantine.return_gate.fatal_xids) == fatal


async def test_the_quarantine_row_counts_every_node_out_as_the_budget_does(app, cells):
    msg = await _triage(app, cells)
    gpu = [n for n in NODES[COUNTED] if n["metadata"]["labels"].get("nvidia.com/gpu.present") == "true"]
    pol = load_policy(SHIPPED).levers.node_quarantine
    out = outofservice.out_of_service(gpu, pol.taint_key, pol.dedicated_taints)  # what the floor counts
    assert [o.name for o in out] == [f"gpu-{COUNTED}-0{i}" for i in range(4)]
    budget = rules.show(rules.Figure(rules.State.ok, len(out) / len(gpu), 1), Unit.percent)
    assert table_of(msg)["Quarantined GPU nodes"] == {COUNTED: budget, GAUGE_ONLY: "0%"}
    assert budget == "40.0%"
    # The same post names them, from the cluster, by the same definition.
    assert f"{COUNTED}: 4 of 10 GPU nodes can't take work" in "\n".join(block_texts(msg))
