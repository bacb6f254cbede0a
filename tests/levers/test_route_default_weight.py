"""route-weight never skips a step: at the Gateway API's default backendRef weight 1, 50% of 1 would
round to 0 and the first step would drain the cell. Such a backend is refused with what to do."""

from __future__ import annotations

import pytest

from fbworld.kube import samples
from tests.support.levers import OPS, patches, say


@pytest.fixture
def policy_overrides() -> dict:
    return {}


@pytest.fixture
def app_settings(prometheus) -> dict:
    return {"prometheus_url": prometheus.url}


async def test_default_weight_one_is_refused_not_drained(app, cells):
    route = samples.http_route("edge", "chat-local", {"cell-us-east-2": 1, "cell-us-east-3": 1})
    for ref in route["spec"]["rules"][0]["backendRefs"]:
        del ref["weight"]  # unset: the Gateway API's default, 1
    cells.east3.put(route)
    inc = await app.declare(roles={"ops": OPS})
    out = await say(
        app, "lever route-weight edge/chat-local --cell us-east-3 backend=cell-us-east-3", OPS, inc.channel_id
    )
    assert "not pulled, nothing changed" in out, out
    assert (
        "cell-us-east-3's baseline weight 1 can't be stepped along 100 → 50 → 0 % without skipping a step "
        "(50% of 1 is not a whole weight)" in out
    ), out
    assert "Set explicit weights on rule 0 first, e.g. 100 on each backend" in out, out
    assert not patches(cells.east3)
    refs = cells.east3.get("httproute", "chat-local", "edge")["spec"]["rules"][0]["backendRefs"]
    assert [r["weight"] for r in refs] == [1, 1]  # the CRD's default, untouched


async def test_weight_three_steps_three_distinct_weights(app, cells):
    cells.east3.put(samples.http_route("edge", "chat-local", {"cell-us-east-2": 3, "cell-us-east-3": 3}))
    inc = await app.declare(roles={"ops": OPS})
    out = await say(
        app, "lever route-weight edge/chat-local --cell us-east-3 backend=cell-us-east-3", OPS, inc.channel_id
    )
    assert "applied and verified (cell-us-east-3 weight 3→2 (67% of baseline 3)" in out, out
