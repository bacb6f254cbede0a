"""dcgm-exporter's GPU series as world/fbworld/dcgm.py makes them, checked where it matters on a real
Prometheus backfilled (promtool) with them: what each series does (the XID gauge held until the
driver reloads, the XID count's window, ECC's volatile and aggregate counters, the row-remap
fields), that the simulated Prometheus's DCGM rows are what the real one computes from the same
GPUs, and that the shipped return-gate queries find a node's GPUs whichever spelling of the host
label the exporter writes (`Hostname` in its releases, `hostname` on its main branch)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.clock import ManualClock
from bot.policy import load_policy
from bot.policy.sections import Policy
from bot.prom import Vector
from bot.prom.connect import Prometheus
from fbworld.dcgm import (
    ECC_DBE_AGG,
    FIGURES,
    HOSTNAME_LABELS,
    XID_COUNT,
    XID_WINDOW_MS,
    DcgmFleet,
    Exporter,
    Gpu,
    scrape_times,
)
from fbworld.drills.model import Step
from fbworld.fleet import CELLS, DemoFleet, model_dcgm
from fbworld.metrics import FleetMetrics
from fbworld.prometheus import DemoPrometheus
from tests.support.harness import T0
from tests.support.prometheus import PrometheusServer, dcgm_backfill, ensure_services_installed

REPO = Path(__file__).resolve().parents[3]
CELL = "us-east-3"
START, END, STEP = T0 - 3 * 3600, T0 + 3600, 15
# The GPUs something happens to (node, GPU index), and one that stays healthy.
A, B, C, D, E, F = (("gpu-a3-0101", 0), ("gpu-a3-0102", 1), ("gpu-a3-0103", 2), ("gpu-a3-0104", 3),
                    ("gpu-a3-0105", 0), ("gpu-a3-0106", 4))  # fmt: skip
HEALTHY = ("gpu-a3-0110", 0)


def history(dcgm: DcgmFleet) -> None:
    """What happened to the cell's GPUs."""

    def at(gpu: tuple[str, int], when: float, **what: object) -> None:
        dcgm.record(CELL, gpu[0], gpu[1], T0 + when, **what)  # type: ignore[arg-type]

    at(A, -7200, xid=13)  # an application's XID two hours ago
    at(A, -2400, xid=48)  # then a double-bit ECC error: fatal
    at(A, -600, reload=True)  # the GPU reset XID 48 needs: the gauge reads 0 again
    at(B, -1200, xid=79)  # off the bus
    at(B, -600, xid=79)  # and again: the held gauge cannot show it
    at(C, -1800, xid=31)  # an application's page fault
    at(D, -3000, dbe=2)  # two double-bit errors...
    at(D, -2700, reload=True)  # ...then a reload resets the volatile count
    at(D, -300, dbe=1)  # and one more
    at(E, -900, row_remap="uncorrectable")  # a row remapped, pending a reset...
    at(E, 600, reload=True)  # ...which comes
    at(F, -900, row_remap="failed")  # no spare row: failed, for good


@dataclass
class World:
    label: str
    exporter: Exporter
    dcgm: DcgmFleet
    real: PrometheusServer
    metrics: FleetMetrics  # what the simulated Prometheus answers from
    policy: Policy


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_policy(REPO / "policies")


@pytest.fixture(scope="module", params=HOSTNAME_LABELS)
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, policy: Policy) -> Iterator[World]:
    """The simulated fleet's dcgm-exporter (its host label spelled ``request.param``, its CSV with
    triage's fields, the XID count and the aggregate ECC count) with ``history``; a real Prometheus
    holding the series it would have scraped every 15 s; the simulated Prometheus over the same."""
    ensure_services_installed()
    clock = ManualClock(T0)
    fleet = DemoFleet({}, Path("kubeconfig"), FleetMetrics(CELLS, clock.now))
    exporter = Exporter(hostname_label=request.param).with_counters(XID_COUNT, ECC_DBE_AGG)
    dcgm = model_dcgm(fleet, policy, exporter)
    history(dcgm)
    gpus = [*dcgm.gpus(CELL), Gpu(HEALTHY[0], HEALTHY[1], target={"cell": CELL})]
    series = dcgm_backfill(exporter, gpus, scrape_times(START, END, STEP))
    real = PrometheusServer(tmp_path_factory.mktemp("prom"), series)
    asyncio.run(real.start())
    try:
        yield World(str(request.param), exporter, dcgm, real, fleet.metrics, policy)
    finally:
        asyncio.run(real.stop())


@pytest.fixture
async def real(world: World) -> AsyncIterator[Prometheus]:
    client = Prometheus(world.real.url)
    yield client
    await client.close()


@pytest.fixture
async def sim(world: World) -> AsyncIterator[Prometheus]:
    async with DemoPrometheus(world.metrics, world.policy) as demo:
        client = Prometheus(demo.url)
        yield client
        await client.close()


