"""Every outbound integration has one shape (docs/contributing.md: "Add an outbound integration"): a
port the domain asks through, a settings model composed into Settings, a builder the runtime calls
once, its metrics, and its emulator in world/. ``INTEGRATIONS`` in bot/runtime.py is the one list."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import typing
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.metrics import MetricWrapperBase
from pydantic_settings import BaseSettings

from bot import config, metrics
from bot.config import KubeSettings, PrometheusSettings, Settings, SlackSettings
from bot.policy import load_policy
from bot.prom import Vector
from bot.prom.promql import fill
from bot.runtime import INTEGRATIONS, Integration
from fbworld.kube import FakeKubeCluster, write_kubeconfig
from fbworld.metrics import FleetMetrics
from fbworld.prometheus import DemoPrometheus
from tests.support.harness import TOKEN

REPO = Path(__file__).resolve().parents[1]
WORLD = REPO / "world" / "fbworld"

# What each builder is given here beyond its settings model's defaults: a new integration adds its line.
EXAMPLES: dict[str, tuple[dict[str, Any], tuple[Any, ...]]] = {
    "slack": ({"slack_bot_token": "xoxb-shape"}, ()),
    "kubernetes": ({}, (5.0,)),
    "prometheus": ({"prometheus_url": "http://127.0.0.1:9"}, ()),
}


def _port_methods(port: type) -> dict[str, inspect.Signature]:
    return {n: inspect.signature(f) for n, f in vars(port).items() if inspect.isfunction(f) and not n.startswith("_")}


async def missing_parts(it: Integration) -> list[str]:
    """What ``it`` lacks of the shape, one phrase each (empty: it has every part)."""
    out: list[str] = []
    # The port: a Protocol in the product, in the domain's terms.
    if not (isinstance(it.port, type) and getattr(it.port, "_is_protocol", False) and _port_methods(it.port)):
        out.append("port: not a Protocol with methods")
    # The settings: one of Settings' bases, its variables under one prefix.
    fields = list(getattr(it.settings, "model_fields", {}))
    if not (
        isinstance(it.settings, type) and issubclass(it.settings, BaseSettings) and issubclass(Settings, it.settings)
    ):
        out.append("settings: not a BaseSettings model Settings is composed of")
    elif it.settings is Settings or len({f.split("_")[0] for f in fields}) != 1:
        out.append(f"settings: its variables do not share one prefix ({fields})")
    # The builder: takes that settings model first, and what it builds answers every port method.
    hints = typing.get_type_hints(it.build) if callable(it.build) else {}
    params = list(inspect.signature(it.build).parameters) if callable(it.build) else []
    if not params or hints.get(params[0]) is not it.settings:
        out.append("build: its first parameter is not the integration's settings model")
    elif it.name not in EXAMPLES:
        out.append("build: no example in tests/test_integrations.py EXAMPLES")
    else:
        given, extra = EXAMPLES[it.name]
        client = it.build(it.settings(**given), *extra)
        try:
            for name, sig in _port_methods(it.port).items():
                got = getattr(client, name, None)
                if got is None or list(inspect.signature(got).parameters) != list(sig.parameters)[1:]:
                    out.append(f"build: what it builds lacks the port's {name}{sig}")
            # The metrics are counted by the client's own module.
            source = inspect.getsource(inspect.getmodule(type(client)) or type(client))
            for m in it.metrics:
                names = [n for n, v in vars(metrics).items() if v is m]
                if not any(f"metrics.{n}" in source for n in names):
                    out.append(f"metrics: {getattr(m, '_name', m)} is not counted by {type(client).__module__}")
        finally:
            await client.close()
    # The metrics: declared in bot/metrics.py's registry.
    registered = set(metrics.REGISTRY._names_to_collectors.values())
    if not it.metrics or not all(isinstance(m, MetricWrapperBase) and m in registered for m in it.metrics):
        out.append("metrics: none, or one not in bot.metrics.REGISTRY")
    # The emulator: a module of the simulated world.
    spec = importlib.util.find_spec(it.emulator) if it.emulator.startswith("fbworld.") else None
    if spec is None or spec.origin is None or not Path(spec.origin).is_relative_to(WORLD):
        out.append(f"emulator: {it.emulator!r} is not a module in world/fbworld")
    return out


@pytest.mark.parametrize("it", INTEGRATIONS, ids=lambda it: it.name)
async def test_every_integration_has_every_part(it):
    assert await missing_parts(it) == []


def test_every_settings_model_belongs_to_one_integration():
    models = {
        v
        for v in vars(config).values()
        if isinstance(v, type) and issubclass(v, BaseSettings) and v is not BaseSettings
    }
    assert models - {Settings} == {it.settings for it in INTEGRATIONS}
    assert len({it.name for it in INTEGRATIONS}) == len(INTEGRATIONS)


@pytest.mark.parametrize(
    "part,broken",
    [
        ("port", object),
        ("settings", Settings),
        ("build", lambda settings: None),
        ("metrics", ()),
        ("emulator", "fbworld.nowhere"),
    ],
)
async def test_a_missing_part_is_named(part, broken):
    it = dataclasses.replace(INTEGRATIONS[0], **{part: broken})
    assert any(m.startswith(f"{part}:") for m in await missing_parts(it)), part


# Each builder, pointed at its emulator through its settings alone, answers through its port.
def _built(name: str, settings: BaseSettings, *extra: Any) -> Any:
    return next(it for it in INTEGRATIONS if it.name == name).build(settings, *extra)


async def test_slack_built_against_its_emulator_answers_through_the_port(slack):
    group = slack.add_usergroup("ml-oncall", ["U1"])
    chat = _built("slack", SlackSettings(slack_bot_token=TOKEN, slack_api_url=slack.api_url))
    try:
        assert await chat.group_members(group) == ["U1"]
    finally:
        await chat.close()


async def test_kubernetes_built_against_its_emulator_answers_through_the_port(tmp_path):
    async with FakeKubeCluster("us-east-3") as cell:
        path = write_kubeconfig(tmp_path / "kubeconfig", {cell.name: cell.url})
        clusters = _built("kubernetes", KubeSettings(kubeconfig=path), 5.0)
        try:
            assert await clusters.contexts() == ["us-east-3"]
            assert await (await clusters.client("us-east-3")).served_version("", ["v1"]) == "v1"
        finally:
            await clusters.close()


async def test_prometheus_built_against_its_emulator_answers_through_the_port():
    policy = load_policy(None)
    async with DemoPrometheus(FleetMetrics(["us-east-3"], lambda: 1_700_000_000.0), policy) as server:
        prom = _built("prometheus", PrometheusSettings(prometheus_url=server.url))
        try:
            got = await prom.query(fill(policy.levers.headroom.query, cell="us-east-3"), 1_700_000_000)
        finally:
            await prom.close()
    assert isinstance(got, Vector) and [s.labels for s in got.samples] == [{"cell": "us-east-3"}], got
