"""The pure rules of triage and what changed (bot/triage/rules.py), and the queries policy's checks."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from bot.policy import PolicyError, load_policy
from bot.policy.queries import Unit, keys_regex, ksm_label
from bot.prom import Failed, Matrix, Sample, Scalar, Series, Text, Vector, Why
from bot.prom.promql import escape
from bot.triage import changed, rules, streams
from bot.triage.rules import Demand, Figure, State, Trend
from levers.requests import LeverRequest
from tests.support.triage import SHIPPED

SHIFT = {"rise": 0.2, "drop": 0.5, "idle": 0.05}


def vec(*values: float) -> Vector:
    return Vector(tuple(Sample({"cell": "c"}, v) for v in values))


# --------------------------------------------------------------------------- figures


def test_no_series_is_no_data_and_a_failure_is_failed_never_zero():
    assert rules.figure(Vector(())) == Figure(State.no_data)
    assert rules.show(rules.figure(Vector(())), Unit.count) == "no data"
    failed = rules.figure(Failed(Why.REJECTED, "1:5: parse error", 400))
    assert failed.state is State.failed and failed.reason == "Prometheus rejected the query (1:5: parse error)"
    assert rules.show(failed, Unit.count) == "failed"
    assert rules.show(rules.figure(vec(0.0)), Unit.count) == "0"


def test_several_series_show_the_largest_and_say_how_many():
    assert rules.figure(vec(0.2, 0.9, 0.5)) == Figure(State.ok, 0.9, 3)
    assert rules.figure(vec(math.nan, 0.4)) == Figure(State.ok, 0.4, 2)
    assert math.isnan(rules.figure(vec(math.nan)).value or 0)
    assert rules.figure(Scalar(2.0)) == Figure(State.ok, 2.0, 1)


def test_a_range_vector_or_a_string_is_not_a_figure():
    assert rules.figure(Matrix((Series({}, ((1.0, 1.0),)),))).reason == (
        "the query returns a range vector, not one number per cell"
    )
    assert rules.figure(Text("x")).reason == "the query returns a string, not one number per cell"


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (14.55, Unit.seconds, "14.6 s"),
        (0.32, Unit.seconds, "320 ms"),
        (20.0, Unit.burn, "20.0x"),
        (0.1, Unit.burn, "0.100x"),
        (0.97, Unit.percent, "97.0%"),
        (0.0, Unit.percent, "0%"),
        (2.0, Unit.per_second, "2.00/s"),
        (12.0, Unit.count, "12"),
        (2.008, Unit.count, "2"),  # increase() extrapolates a little: still 2 errors
        (2.5, Unit.count, "2.50"),
        (3.0, Unit.ratio, "3.00"),
        (1234567.0, Unit.count, "1234567"),
        (math.inf, Unit.ratio, "+Inf"),
        (math.nan, Unit.burn, "NaN"),
    ],
)
def test_figures_carry_their_unit(value, unit, shown):
    assert rules.show(Figure(State.ok, value, 1), unit) == shown


def test_the_table_aligns_values_under_their_cell():
    text = rules.table("", ["us-east-3", "b"], [("TTFT p99", ["14.6 s", "no data"]), ("Kueue", ["12", "0"])])
    assert text.split("\n") == [
        "          us-east-3        b",
        "TTFT p99     14.6 s  no data",
        "Kueue            12        0",
    ]


def test_a_taint_key_cannot_break_out_of_its_promql_string():
    assert escape('a"b\\c') == 'a\\"b\\\\c'


# --------------------------------------------------------------------------- what changed


def test_minority_names_the_nodes_off_the_common_value():
    values = {f"n{i}": "550" for i in range(5)} | {"n7": "560", "n9": "560", "n8": None}
    assert rules.minority(values, 5) == {"560": ["n7", "n9"]}
    assert rules.minority({"a": "1", "b": "1"}, 5) == {}


@pytest.mark.parametrize(
    ("before", "now", "trend"),
    [
        (10, 16, Trend.rose),
        (10, 11, Trend.steady),
        (10, 5, Trend.drained),
        (10, 0, Trend.drained),
        (0, 3, Trend.new),
        (0.01, 0.02, Trend.idle),
        (None, 3, Trend.unknown),
        (3, None, Trend.unknown),
    ],
)
def test_trend(before, now, trend):
    assert rules.trend(Demand(before, now), SHIFT["rise"], SHIFT["drop"], SHIFT["idle"]) is trend


def test_a_rise_while_another_cell_drained_is_a_capacity_shift():
    demand = {"a": Demand(10, 16), "b": Demand(6, 0), "c": Demand(5, 5)}
    (shift,) = rules.capacity_shifts(demand, ["a"], **SHIFT)
    assert shift.cell == "a" and shift.drained == (("b", Demand(6, 0)),)


def test_a_rise_alone_is_not_a_capacity_shift():
    demand = {"a": Demand(10, 16), "c": Demand(5, 5)}
    assert rules.capacity_shifts(demand, ["a", "c"], **SHIFT) == []


def test_a_drain_alone_is_not_one_either_and_only_the_incidents_cells_are_called_out():
    demand = {"a": Demand(10, 10), "b": Demand(6, 0), "d": Demand(1, 9)}
    assert rules.capacity_shifts(demand, ["a", "b"], **SHIFT) == []
    (shift,) = rules.capacity_shifts(demand, ["d"], **SHIFT)
    assert shift.cell == "d"


def test_the_drained_cell_may_be_one_of_the_incident_s_own():
    demand = {"a": Demand(10, 16), "b": Demand(6, 0)}
    assert [s.cell for s in rules.capacity_shifts(demand, ["a", "b"], **SHIFT)] == ["a"]


def test_a_cell_without_figures_is_never_part_of_a_shift():
    demand = {"a": Demand(None, 16), "b": Demand(6, 0)}
    assert rules.capacity_shifts(demand, ["a"], **SHIFT) == []


def test_percent_change():
    assert rules.percent_change(Demand(10, 16)) == "+60%"
    assert rules.percent_change(Demand(6, 0)) == "-100%"
    assert rules.percent_change(Demand(0, 3)) == "new"


# --------------------------------------------------------------------------- the policy file


def _policy(tmp_path: Path, edit) -> Path:
    doc = yaml.safe_load((SHIPPED / "queries.yaml").read_text())
    edit(doc)
    (tmp_path / "queries.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return tmp_path


def test_the_shipped_queries_name_every_documented_row():
    # docs/signals-and-postmortem.md, "`/incident triage`", lists these rows.
    names = [q.name for q in load_policy(SHIPPED).queries.queries]
    assert names == [
        "ttft_p99",
        "burn_fast",
        "burn_slow",
        "kv_cache",
        "preemptions",
        "waiting_running",
        "xid_gpus",
        "xid_app",
        "ecc_dbe",
        "row_remap_pending",
        "quarantined",
        "kueue_pending",
    ]
    # No default answers 0 for a cell Prometheus knows nothing of.
    assert not [q.name for q in load_policy(SHIPPED).queries.queries if "vector(0)" in q.query]


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        (lambda d: d["queries"][0].update(query="up"), "queries.0.query: the query must contain $cell"),
        (
            lambda d: d["queries"][0].update(query='up{cell="$cell",x="$node"}'),
            "queries.0.query: unknown placeholder(s) $node; placeholders: $cell, $taint_key, $dedicated_taints, "
            "$gpu_node_label, $gpu_node_value",
        ),
        (lambda d: d["queries"][1].update(name="ttft_p99"), "query name 'ttft_p99' is used twice"),
        (lambda d: d["queries"][0].update(unit="furlongs"), "queries.0.unit: "),
        (lambda d: d["changed"]["demand"].update(query='x{cell="$cell"}'), "changed.demand.query: unknown placeholder"),
    ],
)
def test_a_bad_queries_file_is_refused_with_its_line(tmp_path, edit, error):
    d = _policy(tmp_path, edit)
    with pytest.raises(PolicyError) as err:
        load_policy(d)
    assert str(err.value).startswith(f"{d / 'queries.yaml'}:") and error in str(err.value), str(err.value)


# --------------------------------------------------------------------------- levers in the shift


def _request(req_id: str, lever: str, cell: str, **params: str) -> LeverRequest:
    return LeverRequest(
        id=req_id,
        incident="INC-7",
        lever=lever,
        target="edge/chat-global",
        cell=cell,
        context=cell,
        params=params,
        requester="U0OPS",
        state="done",
        created_at=0.0,
    )


def test_a_route_weight_request_counts_for_the_cell_its_backend_names():
    svc = SimpleNamespace(policy=load_policy(SHIPPED))
    drain = _request("REQ-4", "route-weight", "fleet", backend="cell-us-east-1")
    assert streams._cells_of(svc, drain) == {"fleet", "us-east-1"}
    assert streams._cells_of(svc, _request("REQ-5", "kueue-hold", "us-east-3")) == {"us-east-3"}


def test_the_shift_names_the_request_that_drained_the_cell():
    shift = rules.Shift("us-east-3", Demand(10, 16), (("us-east-1", Demand(6, 0)),))
    text = changed._shift_text(shift, 6, {"us-east-1": [_request("REQ-4", "route-weight", "fleet")]})
    assert text.startswith(
        ":warning: *Capacity shift, not a regression*: us-east-3's demand rose (+60%: 10.0 req/s → 16.0 req/s) "
        "while us-east-1 drained (-100%: 6.00 req/s → 0 req/s, after REQ-4 route-weight (INC-7)) in the last 6h."
    ), text


# --------------------------------------------------------------------------- the quarantine row's nodes


def test_the_gpu_node_selector_becomes_kube_state_metrics_label():
    assert ksm_label("nvidia.com/gpu.present=true") == ("label_nvidia_com_gpu_present", "true")
    assert ksm_label("pool==gpu") == ("label_pool", "gpu")
    for selector in ("nvidia.com/gpu.present", "a=b,c=d", "pool in (gpu)", "pool!=cpu"):
        with pytest.raises(ValueError, match="write it as `key=value` in levers"):
            ksm_label(selector)


def test_dedicated_taint_keys_become_one_anchored_regex():
    assert keys_regex(["nvidia.com/gpu", "sku"]) == r"nvidia\.com/gpu|sku"
    assert keys_regex([]) == "$^"  # matches no key: nothing is dedicated