async def rows(prom: Prometheus, query: str, at: float) -> list[tuple[dict[str, str], float]]:
    got = await prom.query(query, at)
    assert isinstance(got, Vector), (query, got)
    return [(dict(s.labels), s.value) for s in got.samples]


def uuid_of(gpu: tuple[str, int]) -> str:
    return Gpu(*gpu).uuid


# ------------------------------------------------------------------------------- what the series do


async def test_the_xid_gauge_holds_its_last_code_until_the_driver_reloads(real: Prometheus, world: World) -> None:
    # `last_over_time(...[15s])` reads the last scrape only, as a live Prometheus's staleness does.
    def gauge(gpu: tuple[str, int]) -> str:
        return f'last_over_time(DCGM_FI_DEV_XID_ERRORS{{UUID="{uuid_of(gpu)}"}}[15s])'

    [(labels, value)] = await rows(real, gauge(B), T0 + 3000)  # 50 minutes after its last XID
    assert value == 79 and labels["err_code"] == "79" and labels["err_msg"] == "GPU has fallen off the bus"
    assert labels[world.label] == B[0] and {"gpu", "UUID", "pci_bus_id", "device", "modelName"} <= set(labels)
    other = next(label for label in HOSTNAME_LABELS if label != world.label)
    assert other not in labels
    [(labels, value)] = await rows(real, gauge(A), T0 - 900)  # XID 48 replaced the 13 and holds
    assert (value, labels["err_code"]) == (48, "48")
    [(labels, value)] = await rows(real, gauge(A), T0)  # reset: 0 again
    assert (value, labels["err_code"], labels["err_msg"]) == (0, "0", "No Error")


async def test_the_xid_count_counts_a_window_and_falls_back(real: Prometheus) -> None:
    count = f'last_over_time(DCGM_EXP_XID_ERRORS_COUNT{{UUID="{uuid_of(B)}"}}[15s])'
    window = str(XID_WINDOW_MS)
    [(labels, value)] = await rows(real, count, T0 - 1080)  # 2 minutes after the first XID 79
    assert (labels.get("xid"), labels["window_size_in_ms"], value) == ("79", window, 1)
    [(labels, value)] = await rows(real, count, T0 - 720)  # 8 minutes after: out of the 5-minute window
    assert (labels.get("xid"), labels["window_size_in_ms"], value) == (None, window, 0)
    # Two XIDs 79 ten minutes apart: the count never reaches 2, and increase() reads no increase at
    # all (the series starts at 1 and stays there): it is a window's count, not a running total.
    one = f'DCGM_EXP_XID_ERRORS_COUNT{{UUID="{uuid_of(B)}",xid="79"}}'
    assert [v for _, v in await rows(real, f"max_over_time({one}[1h])", T0)] == [1]
    assert [v for _, v in await rows(real, f"increase({one}[1h])", T0)] == [0]


async def test_ecc_volatile_resets_on_reload_and_aggregate_persists(real: Prometheus) -> None:
    def last(name: str) -> str:
        return f'last_over_time({name}{{UUID="{uuid_of(D)}"}}[15s])'

    assert [v for _, v in await rows(real, last("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"), T0)] == [1]
    assert [v for _, v in await rows(real, last("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"), T0)] == [3]
    # increase() takes the reload's fall as a counter reset: every error of the hour counts once.
    vol = f'increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{UUID="{uuid_of(D)}"}}[1h])'
    assert [v for _, v in await rows(real, vol, T0)] == [pytest.approx(3)]


async def test_a_row_remap_is_pending_until_the_reset_and_a_failure_stays(real: Prometheus) -> None:
    async def value(name: str, gpu: tuple[str, int], at: float) -> float:
        [(_, v)] = await rows(real, f'last_over_time({name}{{UUID="{uuid_of(gpu)}"}}[15s])', at)
        return v

    assert await value("DCGM_FI_DEV_ROW_REMAP_PENDING", E, T0) == 1
    assert await value("DCGM_FI_DEV_ROW_REMAP_PENDING", E, T0 + 1200) == 0
    assert await value("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", E, T0 + 1200) == 1  # the row stays remapped
    assert await value("DCGM_FI_DEV_ROW_REMAP_FAILURE", F, T0 + 3000) == 1
    assert await value("DCGM_FI_DEV_ROW_REMAP_FAILURE", E, T0 + 3000) == 0


# ------------------------------------------------------------------------------- the product's queries


@pytest.mark.parametrize("when", [-22 * 60, 0, 17 * 60], ids=["T0-22m", "T0", "T0+17m"])
async def test_the_simulated_dcgm_rows_are_what_a_real_prometheus_computes(
    real: Prometheus, sim: Prometheus, world: World, when: int
) -> None:
    taint_key = world.policy.levers.node_quarantine.taint_key
    expected = {  # by hand, from `history`
        -22 * 60: {"xid_gpus": 1, "xid_app": 1, "ecc_dbe": 2, "row_remap_pending": 0},
        0: {"xid_gpus": 2, "xid_app": 1, "ecc_dbe": 3, "row_remap_pending": 1},
        17 * 60: {"xid_gpus": 2, "xid_app": 1, "ecc_dbe": 1, "row_remap_pending": 0},
    }[when]
    for name in FIGURES:
        q = next(q for q in world.policy.queries.queries if q.name == name)
        text = q.render(CELL, taint_key)
        [(want_labels, want)] = await rows(real, text, T0 + when)
        got = [v for labels, v in await rows(sim, text, T0 + when) if labels == want_labels]
        # increase() extrapolates to the window's edges; the simulated one counts the errors.
        assert got == [pytest.approx(want, rel=0.01)], (name, text, got, want)
        assert want == pytest.approx(expected[name], rel=0.01), (name, want)


async def test_the_return_gates_queries_find_the_nodes_gpus_under_either_spelling(
    real: Prometheus, world: World
) -> None:
    gate = world.policy.levers.node_quarantine.return_gate
    queries = (gate.xid_query, gate.ecc_dbe_query, gate.row_remap_failure_query)
    xid, dbe, remap = (gate.render(q, B[0], CELL, "3600s") for q in queries)
    # One series per XID the GPU held in the hour (err_code is a label): 0, then 79.
    found = {(labels[world.label], labels["gpu"], labels["err_code"], v) for labels, v in await rows(real, xid, T0)}
    assert found == {(B[0], str(B[1]), "0", 0), (B[0], str(B[1]), "79", 79)}
    assert [v for _, v in await rows(real, dbe, T0)] == [0]
    assert [v for _, v in await rows(real, remap, T0)] == [0]
    xid, _, remap = (gate.render(q, F[0], CELL, "3600s") for q in queries)
    assert [v for _, v in await rows(real, remap, T0)] == [1]
    # One spelling alone misses an exporter that writes the other.
    other = next(label for label in HOSTNAME_LABELS if label != world.label)
    assert await rows(real, f'max_over_time(DCGM_FI_DEV_XID_ERRORS{{cell="{CELL}",{other}="{B[0]}"}}[1h])', T0) == []


# ------------------------------------------------------------------------------- the model itself


def test_the_exporter_refuses_what_it_does_not_model() -> None:
    with pytest.raises(ValueError, match="hostname_label 'HOSTNAME'"):
        Exporter(hostname_label="HOSTNAME")
    with pytest.raises(ValueError, match="DCGM keeps XIDs 600 s"):
        Exporter(xid_window_ms=900_000)
    with pytest.raises(ValueError, match="fields not modelled: DCGM_FI_DEV_GPU_TEMP"):
        Exporter(counters=frozenset({"DCGM_FI_DEV_GPU_TEMP"}))
    with pytest.raises(ValueError, match="XID 200"):
        Gpu("n").xid(T0, 200)


def test_a_fleet_records_one_event_on_a_gpu_it_has() -> None:
    dcgm = DcgmFleet(Exporter(), {CELL: ["gpu-a3-0101"]})
    with pytest.raises(ValueError, match="has no GPU node 'gpu-a3-0199'"):
        dcgm.record(CELL, "gpu-a3-0199", 0, T0, xid=79)
    with pytest.raises(ValueError, match="GPUs 0 to 7"):
        dcgm.record(CELL, "gpu-a3-0101", 8, T0, xid=79)
    with pytest.raises(ValueError, match="one event at a time"):
        dcgm.record(CELL, "gpu-a3-0101", 0, T0, xid=79, dbe=1)
    # A CSV without the ECC or pending fields: those rows have no series ("no data"), never 0.
    bare = DcgmFleet(Exporter(counters=frozenset({"DCGM_FI_DEV_XID_ERRORS"})), {CELL: ["gpu-a3-0101"]})
    assert bare.figure(CELL, "ecc_dbe", T0) is None and bare.figure(CELL, "row_remap_pending", T0) is None
    assert bare.figure(CELL, "xid_gpus", T0, frozenset({79})) == 0


def test_a_modelled_figure_is_not_set_by_hand(policy: Policy) -> None:
    fleet = DemoFleet({}, Path("kubeconfig"), FleetMetrics(CELLS))
    model_dcgm(fleet, policy, Exporter())
    with pytest.raises(ValueError, match="comes from a model"):
        fleet.metrics.set(CELL, "xid_gpus", 3)
    with pytest.raises(ValueError, match="xid_gpus comes from the GPUs' own dcgm-exporter series"):
        Step.model_validate({"at": "30s", "metrics": [{"cell": CELL, "figure": "xid_gpus", "value": 1}]})
    with pytest.raises(ValueError, match="one event per entry"):
        Step.model_validate({"at": "30s", "dcgm": [{"cell": CELL, "node": "gpu-a3-0101", "gpu": 0}]})
